/**
 * The server side of the interop tests, shared by every client under test: Gatehouse's
 * authorization server in-process (SQLite in a temporary directory, plain http on loopback), the
 * notes MCP server behind Gatehouse's gate (notes-mcp.ts) with the gate's `onInsufficientScope`
 * wired to the authorization server's `requestStepUp`, one clock for both, and a record of what
 * each client sent to the authorization server (secrets replaced by "<present>").
 *
 * Set GATEHOUSE_INTEROP_WIRE_LOG to a directory to keep each stack's exchanges as JSON there.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
  type Revision,
} from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { Logger } from "../../src/shared/log.js";
import type { ClientRecord, GrantRecord } from "../../src/storage/contract.js";
import { createSqliteStore, type SqliteStore } from "../../src/storage/sqlite/index.js";
import { createNotesMcp, NOTES_HIERARCHY, NOTES_SCOPES, type NotesMcp } from "./notes-mcp.js";

export const REVISIONS: readonly Revision[] = ["2025-11-25", "2026-07-28"];
export type Registration = "dynamic" | "preregistered";
export const REGISTRATIONS: readonly Registration[] = ["dynamic", "preregistered"];
export const PASSWORD = "correct horse battery staple";

/**
 * Real time plus an offset the test moves forward: the authorization server and the resource
 * server's token checks read it, so tokens expire without the test sleeping.
 */
export class TestClock {
  #offsetMs = 0;
  readonly now = (): number => Date.now() + this.#offsetMs;
  advance(seconds: number): void {
    this.#offsetMs += seconds * 1000;
  }
}

/** Parameters whose values are credentials or one-time values: recorded as present, never kept. */
const SECRET_PARAMS = new Set([
  "code",
  "code_verifier",
  "code_challenge",
  "refresh_token",
  "access_token",
  "token",
  "client_secret",
  "client_assertion",
  "state",
  "password",
  "csrf",
]);

/** One request to the authorization server, as a client (or the browser) sent it. */
export interface AsExchange {
  method: string;
  path: string;
  /** Query (GET) or form/JSON body (POST) parameters; secret values replaced by "<present>". */
  params: Record<string, string>;
  status: number;
  /** From a JSON answer, or the `error` of a redirect back to the client. */
  answer: { error?: string; errorDescription?: string; scope?: string; refreshToken?: boolean };
}

function recordParams(entries: Iterable<[string, unknown]>): Record<string, string> {
  const params: Record<string, string> = {};
  for (const [name, value] of entries) {
    if (SECRET_PARAMS.has(name)) params[name] = "<present>";
    else params[name] = typeof value === "string" ? value : JSON.stringify(value);
  }
  return params;
}

async function requestParams(request: Request): Promise<Record<string, string>> {
  const url = new URL(request.url);
  if (request.method !== "POST") return recordParams(url.searchParams);
  const type = request.headers.get("content-type") ?? "";
  const text = await request.clone().text();
  if (type.includes("application/json")) {
    try {
      return recordParams(Object.entries(JSON.parse(text) as Record<string, unknown>));
    } catch {
      return { body: "<not JSON>" };
    }
  }
  const params = recordParams(new URLSearchParams(text));
  if (request.headers.has("authorization")) params.authorization = "<present>";
  return params;
}

async function responseAnswer(response: Response): Promise<AsExchange["answer"]> {
  const location = response.headers.get("location");
  if (location) {
    const error = new URL(location, "http://base.invalid").searchParams.get("error");
    return error ? { error } : {};
  }
  if (!(response.headers.get("content-type") ?? "").includes("json")) return {};
  const body = (await response
    .clone()
    .json()
    .catch(() => ({}))) as Record<string, unknown>;
  const answer: AsExchange["answer"] = {};
  if (typeof body.error === "string") answer.error = body.error;
  if (typeof body.error_description === "string") answer.errorDescription = body.error_description;
  if (typeof body.scope === "string") answer.scope = body.scope;
  if ("access_token" in body) answer.refreshToken = typeof body.refresh_token === "string";
  return answer;
}

export interface TestUser {
  id: string;
  username: string;
  password: string;
}

export interface InteropStack {
  issuer: string;
  /** The MCP endpoint's URL, which is also its canonical resource URI. */
  resource: string;
  revision: Revision;
  accessTokenTtlSeconds: number;
  store: SqliteStore;
  authorizationServer: AuthorizationServer;
  mcp: NotesMcp;
  clock: TestClock;
  /** Every request to the authorization server, in order. */
  exchanges: AsExchange[];
  /** What the authorization server logged (its warnings explain refusals). */
  log: { level: string; event: string; fields?: Record<string, unknown> }[];
  addUser(username: string): Promise<TestUser>;
  /** A public client with one loopback redirect URI, as `gatehouse clients add` creates it. */
  addPublicClient(name: string, redirectUri: string): Promise<string>;
  /** Grants of `userId` neither revoked nor expired, by the server's clock. */
  activeGrants(userId: string): Promise<GrantRecord[]>;
  /** Moves the clock past the access tokens' lifetime and every verifier's leeway. */
  expireAccessTokens(): void;
  close(): Promise<void>;
}

