/** Record builders for the storage contract suite. Every secret-bearing field holds a SHA-256 hash. */

import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import type {
  AuthorizationCodeRecord,
  AuthorizationStore,
  ClientRecord,
  DeviceAuthorizationRecord,
  InteractionRecord,
  IssuedTokens,
  SessionRecord,
  SigningKeyRecord,
} from "../contract.js";

export const T0 = 1_750_000_000_000;
export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

export function id(prefix: string): string {
  return `${prefix}-${randomToken(9)}`;
}

/** A raw secret and the hash the store sees. */
export function secret(): { raw: string; hash: string } {
  const raw = randomToken();
  return { raw, hash: sha256Base64url(raw) };
}

export function client(overrides: Partial<ClientRecord> = {}): ClientRecord {
  return {
    clientId: id("client"),
    source: "dynamic",
    clientName: "Example <b>Client</b> ✓",
    redirectUris: ["http://127.0.0.1:7777/callback", "https://app.example/cb"],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: { client_name: "Example", nested: { list: [1, "two", null] } },
    createdAt: T0,
    ...overrides,
  };
}

export function code(overrides: Partial<AuthorizationCodeRecord> = {}): AuthorizationCodeRecord {
  return {
    codeHash: secret().hash,
    grantId: id("grant"),
    clientId: id("client"),
    userId: id("user"),
    redirectUri: "http://127.0.0.1:7777/callback",
    redirectUriSent: true,
    scopes: ["mcp:read", "mcp:write", "offline_access"],
    resource: "https://mcp.example/mcp",
    codeChallenge: sha256Base64url(randomToken()),
    codeChallengeMethod: "S256",
    refreshAllowed: true,
    createdAt: T0,
    expiresAt: T0 + MINUTE,
    ...overrides,
  };
}

/** A pending RFC 8628 device authorization, polled every 5 seconds, live for 10 minutes. */
export function deviceAuthorization(
  overrides: Partial<DeviceAuthorizationRecord> = {},
): DeviceAuthorizationRecord {
  return {
    deviceCodeHash: secret().hash,
    userCodeHash: secret().hash,
    clientId: id("client"),
    scopes: ["mcp:read", "mcp:write", "offline_access"],
    resource: "https://mcp.example/mcp",
    interval: 5,
    createdAt: T0,
    expiresAt: T0 + 10 * MINUTE,
    status: "pending",
    grantId: id("grant"),
    ...overrides,
  };
}

/**
 * Tokens to write at `now`. With `grantId`, the access token's `jti` names its grant as the server
 * draws it (`<grantId>.<unique>`, storage/access-token-id.ts), which a version 2 store reads.
 */
export function tokens(
  now: number,
  options: { refresh?: boolean; grantId?: string } = {},
): IssuedTokens & { refreshRaw?: string } {
  const refresh = secret();
  const jti = options.grantId === undefined ? id("jti") : `${options.grantId}.${randomToken(9)}`;
  return {
    accessToken: { jti, createdAt: now, expiresAt: now + HOUR },
    ...(options.refresh === false
      ? {}
      : {
          refreshToken: { tokenHash: refresh.hash, createdAt: now, expiresAt: now + 30 * DAY },
          refreshRaw: refresh.raw,
        }),
    grantExpiresAt: now + 90 * DAY,
  };
}

export function session(overrides: Partial<SessionRecord> = {}): SessionRecord {
  return { idHash: secret().hash, userId: id("user"), createdAt: T0, expiresAt: T0 + HOUR, ...overrides };
}

export function interaction(overrides: Partial<InteractionRecord> = {}): InteractionRecord {
  return {
    id: id("interaction"),
    browserBindingHash: secret().hash,
    clientId: id("client"),
    redirectUri: "https://app.example/cb",
    redirectUriSent: true,
    scopes: ["mcp:read"],
    resource: "https://mcp.example/mcp",
    state: "s".repeat(500),
    codeChallenge: sha256Base64url(randomToken()),
    codeChallengeMethod: "S256",
    csrfHash: secret().hash,
    createdAt: T0,
    expiresAt: T0 + 10 * MINUTE,
    ...overrides,
  };
}

export function signingKey(overrides: Partial<SigningKeyRecord> = {}): SigningKeyRecord {
  return {
    kid: id("kid"),
    alg: "ES256",
    publicJwk: { kty: "EC", crv: "P-256", x: randomToken(), y: randomToken() },
    privateJwk: { kty: "EC", crv: "P-256", x: randomToken(), y: randomToken(), d: randomToken() },
    createdAt: T0,
    ...overrides,
  };
}

const pass = () => undefined;

/**
 * Redeems a fresh code with a refresh token; returns what later tests need. `issuance` adds to
 * what the redemption writes (`grantDpopJkt`: the DPoP key the grant is bound to).
 */
export async function issueGrant(
  store: AuthorizationStore,
  now = T0,
  overrides: Partial<AuthorizationCodeRecord> = {},
  issuance: Pick<IssuedTokens, "grantDpopJkt"> = {},
): Promise<{ code: AuthorizationCodeRecord; issued: ReturnType<typeof tokens>; grantId: string }> {
  const record = code({ createdAt: now, expiresAt: now + MINUTE, ...overrides });
  await store.insertAuthorizationCode(record);
  const issued = { ...tokens(now, { grantId: record.grantId }), ...issuance };
  const result = await store.redeemAuthorizationCode(record.codeHash, now, pass, issued);
  if (result.status !== "issued") throw new Error(`fixture redemption failed: ${result.status}`);
  return { code: record, issued, grantId: record.grantId };
}

/**
 * A device authorization created, approved for `userId` (and `sessionHash`, when given) and polled
 * once, so its grant exists; returns the authorization and the tokens the poll wrote.
 */
export async function issueDeviceGrant(
  store: AuthorizationStore,
  options: { userId: string; sessionHash?: string; clientId?: string; resource?: string },
): Promise<{ device: DeviceAuthorizationRecord; issued: ReturnType<typeof tokens> }> {
  const { userId, sessionHash, ...overrides } = options;
  const device = deviceAuthorization(overrides);
  await store.createDeviceAuthorization(device);
  await store.decideDeviceAuthorization(
    device.userCodeHash,
    {
      approved: true,
      userId,
      approvedScopes: ["mcp:read"],
      ...(sessionHash === undefined ? {} : { sessionHash }),
      refreshAllowed: true,
    },
    T0,
  );
  const issued = tokens(T0 + 1, { grantId: device.grantId });
  const polled = await store.pollDeviceAuthorization(
    device.deviceCodeHash,
    device.clientId,
    T0 + 1,
    () => issued,
  );
  if (polled.status !== "issued") throw new Error(`fixture device poll failed: ${polled.status}`);
  return { device, issued };
}

/** Counts how many of `results` have each `status`. */
export function tally(results: { status: string }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of results) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}
