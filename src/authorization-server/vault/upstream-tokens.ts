/**
 * Upstream tokens kept for resource servers (docs/authorization-server.md "Upstream tokens for
 * resource servers"). When a provider's `keepTokens` is set, the tokens it issues at sign-in are
 * sealed under the key-encryption keys (shared/secret-envelope.ts, the one place secrets are
 * encrypted), held by the browser session that signed in, copied to every grant that session
 * approves, and handed out only through ../endpoints/upstream-token.ts, refreshed when they are
 * near expiry. Nothing here logs a token or puts one in an error.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import type { KeyEncryptionKeyring, SecretEnvelope } from "../../shared/secret-envelope.js";
import type { GrantRecord, UpstreamTokenSetRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { fail } from "../core/option-limits.js";
import type { ResolvedUpstreamProvider, ResolvedUpstreamSignIn } from "../core/upstream-options.js";
import { UpstreamFailure } from "../upstream/failure.js";
import { discover } from "../upstream/oidc-client.js";
import { refreshUpstreamTokens, type UpstreamTokenResponse } from "../upstream/token-request.js";

/**
 * Start-up (DESIGN.md principle 5): a provider that keeps tokens needs key-encryption keys (tokens
 * are never stored in clear) and names only resources this server serves.
 */
export function checkKeptTokens(
  settings: ResolvedUpstreamSignIn | undefined,
  resources: ReadonlyMap<string, unknown>,
  keyring: KeyEncryptionKeyring | undefined,
): void {
  for (const provider of settings?.providers ?? []) {
    if (provider.keepTokens === undefined) continue;
    const name = `upstreamSignIn provider ${provider.id}: keepTokens`;
    if (keyring === undefined) fail(`${name} needs keyEncryptionKeys (kept tokens are stored encrypted)`);
    for (const { resource } of provider.keepTokens.resourceServers) {
      if (!resources.has(resource)) fail(`${name} names ${JSON.stringify(resource)}, not a served resource`);
    }
  }
}

/** What is sealed: the provider's token response as it matters to a caller of its API. */
interface UpstreamTokenSet {
  accessToken: string;
  refreshToken?: string;
  /** Milliseconds since the epoch, when the provider said (`expires_in`). */
  expiresAt?: number;
  scope?: string;
}

/** An access token this close to its expiry is refreshed before it is handed out. */
export const UPSTREAM_REFRESH_MARGIN_MS = 60_000;

/**
 * The additional authenticated data of a sealed set: the user and the provider it belongs to, so a
 * set copied onto another user's or provider's row fails to open (NIST SP 800-38D §5.2.1). Not
 * the holder: a session's set is copied to its grants as is.
 */
function tokenSetAad(userId: string, providerId: string): string {
  return `gatehouse upstream tokens\0${userId}\0${providerId}`;
}

async function seal(
  keyring: KeyEncryptionKeyring,
  userId: string,
  providerId: string,
  set: UpstreamTokenSet,
): Promise<string> {
  const plaintext = new TextEncoder().encode(JSON.stringify(set));
  const envelope = await keyring.seal(plaintext, tokenSetAad(userId, providerId));
  plaintext.fill(0);
  return JSON.stringify(envelope);
}

async function open(
  keyring: KeyEncryptionKeyring,
  record: UpstreamTokenSetRecord,
): Promise<UpstreamTokenSet> {
  const envelope = JSON.parse(record.sealed) as SecretEnvelope;
  const plain = await keyring.open(envelope, tokenSetAad(record.userId, record.providerId));
  return JSON.parse(new TextDecoder().decode(plain)) as UpstreamTokenSet;
}

function tokenSetOf(
  response: UpstreamTokenResponse,
  now: number,
  previous?: UpstreamTokenSet,
): UpstreamTokenSet {
  // RFC 6749 §6: the provider MAY issue a new refresh token; when it does not, the old one stays good.
  const refreshToken = response.refresh_token ?? previous?.refreshToken;
  return {
    accessToken: response.access_token,
    ...(refreshToken === undefined ? {} : { refreshToken }),
    ...(response.expires_in === undefined ? {} : { expiresAt: now + response.expires_in * 1000 }),
    ...(response.scope === undefined
      ? previous?.scope
        ? { scope: previous.scope }
        : {}
      : { scope: response.scope }),
  };
}

