/**
 * A hand-built ServerContext around the memory store, served on 127.0.0.1 with the browser-side
 * endpoints routed, plus a tiny cookie-keeping HTTP client for protocol tests (redirect: "manual").
 */
import { createHash, randomBytes } from "node:crypto";
import type {
  ClientResolver,
  Endpoint,
  ServerContext,
} from "../../../src/authorization-server/core/context.js";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import { handleAuthorize } from "../../../src/authorization-server/endpoints/authorize.js";
import { handleConsent } from "../../../src/authorization-server/pages/consent.js";
import { handleLogin } from "../../../src/authorization-server/pages/login.js";
import { handleAccount, handleLogout } from "../../../src/authorization-server/pages/logout.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { OAuthError } from "../../../src/shared/errors.js";
import { silentLogger } from "../../../src/shared/log.js";
import { ScopeHierarchy } from "../../../src/shared/scopes.js";
import type { AuthorizationStore, ClientRecord } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";

export const RESOURCE = "https://notes.example/mcp";
export const OTHER_RESOURCE = "https://files.example/mcp";
export const PASSWORD = "correct horse battery staple";
/** A client id whose metadata document the resolver refuses (as the real resolver would, with OAuthError). */
export const REFUSED_DOCUMENT_CLIENT = "https://refused.example/client.json";
export const XSS_NAME = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">"'&`;

export interface HarnessOptions {
  /** Extra redirect URIs for the pre-registered client (e.g. a local client server). */
  redirectUris?: string[];
  secureCookies?: boolean;
  refreshEnabled?: boolean;
}

export interface Harness {
  url: string;
  ctx: ServerContext;
  store: AuthorizationStore;
  /** A new user (password {@link PASSWORD}), so tests never share login rate-limit counters. */
  newUser(): Promise<{ id: string; username: string; password: string }>;
  /** A new pre-registered client, so tests never lean on consents another test granted. */
  newClient(extra?: Partial<ClientRecord>): Promise<string>;
  /** Adds or replaces a client in storage. */
  addClient(
    client: Partial<ClientRecord> & Pick<ClientRecord, "clientId" | "redirectUris">,
  ): Promise<ClientRecord>;
  close(): Promise<void>;
}

let userHashes: Promise<{ alice: string; bob: string }> | undefined;