export interface StackOptions {
  revision: Revision;
  /** Default 60 s; the clock is moved, not waited on. */
  accessTokenTtlSeconds?: number;
  /** Names the wire log file when GATEHOUSE_INTEROP_WIRE_LOG is set. */
  label: string;
}

export async function startStack(options: StackOptions): Promise<InteropStack> {
  const accessTokenTtlSeconds = options.accessTokenTtlSeconds ?? 60;
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-interop-"));
  const clock = new TestClock();
  const exchanges: AsExchange[] = [];
  const log: InteropStack["log"] = [];
  const logger: Logger = {
    info: (event, fields) => log.push({ level: "info", event, ...(fields && { fields }) }),
    warn: (event, fields) => log.push({ level: "warn", event, ...(fields && { fields }) }),
    error: (event, fields) => log.push({ level: "error", event, ...(fields && { fields }) }),
  };

  // Both servers listen first (port 0); their handlers are set once both URLs are known.
  let asHandler: ((request: Request) => Promise<Response>) | undefined;
  let mcpHandler: ((request: Request) => Promise<Response>) | undefined;
  const asHttp: ListeningServer = await listen(async (request) => {
    const params = await requestParams(request);
    const response = await asHandler!(request);
    exchanges.push({
      method: request.method,
      path: new URL(request.url).pathname,
      params,
      status: response.status,
      answer: await responseAnswer(response),
    });
    return response;
  });
  const mcpHttp: ListeningServer = await listen((request) => mcpHandler!(request));
  const issuer = asHttp.url;
  const resource = `${mcpHttp.url}/mcp`;

  const store = createSqliteStore({ path: join(dir, "gatehouse.sqlite") });
  const authorizationServer = await createAuthorizationServer({
    issuer,
    allowInsecureLoopback: true,
    store,
    resources: [{ uri: resource, name: "Notes (interop)", scopes: [...NOTES_SCOPES] }],
    scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Add notes" },
    scopeHierarchy: NOTES_HIERARCHY,
    revision: options.revision,
    accessTokenTtlSeconds,
    maintenanceIntervalMs: 0,
    logger,
    now: clock.now,
  });
  asHandler = authorizationServer.fetch;
  const jwksUri = String(authorizationServer.metadata.jwks_uri);
  const mcp = createNotesMcp({
    resource,
    issuer,
    jwksUri,
    revision: options.revision,
    now: clock.now,
    // Co-hosted: a 403 insufficient_scope marks the grant, so a client that answers it by
    // refreshing (SDK v1) gets invalid_grant and authorizes again (docs/authorization-server.md
    // "Refresh policy").
    onInsufficientScope: async (auth) => {
      await authorizationServer.requestStepUp(auth.tokenId);
    },
  });
  mcpHandler = mcp.fetch;

  return {
    issuer,
    resource,
    revision: options.revision,
    accessTokenTtlSeconds,
    store,
    authorizationServer,
    mcp,
    clock,
    exchanges,
    log,
    async addUser(username) {
      const user = { id: `u-${username}`, username, password: PASSWORD };
      await store.createUser({
        id: user.id,
        username,
        passwordHash: await hashPassword(PASSWORD),
        isAdmin: false,
        createdAt: clock.now(),
      });
      return user;
    },
    async addPublicClient(name, redirectUri) {
      const clientId = `interop-${name.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
      const grantTypes = ["authorization_code", "refresh_token"];
      const record: ClientRecord = {
        clientId,
        source: "preregistered",
        clientName: name,
        redirectUris: [redirectUri],
        grantTypes,
        responseTypes: ["code"],
        tokenEndpointAuthMethod: "none",
        metadata: {
          client_name: name,
          redirect_uris: [redirectUri],
          grant_types: grantTypes,
          response_types: ["code"],
          token_endpoint_auth_method: "none",
        },
        createdAt: clock.now(),
      };
      await store.createClient(record);
      return clientId;
    },
    async activeGrants(userId) {
      const now = clock.now();
      return (await store.listGrants({ userId })).filter(
        (g) => g.revokedAt === undefined && g.expiresAt > now,
      );
    },
    expireAccessTokens() {
      // Past `exp` and past the 30 s leeway of the JWT verifier.
      clock.advance(accessTokenTtlSeconds + 60);
    },
    async close() {
      const wireDir = process.env.GATEHOUSE_INTEROP_WIRE_LOG;
      if (wireDir) {
        mkdirSync(wireDir, { recursive: true });
        const file = join(wireDir, `${options.label.replace(/[^A-Za-z0-9.-]+/g, "_")}.json`);
        writeFileSync(file, JSON.stringify({ as: exchanges, mcp: mcp.exchanges, log }, null, 2));
      }
      await mcp.close();
      await mcpHttp.close();
      await asHttp.close();
      await authorizationServer.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The token requests of one grant type, in order. */
export function tokenRequests(stack: InteropStack, grantType: string): AsExchange[] {
  return stack.exchanges.filter((x) => x.path === "/token" && x.params.grant_type === grantType);
}

/** The authorization requests the browser made (GET /authorize), in order. */
export function authorizationRequests(stack: InteropStack): AsExchange[] {
  return stack.exchanges.filter((x) => x.path === "/authorize" && x.method === "GET");
}
