/**
 * Superseded grants: a step-up's new grant retires the older grant of the same instance it covers,
 * and a sign-in keeps a bounded number of active grants per client and resource.
 */
import type { GrantRecord, SupersedeCandidate, SupersedeDecision } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";

/**
 * Revocations of superseded grants still on their way, per server: concurrent flows of one sign-in
 * find the same older grants (each lists them before the others' revocations are committed), and
 * each revocation is a write of its own. A retirement that meets one on its way joins it instead of
 * sending another; the store's answer (true for the one write that revoked it) is the same.
 */
const revocationsOnTheirWay = new WeakMap<ServerContext, Map<string, Promise<boolean>>>();

function revokeOnce(ctx: ServerContext, grantId: string, now: number): Promise<boolean> {
  let onTheirWay = revocationsOnTheirWay.get(ctx);
  if (!onTheirWay) {
    onTheirWay = new Map();
    revocationsOnTheirWay.set(ctx, onTheirWay);
  }
  const joined = onTheirWay.get(grantId);
  if (joined) return joined.then(() => false);
  const revocation = ctx.store.revokeGrant(grantId, now);
  onTheirWay.set(grantId, revocation);
  const forget = () => onTheirWay.delete(grantId);
  revocation.then(forget, forget);
  return revocation;
}

/**
 * At most this many active grants per user, client, resource and sign-in: a new grant beyond it
 * retires the oldest. Why a bound: a step-up that cannot be told from a sibling instance (no
 * step-up mark, no DPoP key) leaves its older grant active, and without a bound every such step-up
 * would leave a live refresh token behind (RFC 9700 §4.14: refresh tokens are credentials to limit).
 * Why 32: twice the 16 concurrent workers of one browser session measured in issue 21, so the
 * clients people run (terminals of one CLI, windows of one app, agents' workers) never lose a
 * chain to it.
 */
export const MAX_ACTIVE_GRANTS_PER_SIGN_IN = 32;

/**
 * Retires the grants a new one supersedes, among the active grants of its sign-in (same user,
 * client and resource, approved in the same browser sign-in): see {@link supersededInSignIn} for
 * which. A step-up (spec "Client handling (scope upgrade)") creates a new grant with the union of
 * the old and the challenged scopes; the old one would otherwise stay active with a live refresh
 * token that its client no longer holds or revokes, and a logout would leave it behind.
 *
 * "Same sign-in" keeps other installations apart: a client id shared by several installations (a
 * pre-registered client, a metadata document) signed in on another device or browser has its own
 * grant, which a login here must not end. A grant approved in an earlier sign-in is left alone
 * and ends by revocation or its idle lifetime.
 *
 * Where it runs: inside the code redemption's own transaction when the store supports it (the
 * store applies {@link supersededInSignIn} and reports `retired`; one write per flow instead of a
 * redemption, a read and a revocation); otherwise here, after the new grant is committed. A failure
 * here is logged and leaves the old grants as they were (they were valid a moment ago), never
 * fails the token response; so does a failing decision inside the store (it retires nothing there,
 * and this runs instead).
 */
export async function retireSupersededGrants(
  ctx: ServerContext,
  grant: GrantRecord,
  /** The grants the redemption's transaction already retired (`superseded` in its result). */
  retired?: readonly string[],
): Promise<void> {
  if (grant.userId === undefined || grant.sessionHash === undefined) return;
  if (retired !== undefined) {
    for (const grantId of retired) auditSuperseded(ctx, grant, grantId);
    return;
  }
  try {
    // Only the active grants' fields the decision reads: this runs on every code redemption. A
    // store without the narrow read (written before it existed) answers the same through listGrants.
    const key = {
      userId: grant.userId,
      clientId: grant.clientId,
      resource: grant.resource,
      sessionHash: grant.sessionHash,
    };
    const candidates: readonly SupersedeCandidate[] = ctx.store.listSupersedeCandidates
      ? await ctx.store.listSupersedeCandidates(key)
      : await ctx.store.listGrants({ ...key, active: true });
    const now = ctx.now();
    // After the commit every grant of the sign-in is visible, its own and later ones included: the
    // creation order decides what counts as before it (`old` is active: revoked grants are not listed).
    const older = candidates.filter((old) => isOlder(old, grant));
    // All at once: the store's group commit (SQLite) puts them in one transaction.
    await Promise.all(
      supersededInSignIn(ctx)(grant, older).map(async (grantId) => {
        if (await revokeOnce(ctx, grantId, now)) auditSuperseded(ctx, grant, grantId);
      }),
    );
  } catch (error) {
    ctx.log.warn("grant_supersede_failed", {
      client_id: grant.clientId,
      grant_id: grant.grantId,
      error: error instanceof Error ? error.name : "unknown",
    });
  }
}