/**
 * At the upstream callback: keeps the provider's tokens for the session that sign-in starts, when
 * the provider's `keepTokens` is set (and the server has key-encryption keys, which start-up
 * checks). Held until the session ends; each grant the session approves takes a copy.
 */
export async function keepSignInTokens(
  ctx: ServerContext,
  provider: ResolvedUpstreamProvider,
  userId: string,
  session: { idHash: string; expiresAt: number },
  response: UpstreamTokenResponse,
): Promise<void> {
  if (provider.keepTokens === undefined || ctx.keyring === undefined) return;
  const now = ctx.now();
  await ctx.store.keepSessionUpstreamTokens(session.idHash, {
    providerId: provider.id,
    userId,
    sealed: await seal(ctx.keyring, userId, provider.id, tokenSetOf(response, now)),
    version: 1,
    createdAt: now,
    updatedAt: now,
    expiresAt: session.expiresAt,
  });
}

/**
 * After a grant is created from a browser approval: the session's kept upstream tokens become the
 * grant's (the store checks the grant is live, of that session and that user). Only when some
 * provider keeps tokens, so other servers pay nothing.
 */
export async function bindKeptTokens(ctx: ServerContext, grant: GrantRecord): Promise<void> {
  if (grant.sessionHash === undefined) return;
  if (!ctx.options.upstreamSignIn?.providers.some((p) => p.keepTokens !== undefined)) return;
  await ctx.store.bindUpstreamTokens(grant.sessionHash, grant.grantId, ctx.now());
}

/**
 * Why no upstream access token can be handed out: `reauthenticate`, the user must sign in through
 * the provider again (nothing is kept, or the provider refused the refresh token); `unavailable`,
 * the provider could not refresh it now (unreachable, an error, another instance still refreshing).
 * The message names the reason only, never a token.
 */
export class UpstreamTokenUnavailable extends Error {
  constructor(
    readonly reason: "reauthenticate" | "unavailable",
    message: string,
  ) {
    super(message);
    this.name = "UpstreamTokenUnavailable";
  }
}

/** How long an instance waits for another instance's refresh of the same set, and how often it looks. */
const PEER_REFRESH_WAIT_MS = 10_000;
const PEER_REFRESH_POLL_MS = 100;

/**
 * Refreshes in flight in each server instance (its context), by grant and provider: one request to
 * the provider each. Per context, not per process, so two instances in one process still meet only
 * through the store, as on two machines.
 */
const inFlightByServer = new WeakMap<ServerContext, Map<string, Promise<UpstreamTokenSet>>>();

/**
 * A valid access token of `provider` for grant `grantId` (whose liveness the caller checked): the
 * kept one, or a fresh one when it is within {@link UPSTREAM_REFRESH_MARGIN_MS} of its expiry.
 * Refreshes are single-flight per grant and provider in this instance and a compare-and-swap in
 * the store across instances (the loser reads the winner's tokens). A provider's refusal of the
 * refresh token (`invalid_grant`, RFC 6749 §5.2) deletes the set: {@link UpstreamTokenUnavailable}.
 * A provider that cannot be reached leaves the set alone and throws the same error kind with
 * another message; neither message holds a token.
 */
export async function currentUpstreamToken(
  ctx: ServerContext,
  settings: ResolvedUpstreamSignIn,
  provider: ResolvedUpstreamProvider,
  grantId: string,
): Promise<UpstreamTokenSet> {
  const keyring = ctx.keyring;
  if (keyring === undefined)
    throw new UpstreamTokenUnavailable("reauthenticate", "no key-encryption keys configured");
  const record = await ctx.store.getUpstreamTokens(grantId, provider.id);
  if (!record) throw new UpstreamTokenUnavailable("reauthenticate", "no upstream tokens kept for this grant");
  const set = await open(keyring, record);
  if (set.expiresAt === undefined || set.expiresAt - UPSTREAM_REFRESH_MARGIN_MS > ctx.now()) return set;
  const key = JSON.stringify([grantId, provider.id]);
  let inFlight = inFlightByServer.get(ctx);
  if (!inFlight) {
    inFlight = new Map();
    inFlightByServer.set(ctx, inFlight);
  }
  let refresh = inFlight.get(key);
  if (!refresh) {
    const running = inFlight;
    refresh = refreshKept(ctx, settings, provider, keyring, grantId, record, set).finally(() =>
      running.delete(key),
    );
    inFlight.set(key, refresh);
  }
  return refresh;
}

