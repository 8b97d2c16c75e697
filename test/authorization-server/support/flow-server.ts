/**
 * A real authorization server on loopback (memory store, controllable clock) and a browser-like
 * agent that walks /authorize → login → consent → code → token, for the policy tests that need
 * whole flows: re-authorization, refresh policy, superseded grants, step-up refusals.
 */
import { expect } from "vitest";
import type { AuthorizationServerOptions } from "../../../src/authorization-server/core/options.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import {
  type AuthorizationServer,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { silentLogger } from "../../../src/shared/log.js";
import type { AuthorizationStore, ClientRecord } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { Agent, hiddenFields, PASSWORD, pkcePair } from "../pages/harness.js";

export const RESOURCE = "https://notes.example/mcp";
export const USERNAME = "alice";

export interface FlowServer {
  http: ListeningServer;
  as: AuthorizationServer;
  store: AuthorizationStore;
  issuer: string;
  clock: { now: number };
  /** Registers a client through RFC 7591 dynamic registration; returns its id. */
  register(metadata: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startFlowServer(
  options: {
    clients?: ClientRecord[];
    extra?: Partial<AuthorizationServerOptions>;
    /** Wraps the memory store (to slow an operation down, say). */
    wrapStore?: (store: AuthorizationStore) => AuthorizationStore;
  } = {},
): Promise<FlowServer> {
  let as: AuthorizationServer | undefined;
  const http = await listen((request, info) =>
    as ? as.fetch(request, info) : Promise.resolve(new Response(null, { status: 503 })),
  );
  const clock = { now: Date.now() };
  const memory = createMemoryStore();
  const store = options.wrapStore ? options.wrapStore(memory) : memory;
  as = await createAuthorizationServer({
    issuer: http.url,
    store,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    clients: options.clients ?? [],
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    now: () => clock.now,
    ...options.extra,
  });
  await store.createUser({
    id: "u1",
    username: USERNAME,
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: clock.now,
  });
  const server = as;
  return {
    http,
    as: server,
    store,
    issuer: http.url,
    clock,
    async register(metadata) {
      const response = await fetch(`${http.url}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(metadata),
      });
      expect(response.status).toBe(201);
      return ((await response.json()) as { client_id: string }).client_id;
    },
    async close() {
      await server.close();
      await http.close();
    },
  };
}

export function publicClient(overrides: Partial<ClientRecord> = {}): ClientRecord {
  return {
    clientId: "cli",
    source: "preregistered",
    clientName: "Notes CLI",
    redirectUris: ["http://127.0.0.1/callback"],
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: Date.now(),
    ...overrides,
  };
}

export interface AuthorizationAttempt {
  clientId: string;
  redirectUri: string;
  scope?: string;
  /** Leave redirect_uri out of the request (allowed for a client with one registered URI). */
  omitRedirectUri?: boolean;
}

/** What /authorize led to: a code at the redirect URI, or a page the user has to answer. */
export type AuthorizationOutcome =
  | { kind: "code"; code: string; verifier: string; location: URL }
  | { kind: "consent"; html: string; verifier: string }
  | { kind: "login"; path: string; verifier: string }
  | { kind: "error"; status: number; location?: string };

/**
 * Sends the browser to /authorize and follows the server's own redirects (login is NOT answered):
 * says whether a code came back without the user seeing a page.
 */
export async function startAuthorization(
  agent: Agent,
  attempt: AuthorizationAttempt,
): Promise<AuthorizationOutcome> {
  const { verifier, challenge } = pkcePair();
  const query = new URLSearchParams({
    response_type: "code",
    client_id: attempt.clientId,
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    state: "s1",
  });
  if (!attempt.omitRedirectUri) query.set("redirect_uri", attempt.redirectUri);
  if (attempt.scope !== undefined) query.set("scope", attempt.scope);
  let response = await agent.get(`/authorize?${query}`);
  for (let hop = 0; hop < 5; hop++) {
    if (response.status !== 303) return { kind: "error", status: response.status };
    const location = response.headers.get("location")!;
    const url = new URL(location, agent.base);
    if (url.searchParams.has("code")) {
      return { kind: "code", code: url.searchParams.get("code")!, verifier, location: url };
    }
    if (url.pathname === "/login") return { kind: "login", path: `${url.pathname}${url.search}`, verifier };
    if (url.pathname === "/consent") {
      response = await agent.get(`${url.pathname}${url.search}`);
      if (response.status === 200) return { kind: "consent", html: await response.text(), verifier };
      continue;
    }
    return { kind: "error", status: response.status, location };
  }
  throw new Error("too many redirects");
}

/** Signs in on the login page the interaction is parked at, then follows to consent or a code. */
export async function signIn(agent: Agent, attempt: AuthorizationAttempt): Promise<AuthorizationOutcome> {
  const first = await startAuthorization(agent, attempt);
  if (first.kind !== "login") return first;
  const { verifier } = first;
  const loginPath = first.path;
  const loginHtml = await (await agent.get(loginPath)).text();
  const loggedIn = await agent.post("/login", {
    ...hiddenFields(loginHtml),
    username: USERNAME,
    password: PASSWORD,
  });
  expect(loggedIn.status).toBe(303);
  let next = loggedIn;
  for (let hop = 0; hop < 3; hop++) {
    const url = new URL(next.headers.get("location")!, agent.base);
    if (url.searchParams.has("code")) {
      return { kind: "code", code: url.searchParams.get("code")!, verifier, location: url };
    }
    next = await agent.get(`${url.pathname}${url.search}`);
    if (next.status === 200) return { kind: "consent", html: await next.text(), verifier };
    if (next.status !== 303) return { kind: "error", status: next.status };
  }
  throw new Error("too many redirects");
}

/** Answers the consent page shown in `outcome`; returns the code it leads to. */
export async function approve(
  agent: Agent,
  outcome: AuthorizationOutcome,
): Promise<{ code: string; verifier: string; location: URL }> {
  if (outcome.kind === "code") return outcome;
  if (outcome.kind !== "consent") throw new Error(`expected a consent page, got ${outcome.kind}`);
  const decided = await agent.post("/consent", { ...hiddenFields(outcome.html), decision: "approve" });
  expect(decided.status).toBe(303);
  const location = new URL(decided.headers.get("location")!);
  const code = location.searchParams.get("code");
  if (!code) throw new Error(`no code: ${location.search}`);
  return { code, verifier: outcome.verifier, location };
}

export interface TokenBody {
  access_token?: string;
  refresh_token?: string;
  scope?: string;
  error?: string;
}

export async function tokenRequest(
  issuer: string,
  params: Record<string, string | undefined>,
): Promise<{ status: number; body: TokenBody }> {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) body.set(k, v);
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: body.toString(),
  });
  return { status: response.status, body: (await response.json()) as TokenBody };
}

export function redeem(
  issuer: string,
  clientId: string,
  grant: { code: string; verifier: string; location: URL },
  redirectUri: string | undefined,
): Promise<{ status: number; body: TokenBody }> {
  return tokenRequest(issuer, {
    grant_type: "authorization_code",
    code: grant.code,
    code_verifier: grant.verifier,
    client_id: clientId,
    redirect_uri: redirectUri,
    resource: RESOURCE,
  });
}

export function refresh(
  issuer: string,
  clientId: string,
  refreshToken: string,
): Promise<{ status: number; body: TokenBody }> {
  return tokenRequest(issuer, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: clientId,
  });
}

/** The `jti` of an access token (no verification: the test only needs the id). */
export function tokenId(accessToken: string): string {
  const payload = JSON.parse(Buffer.from(accessToken.split(".")[1]!, "base64url").toString("utf8"));
  return payload.jti as string;
}

export { Agent };