function auditSuperseded(ctx: ServerContext, grant: GrantRecord, grantId: string): void {
  ctx.audit?.({
    type: "grant_superseded",
    client_id: grant.clientId,
    grant_id: grantId,
    superseded_by: grant.grantId,
  });
}

/**
 * The decision, over the active grants of the new grant's sign-in that came before it (the store
 * applies it inside the redemption; {@link retireSupersededGrants} after the commit otherwise).
 *
 * Two instances of one client (two terminals of one CLI, two windows of one app, two installations
 * of a metadata-document client: one `client_id`) authorizing in one browser session must not log
 * each other out, so a covering grant is not enough: the new grant retires an older one only when
 * it proves to come from the same instance ({@link sameInstance}). Then the bound: past
 * {@link MAX_ACTIVE_GRANTS_PER_SIGN_IN} active grants (the new one included), the oldest go.
 * No order check inside the store: it offers only grants committed before the new one, so of two
 * concurrent redemptions only the later one sees (and may retire) the other.
 */
export function supersededInSignIn(ctx: ServerContext): SupersedeDecision {
  return (newer, candidates) => {
    const ofSignIn = candidates.filter(
      (old) => old.resource === newer.resource && old.sessionHash === newer.sessionHash,
    );
    const retired = new Set(
      ofSignIn.filter((old) => sameInstance(ctx, newer, old)).map((old) => old.grantId),
    );
    const kept = ofSignIn.filter((old) => !retired.has(old.grantId)).sort(byAge);
    const excess = kept.length + 1 - MAX_ACTIVE_GRANTS_PER_SIGN_IN;
    for (const old of kept.slice(0, Math.max(0, excess))) retired.add(old.grantId);
    return [...retired];
  };
}

/**
 * Whether `newer` comes from the instance that holds `old`, as far as the server can tell, and
 * covers it (its scopes satisfy the old ones through the hierarchy):
 * - the same DPoP key (RFC 9449 §5): the key is the instance's own, and both grants are bound to it;
 * - or a step-up of that grant: a co-hosted resource refused one of its access tokens for
 *   insufficient scope (`stepUpRequestedAt`, set through `requestStepUp`), and the new grant is
 *   strictly wider (spec "Client handling (scope upgrade)": the union of the old and the challenged
 *   scopes). A sibling holding the same scopes was not asked to step up, and is not retired.
 * Without either sign (a step-up at a resource that does not report to this server, a re-login of
 * the same instance) the older grant stays, and the bound retires it in time.
 */
function sameInstance(ctx: ServerContext, newer: GrantRecord, old: SupersedeCandidate): boolean {
  if (!ctx.hierarchy.satisfies(newer.scopes, old.scopes)) return false;
  if (newer.dpopJkt !== undefined && newer.dpopJkt === old.dpopJkt) return true;
  return old.stepUpRequestedAt !== undefined && !ctx.hierarchy.satisfies(old.scopes, newer.scopes);
}

/**
 * Creation order, ties broken by id: a total order, so of two grants that cover each other (two
 * flows of one sign-in redeemed at the same moment) exactly one can retire the other, never both.
 */
function isOlder(a: SupersedeCandidate, b: SupersedeCandidate): boolean {
  return a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.grantId < b.grantId);
}

function byAge(a: SupersedeCandidate, b: SupersedeCandidate): number {
  return isOlder(a, b) ? -1 : isOlder(b, a) ? 1 : 0;
}
