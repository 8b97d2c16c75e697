/**
 * A complete authorization server (createAuthorizationServer on the memory store) on 127.0.0.1 for
 * the admin page tests, with an administrator, a plain user, a pre-registered public client, and
 * helpers that sign in through /login and obtain real grants through /authorize, /consent, /token.
 */
import { randomUUID } from "node:crypto";
import { hashPassword } from "../../../src/authorization-server/core/password.js";
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../../src/http/node.js";
import { silentLogger } from "../../../src/shared/log.js";
import type { AuthorizationStore, GrantRecord } from "../../../src/storage/contract.js";
import { createMemoryStore } from "../../../src/storage/memory/index.js";
import { Browser, hiddenFields, obtainCode, redeemCode, refreshGrant, tokenSet } from "../../support/flow.js";

export const RESOURCE = "https://notes.example/api";
export const CLIENT_ID = "notes-cli";
export const REDIRECT_URI = "https://app.example/cb";
export const METADATA_CLIENT_ID = "https://tools.example/client.json";
export const PASSWORD = "correct horse battery staple";

export interface AdminServer {
  url: string;
  server: AuthorizationServer;
  store: AuthorizationStore;
  admin: { id: string; username: string; password: string };
  user: { id: string; username: string; password: string };
  close(): Promise<void>;
}

/** `extra` options are laid over the defaults (a logger, an audit hook, tighter limits). */
export async function startAdminServer(
  extra: Partial<Omit<AuthorizationServerOptions, "issuer" | "store">> = {},
): Promise<AdminServer> {
  const store = createMemoryStore();
  let handler: AuthorizationServer["fetch"] | undefined;
  // The address the node listener saw is passed on: the rate limits and audit events key on it.
  const http: ListeningServer = await listen(async (request, info) =>
    handler ? handler(request, info) : new Response("starting", { status: 503 }),
  );
  const server = await createAuthorizationServer({
    issuer: http.url,
    store,
    allowInsecureLoopback: true,
    logger: silentLogger,
    maintenanceIntervalMs: 0,
    resources: [{ uri: RESOURCE, name: "Notes", scopes: ["notes:read", "notes:write"] }],
    scopeHierarchy: { "notes:write": ["notes:read"] },
    dynamicRegistration: { enabled: true },
    clients: [
      {
        clientId: CLIENT_ID,
        source: "preregistered",
        clientName: "Notes CLI",
        redirectUris: [REDIRECT_URI],
        grantTypes: ["authorization_code", "refresh_token"],
        responseTypes: ["code"],
        tokenEndpointAuthMethod: "none",
        metadata: {},
        createdAt: Date.now(),
      },
    ],
    ...extra,
  });
  handler = server.fetch;
  const hash = await hashPassword(PASSWORD);
  const admin = { id: randomUUID(), username: "root-admin", password: PASSWORD };
  const user = { id: randomUUID(), username: "alice", password: PASSWORD };
  await store.createUser({
    ...withoutPassword(admin),
    passwordHash: hash,
    isAdmin: true,
    createdAt: Date.now(),
  });
  await store.createUser({
    ...withoutPassword(user),
    passwordHash: hash,
    isAdmin: false,
    createdAt: Date.now(),
  });
  // A metadata-document client as the resolver caches it (no network fetch in these tests).
  await store.upsertClient({
    clientId: METADATA_CLIENT_ID,
    source: "metadata-document",
    clientName: "Tools from a document",
    redirectUris: ["http://127.0.0.1/callback"],
    grantTypes: ["authorization_code"],
    responseTypes: ["code"],
    tokenEndpointAuthMethod: "none",
    metadata: {},
    createdAt: Date.now(),
  });
  return {
    url: http.url,
    server,
    store,
    admin,
    user,
    async close() {
      await server.close();
      await http.close();
    },
  };
}

function withoutPassword(who: { id: string; username: string }): { id: string; username: string } {
  return { id: who.id, username: who.username };
}

/** Signs `who` in through `/admin` → `/login?return=/admin`; returns the browser and where it ended. */
export async function signInForAdmin(
  t: AdminServer,
  who: { username: string; password: string },
  browser = new Browser(),
): Promise<{ browser: Browser; location: string }> {
  const start = await browser.request(`${t.url}/admin`);
  if (start.status !== 303) throw new Error(`GET /admin answered ${start.status}, expected 303`);
  const loginPage = await browser.request(new URL(start.headers.get("location") ?? "", t.url).href);
  if (loginPage.status !== 200) throw new Error(`GET /login answered ${loginPage.status}`);
  const fields = hiddenFields(await loginPage.text());
  const done = await browser.postForm(`${t.url}/login`, {
    ...fields,
    username: who.username,
    password: who.password,
  });
  if (done.status !== 303) throw new Error(`POST /login answered ${done.status}`);
  return { browser, location: done.headers.get("location") ?? "" };
}

/**
 * A real grant for `who` through the browser side and /token (scope includes offline_access, so a
 * refresh token is issued); returns the tokens and the new grant's record.
 */
export async function obtainGrant(
  t: AdminServer,
  who: { id: string; username: string; password: string },
  browser: Browser,
  scope = "notes:read offline_access",
): Promise<{ refreshToken: string; accessToken: string; grant: GrantRecord }> {
  const before = new Set((await t.store.listGrants({ userId: who.id })).map((g) => g.grantId));
  const options = {
    instanceFor: () => t.url,
    clientId: CLIENT_ID,
    redirectUri: REDIRECT_URI,
    resource: RESOURCE,
    scope,
    user: who,
    browser,
  };
  const tokens = await tokenSet(await redeemCode(t.url, options, await obtainCode(options)));
  if (!tokens.refresh_token) throw new Error("no refresh token was issued");
  const grant = (await t.store.listGrants({ userId: who.id })).find((g) => !before.has(g.grantId));
  if (!grant) throw new Error("the token response created no grant");
  return { refreshToken: tokens.refresh_token, accessToken: tokens.access_token, grant };
}

/** The refresh grant's outcome at /token: status and OAuth error code. */
export async function tryRefresh(
  t: AdminServer,
  refreshToken: string,
): Promise<{ status: number; error?: string }> {
  const response = await refreshGrant(t.url, CLIENT_ID, refreshToken);
  const body = (await response.json()) as { error?: string };
  return body.error === undefined
    ? { status: response.status }
    : { status: response.status, error: body.error };
}
