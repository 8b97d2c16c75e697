/**
 * Superseded grants: a step-up's new grant retires the older grants it covers.
 */
import type { GrantRecord, SupersedeCandidate, SupersedeDecision } from "../../storage/contract.js";
import type { ServerContext } from "../config/context.js";

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
 * Retires the grants a new one supersedes: same user, client and resource, approved in the same
 * browser sign-in, with scopes the new grant covers (through the scope hierarchy). A step-up
 * (spec "Client handling (scope upgrade)") creates a new grant with the union of the old and the
 * challenged scopes; the old one would otherwise stay active with a live refresh token that its
 * client no longer holds or revokes, and a logout would leave it behind (RFC 9700 §4.14: refresh
 * tokens are credentials to limit).
 *
 * "Same sign-in" keeps other installations apart: a client id shared by several installations (a
 * pre-registered client, a metadata document) signed in on another device or browser has its own
 * grant, which a login here must not end. A grant approved in an earlier sign-in is left alone
 * and ends by revocation or its idle lifetime.
 *
 * Where it runs: inside the code redemption's own transaction when the store supports it (the
 * store applies {@link coveredInSignIn} and reports `retired`; one write per flow instead of a
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
    // All at once: the store's group commit (SQLite) puts them in one transaction.
    await Promise.all(
      candidates
        .filter((old) => supersedes(ctx, grant, old))
        .map(async (old) => {
          if (await revokeOnce(ctx, old.grantId, now)) auditSuperseded(ctx, grant, old.grantId);
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
 * The decision a store applies inside the redemption: the new grant covers `old` (same resource
 * and sign-in, scopes satisfied through the hierarchy). No order check there: the store offers only
 * grants committed before the new one, so of two concurrent redemptions only the later one sees
 * (and retires) the other.
 */
export function coveredInSignIn(ctx: ServerContext): SupersedeDecision {
  return (newer, old) =>
    old.resource === newer.resource &&
    old.sessionHash === newer.sessionHash &&
    ctx.hierarchy.satisfies(newer.scopes, old.scopes);
}

/**
 * After the commit every grant of the sign-in is visible, its own included, so the creation order
 * decides. `old` is active: listSupersedeCandidates returns no revoked grant.
 */
function supersedes(ctx: ServerContext, newer: GrantRecord, old: SupersedeCandidate): boolean {
  return isOlder(old, newer) && coveredInSignIn(ctx)(newer, old);
}

/**
 * Creation order, ties broken by id: a total order, so of two grants that cover each other (two
 * flows of one sign-in redeemed at the same moment) exactly one retires the other, never both.
 */
function isOlder(a: SupersedeCandidate, b: SupersedeCandidate): boolean {
  return a.createdAt < b.createdAt || (a.createdAt === b.createdAt && a.grantId < b.grantId);
}