export function makeClient(
  client: Partial<ClientRecord> & Pick<ClientRecord, "clientId" | "redirectUris">,
): ClientRecord {
  return {
    source: "preregistered",
    clientName: "Notes Desktop",
    grantTypes: ["authorization_code", "refresh_token"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: 0,
    ...client,
  };
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const store = createMemoryStore();
  await store.migrate();
  let ctx: ServerContext | undefined;
  const routes: Record<string, Endpoint> = {
    "/authorize": handleAuthorize,
    "/login": handleLogin,
    "/consent": handleConsent,
    "/account": handleAccount,
    "/logout": handleLogout,
  };
  const server: ListeningServer = await listen(async (request, info) => {
    const route = routes[new URL(request.url).pathname];
    if (!route || !ctx) return new Response("not found", { status: 404 });
    return route(request, ctx, info ?? {});
  });
  const clients: ClientResolver = {
    async resolve(clientId) {
      if (clientId === REFUSED_DOCUMENT_CLIENT) {
        throw new OAuthError("invalid_client", { description: "the client metadata document was refused" });
      }
      return store.getClient(clientId);
    },
  };
  const refreshEnabled = options.refreshEnabled ?? true;
  const scopes = new Set(["notes:read", "notes:write", "notes:admin", "files:read"]);
  if (refreshEnabled) scopes.add("offline_access");
  ctx = {
    options: {
      issuer: server.url,
      revision: "2026-07-28",
      accessTokenTtlSeconds: 300,
      codeTtlSeconds: 60,
      refresh: {
        enabled: refreshEnabled,
        idleTtlSeconds: 1209600,
        absoluteTtlSeconds: 7776000,
        reuseGraceSeconds: 0,
        withoutOfflineAccess: { idleTtlSeconds: 86400, absoluteTtlSeconds: 604800 },
      },
      dynamicRegistration: { enabled: true, ratePerHour: 20, unusedTtlSeconds: 86400 },
      clientMetadataDocuments: { enabled: true },
      scopeDescriptions: {
        "notes:read": "Read your notes",
        "notes:write": "Create and change your notes",
        "notes:admin": "Manage sharing of your notes",
      },
      allowInsecureLoopback: true,
    },
    store,
    log: silentLogger,
    now: () => Date.now(),
    hierarchy: new ScopeHierarchy({ "notes:admin": ["notes:write"], "notes:write": ["notes:read"] }),
    resources: new Map([
      [RESOURCE, { uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write", "notes:admin"] }],
      [OTHER_RESOURCE, { uri: OTHER_RESOURCE, scopes: ["files:read"] }],
    ]),
    scopes,
    clients,
    keys: {
      signAccessToken: () => Promise.reject(new Error("not used by the browser-side tests")),
      publicJwks: async () => ({ keys: [] }),
      rotate: () => Promise.reject(new Error("not used by the browser-side tests")),
      verifyAccessToken: async () => undefined,
    } as ServerContext["keys"],
    secureCookies: options.secureCookies ?? false,
  };
  userHashes ??= Promise.all([hashPassword(PASSWORD), hashPassword(`${PASSWORD} (bob)`)]).then(
    ([alice, bob]) => ({
      alice,
      bob,
    }),
  );
  const hashes = await userHashes;
  await store.createUser({
    id: "u-alice",
    username: "alice",
    passwordHash: hashes.alice,
    isAdmin: false,
    createdAt: 0,
  });
  await store.createUser({
    id: "u-bob",
    username: "bob",
    passwordHash: hashes.bob,
    isAdmin: false,
    createdAt: 0,
  });
  await store.createClient(
    makeClient({
      clientId: "notes-desktop",
      redirectUris: ["https://app.example/cb", ...(options.redirectUris ?? [])],
    }),
  );
  let counter = 0;
  const harness: Harness = {
    url: server.url,
    async newUser() {
      const n = ++counter;
      const user = { id: `u-${n}`, username: `user-${n}`, password: PASSWORD };
      await store.createUser({
        id: user.id,
        username: user.username,
        passwordHash: hashes.alice,
        isAdmin: false,
        createdAt: 0,
      });
      return user;
    },
    async newClient(extra = {}) {
      const clientId = `client-${++counter}`;
      await store.upsertClient(makeClient({ clientId, redirectUris: ["https://app.example/cb"], ...extra }));
      return clientId;
    },
    ctx,
    store,
    async addClient(partial) {
      const client = makeClient(partial);
      await store.upsertClient(client);
      return client;
    },
    close: () => server.close(),
  };
  return harness;
}

/** A valid S256 challenge for a fresh verifier. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

export function authorizeUrl(base: string, params: Record<string, string | string[] | undefined>): string {
  const defaults: Record<string, string> = {
    response_type: "code",
    client_id: "notes-desktop",
    redirect_uri: "https://app.example/cb",
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    resource: RESOURCE,
    scope: "notes:read",
    state: "st-123",
  };
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...defaults, ...params })) {
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) query.append(k, one);
  }
  return `${base}/authorize?${query.toString()}`;
}

/** A cookie-keeping client that never follows redirects. */
export class Agent {
  readonly cookies = new Map<string, string>();
  constructor(readonly base: string) {}

  async request(pathOrUrl: string, init: RequestInit = {}): Promise<Response> {
    const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${this.base}${pathOrUrl}`;
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set("cookie", [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";");
      const eq = pair!.indexOf("=");
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }

  get(path: string): Promise<Response> {
    return this.request(path);
  }

  post(path: string, form: Record<string, string | undefined>): Promise<Response> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(form)) if (v !== undefined) body.append(k, v);
    return this.request(path, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: body.toString(),
    });
  }
}

/** The hidden inputs of the first form in a page (name → value), HTML entities decoded. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    out[m[1]!] ??= m[2]!
      .replace(/&amp;/g, "&")
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'");
  }
  return out;
}

/** Runs /authorize → login → consent page with fetch; returns the consent page's form fields. */
export async function reachConsent(
  agent: Agent,
  url: string,
  user: { username: string; password: string } = { username: "alice", password: PASSWORD },
): Promise<{ fields: Record<string, string>; html: string }> {
  const start = await agent.get(url);
  if (start.status !== 303) throw new Error(`authorize answered ${start.status}: ${await start.text()}`);
  let location = start.headers.get("location")!;
  if (location.startsWith("/login")) {
    const loginPage = await agent.get(location);
    const fields = hiddenFields(await loginPage.text());
    const done = await agent.post("/login", { ...fields, username: user.username, password: user.password });
    if (done.status !== 303) throw new Error(`login answered ${done.status}`);
    location = done.headers.get("location")!;
  }
  if (!location.startsWith("/consent"))
    throw new Error(`expected the consent page, got a redirect elsewhere`);
  const consent = await agent.get(location);
  const html = await consent.text();
  if (consent.status !== 200) throw new Error(`consent page answered ${consent.status}`);
  return { fields: hiddenFields(html), html };
}
