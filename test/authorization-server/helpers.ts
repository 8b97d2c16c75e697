import { createHash } from "node:crypto";
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../src/authorization-server/index.js";
import { randomToken, sha256Base64url } from "../../src/shared/crypto.js";
import type { Logger } from "../../src/shared/log.js";
import {
  type AuthorizationStore,
  type ClientRecord,
  StorageConflictError,
} from "../../src/storage/contract.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";

export const ISSUER = "https://as.example.test";
export const RESOURCE = "https://rs.example.test/mcp";
export const OTHER_RESOURCE = "https://other.example.test/api";
export const REDIRECT = "https://app.example.test/callback";
export const PUBLIC_CLIENT = "public-app";
export const CONFIDENTIAL_CLIENT = "confidential-app";
export const CONFIDENTIAL_SECRET = "s3cret-value-that-is-long-enough";
export const RS_CLIENT = "resource-server";
export const RS_SECRET = "rs-secret-value";
export const REVISIONS = ["2025-11-25", "2026-07-28"] as const;

/** A logger that keeps lines, so tests can assert nothing secret is logged. */
export function memoryLogger(): Logger & { lines: { level: string; event: string; fields: unknown }[] } {
  const lines: { level: string; event: string; fields: unknown }[] = [];
  const push = (level: string) => (event: string, fields?: Record<string, unknown>) =>
    void lines.push({ level, event, fields });
  return { lines, info: push("info"), warn: push("warn"), error: push("error") };
}

export function client(overrides: Partial<ClientRecord> & { clientId: string }): ClientRecord {
  return {
    source: "preregistered",
    redirectUris: [REDIRECT],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: 0,
    ...overrides,
  };
}

export interface TestServer {
  server: AuthorizationServer;
  store: AuthorizationStore;
  clock: { now: number; advance(seconds: number): void };
  log: ReturnType<typeof memoryLogger>;
}

/** A server on a memory store with a public client, a confidential client and a resource server's credentials. */
export async function makeServer(options: Partial<AuthorizationServerOptions> = {}): Promise<TestServer> {
  const store = options.store ?? createMemoryStore();
  const clock = {
    now: Date.UTC(2026, 0, 1),
    advance(seconds: number) {
      clock.now += seconds * 1000;
    },
  };
  const log = memoryLogger();
  const server = await createAuthorizationServer({
    issuer: ISSUER,
    store,
    resources: [
      { uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write", "notes:admin"] },
      { uri: OTHER_RESOURCE, scopes: ["other:read"] },
    ],
    scopeHierarchy: { "notes:admin": ["notes:write"], "notes:write": ["notes:read"] },
    clients: [
      client({ clientId: PUBLIC_CLIENT }),
      client({
        clientId: CONFIDENTIAL_CLIENT,
        tokenEndpointAuthMethod: "client_secret_basic",
        clientSecretHash: sha256Base64url(CONFIDENTIAL_SECRET),
        grantTypes: ["authorization_code", "refresh_token", "client_credentials"],
      }),
      client({
        clientId: RS_CLIENT,
        redirectUris: [],
        grantTypes: ["client_credentials"],
        responseTypes: [],
        tokenEndpointAuthMethod: "client_secret_post",
        clientSecretHash: sha256Base64url(RS_SECRET),
      }),
    ],
    logger: log,
    now: () => clock.now,
    maintenanceIntervalMs: 0,
    ...options,
  });
  return { server, store, clock, log };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomToken(48);
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

/**
 * Makes sure user `id` exists (a password nobody knows): a code redeemed for a user the store does
 * not hold is refused (user-accounts.ts: a removed account gets no grant), so the codes these
 * helpers insert name a real user. Safe on a store several servers share.
 */
export async function ensureUser(store: AuthorizationStore, id: string): Promise<void> {
  if (await store.getUser(id)) return;
  try {
    await store.createUser({ id, username: id, passwordHash: "unusable", isAdmin: false, createdAt: 0 });
  } catch (error) {
    if (!(error instanceof StorageConflictError)) throw error;
  }
}

/**
 * Inserts a code the way the consent page does (code = randomToken(), stored as its SHA-256,
 * grantId = randomToken(16)); returns the raw code and its verifier.
 */
export async function issueCode(
  t: TestServer,
  overrides: {
    clientId?: string;
    redirectUri?: string;
    scopes?: string[];
    resource?: string;
    refreshAllowed?: boolean;
    userId?: string;
    /** Whether the authorization request carried redirect_uri (default true). */
    redirectUriSent?: boolean;
    /** The browser sign-in that approved the code (none by default). */
    sessionHash?: string;
  } = {},
): Promise<{ code: string; verifier: string; grantId: string }> {
  const { verifier, challenge } = pkcePair();
  const code = randomToken();
  const grantId = randomToken(16);
  const scopes = overrides.scopes ?? ["notes:read", "offline_access"];
  await ensureUser(t.store, overrides.userId ?? "user-1");
  await t.store.insertAuthorizationCode({
    codeHash: sha256Base64url(code),
    grantId,
    clientId: overrides.clientId ?? PUBLIC_CLIENT,
    userId: overrides.userId ?? "user-1",
    redirectUri: overrides.redirectUri ?? REDIRECT,
    redirectUriSent: overrides.redirectUriSent ?? true,
    scopes,
    resource: overrides.resource ?? RESOURCE,
    codeChallenge: challenge,
    codeChallengeMethod: "S256",
    refreshAllowed: overrides.refreshAllowed ?? scopes.includes("offline_access"),
    ...(overrides.sessionHash !== undefined && { sessionHash: overrides.sessionHash }),
    createdAt: t.clock.now,
    expiresAt: t.clock.now + 60_000,
  });
  return { code, verifier, grantId };
}

export function formRequest(
  path: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Request {
  return new Request(`${ISSUER}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(params).toString(),
  });
}

export function basic(id: string, secret: string): Record<string, string> {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
  return { authorization: `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString("base64")}` };
}

export async function postToken(
  t: TestServer,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const response = await t.server.fetch(formRequest("/token", params, headers));
  const text = await response.text();
  return {
    status: response.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    headers: response.headers,
  };
}

/**
 * The token request redeeming `code` as the public client sends it (RFC 6749 §4.1.3 plus the PKCE
 * verifier and the resource), with `changes` applied; a field given as (or left) undefined is not sent.
 */
export function codeRequest(
  code: string,
  verifier: string | undefined,
  changes: {
    redirect_uri?: string | undefined;
    resource?: string | undefined;
    client_id?: string | undefined;
  } = {},
): Record<string, string> {
  const params: Record<string, string | undefined> = {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: REDIRECT,
    resource: RESOURCE,
    client_id: PUBLIC_CLIENT,
    ...changes,
  };
  return Object.fromEntries(
    Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

/** Redeems a fresh code for the public client; returns the token response body. */
export async function codeTokens(
  t: TestServer,
  overrides: Parameters<typeof issueCode>[1] = {},
): Promise<Record<string, unknown>> {
  const { code, verifier } = await issueCode(t, overrides);
  const r = await postToken(
    t,
    codeRequest(code, verifier, {
      redirect_uri: overrides.redirectUri ?? REDIRECT,
      resource: overrides.resource ?? RESOURCE,
      client_id: overrides.clientId ?? PUBLIC_CLIENT,
    }),
  );
  if (r.status !== 200) throw new Error(`token request failed: ${JSON.stringify(r.body)}`);
  return r.body;
}

export function decodePayload(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString("utf8")) as Record<string, unknown>;
}

export function decodeHeader(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split(".")[0]!, "base64url").toString("utf8")) as Record<string, unknown>;
}
