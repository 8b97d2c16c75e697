/**
 * Gatehouse's own authorization server (memory store, dynamic registration, a user `auditor`) and
 * the demo notes resource on loopback, plus a `/step-up` route whose anonymous challenge asks for
 * notes:read while the operation needs notes:write (so a client must come back for more scope).
 * And a scripted user who signs in and approves the consent page over plain HTTP.
 */
import { randomUUID } from "node:crypto";
import { hashPassword } from "../../src/authorization-server/core/password.js";
import { type AuthorizationServer, createAuthorizationServer } from "../../src/authorization-server/index.js";
import { createNotesResource } from "../../src/demo/notes-resource.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { Logger } from "../../src/shared/log.js";
import { buildChallenge } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { Browser, hiddenFields } from "../support/flow.js";

const quiet: Logger = { info() {}, warn() {}, error() {} };
const USERNAME = "auditor";
const PASSWORD = "correct horse battery staple";

export interface LoginStack {
  /** The notes resource URI (its origin). */
  resource: string;
  issuer: string;
  close(): Promise<void>;
}

export async function startLoginStack(): Promise<LoginStack> {
  let as: AuthorizationServer | undefined;
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const asHttp: ListeningServer = await listen((r) => as!.fetch(r));
  const rsHttp: ListeningServer = await listen((r) => handler(r));
  const resource = rsHttp.url;
  const store = createMemoryStore();
  as = await createAuthorizationServer({
    issuer: asHttp.url,
    store,
    resources: [{ uri: resource, scopes: ["notes:read", "notes:write"] }],
    scopeHierarchy: { "notes:write": ["notes:read"] },
    allowInsecureLoopback: true,
    dynamicRegistration: { enabled: true },
    accessTokenTtlSeconds: 300,
    maintenanceIntervalMs: 0,
    logger: quiet,
  });
  await store.createUser({
    id: randomUUID(),
    username: USERNAME,
    passwordHash: await hashPassword(PASSWORD),
    isAdmin: false,
    createdAt: Date.now(),
  });
  const notes = createNotesResource({
    resource,
    issuer: asHttp.url,
    jwksUri: String(as.metadata.jwks_uri),
    logger: quiet,
  });
  const gate = notes.resourceServer;
  const needsWrite = gate.requireBearer({ scopes: ["notes:write"] });
  handler = async (request) => {
    if (new URL(request.url).pathname !== "/step-up") return notes.fetch(request);
    if (!request.headers.has("authorization")) {
      return new Response(null, {
        status: 401,
        headers: {
          "www-authenticate": buildChallenge("Bearer", {
            resource_metadata: gate.resourceMetadataUrl,
            scope: "notes:read",
          }),
        },
      });
    }
    return needsWrite(request, async () => Response.json({ ok: true }));
  };
  return {
    resource,
    issuer: asHttp.url,
    async close() {
      await as!.close();
      await rsHttp.close();
      await asHttp.close();
    },
  };
}

/**
 * Follows the authorization URL like a user: signs in, approves, and returns the first redirect
 * that leaves the authorization server (the client's redirect URI with code, state and iss).
 */
export async function scriptedUser(authorizationUrl: URL): Promise<string> {
  const browser = new Browser();
  const base = `${authorizationUrl.origin}${authorizationUrl.pathname.replace(/\/[^/]*$/, "")}`;
  let response = await browser.request(authorizationUrl.href);
  for (let i = 0; i < 6; i++) {
    const location = response.headers.get("location");
    if (response.status === 303 && location) {
      const next = new URL(location, authorizationUrl);
      if (next.origin !== authorizationUrl.origin) return next.href;
      response = await browser.request(next.href);
      continue;
    }
    if (response.status !== 200) throw new Error(`the authorization pages answered ${response.status}`);
    const page = await response.text();
    const fields = hiddenFields(page);
    response = /name="password"/.test(page)
      ? await browser.postForm(`${base}/login`, { ...fields, username: USERNAME, password: PASSWORD })
      : await browser.postForm(`${base}/consent`, { ...fields, decision: "approve" });
  }
  throw new Error("the authorization pages did not lead back to the redirect URI");
}