async function refreshKept(
  ctx: ServerContext,
  settings: ResolvedUpstreamSignIn,
  provider: ResolvedUpstreamProvider,
  keyring: KeyEncryptionKeyring,
  grantId: string,
  record: UpstreamTokenSetRecord,
  set: UpstreamTokenSet,
): Promise<UpstreamTokenSet> {
  if (set.refreshToken === undefined) {
    throw new UpstreamTokenUnavailable(
      "reauthenticate",
      "the upstream access token expired and no refresh token was issued",
    );
  }
  // Across instances, one refresh per stored version: the instance whose marker is new asks the
  // provider; the others wait for its result, so a provider that rotates refresh tokens and treats
  // a second use of the old one as theft (RFC 9700 §4.14.2) never sees that second use from us.
  const lease = `upstream-refresh:${sha256Base64url(JSON.stringify([grantId, provider.id]))}:${record.version}`;
  const now = ctx.now();
  if (!(await ctx.store.useOnce(lease, now + PEER_REFRESH_WAIT_MS, now))) {
    return peerRefresh(ctx, keyring, grantId, provider.id, record.version);
  }
  let tokenEndpoint: string;
  if (provider.kind === "oidc") {
    const metadata = await discover(provider, settings, ctx.now());
    if (metadata instanceof UpstreamFailure)
      throw new UpstreamTokenUnavailable("unavailable", "the provider is unreachable");
    tokenEndpoint = metadata.token_endpoint;
  } else {
    tokenEndpoint = provider.tokenEndpoint;
  }
  const response = await refreshUpstreamTokens(provider, settings, tokenEndpoint, set.refreshToken);
  if (response instanceof UpstreamFailure) {
    if (response.providerError === "invalid_grant") {
      // The provider no longer honours the refresh token (revoked, expired, rotated elsewhere):
      // nothing kept can be used again, so the set goes and the user signs in anew.
      await ctx.store.deleteUpstreamTokens(grantId, provider.id);
      ctx.log.info("upstream_tokens_dropped", { upstream_provider: provider.id, grant_id: grantId });
      throw new UpstreamTokenUnavailable("reauthenticate", "the provider refused the refresh token");
    }
    ctx.log.warn("upstream_refresh_failed", {
      upstream_provider: provider.id,
      reason: response.failure,
      ...(response.providerError === undefined ? {} : { error: response.providerError }),
    });
    throw new UpstreamTokenUnavailable("unavailable", "the provider did not refresh the token");
  }
  const updatedAt = ctx.now();
  const next = tokenSetOf(response, updatedAt, set);
  const sealed = await seal(keyring, record.userId, provider.id, next);
  if (await ctx.store.replaceUpstreamTokens(grantId, provider.id, record.version, { sealed, updatedAt })) {
    return next;
  }
  // Another instance refreshed first (or the grant was revoked meanwhile): its tokens win.
  const winner = await ctx.store.getUpstreamTokens(grantId, provider.id);
  if (!winner) throw new UpstreamTokenUnavailable("reauthenticate", "no upstream tokens kept for this grant");
  return open(keyring, winner);
}

/** Waits for another instance's refresh of version `version` to land in the store, then opens it. */
async function peerRefresh(
  ctx: ServerContext,
  keyring: KeyEncryptionKeyring,
  grantId: string,
  providerId: string,
  version: number,
): Promise<UpstreamTokenSet> {
  for (let waited = 0; waited < PEER_REFRESH_WAIT_MS; waited += PEER_REFRESH_POLL_MS) {
    await new Promise((resolve) => setTimeout(resolve, PEER_REFRESH_POLL_MS));
    const current = await ctx.store.getUpstreamTokens(grantId, providerId);
    if (!current)
      throw new UpstreamTokenUnavailable("reauthenticate", "no upstream tokens kept for this grant");
    if (current.version !== version) return open(keyring, current);
  }
  throw new UpstreamTokenUnavailable("unavailable", "another instance is still refreshing the token");
}
