/**
 * Client ID Metadata Documents fetched by one instance are cached in the database and served from
 * there by the others (issue 5 "Several instances": CIMD cache entries are shared), and a flow for
 * such a client may hop between instances. Two in-process servers share one store; the document
 * comes from a local HTTPS server with a throw-away CA, trusted only through the loudly named
 * loopback opt-in (the CLI offers no such switch, hence in-process servers here).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { Browser, obtainCode, redeemCode, tokenSet } from "../support/flow.js";
import { type InProcessServer, serveInProcess } from "../support/in-process.js";
import {
  createBackend,
  createUsers,
  PASSWORD,
  REDIRECT_URI,
  RESOURCE,
  SCOPES,
} from "../support/instances.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../support/tls.js";

describe.each(["PostgreSQL", "SQLite"] as const)("metadata documents shared through %s", (kind) => {
  let backend: { store: AuthorizationStore; cleanup(): Promise<void> };
  let documents: TestHttpsServer;
  let fetches = 0;
  const servers: InProcessServer[] = [];
  let a: string;
  let b: string;
  let clientId: string;
  let username: string;

  async function instance(): Promise<string> {
    const served = await serveInProcess(backend.store, {
      clientMetadataDocuments: {
        enabled: true,
        trust: { kind: "any-https" },
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
    });
    servers.push(served);
    return served.http.url;
  }

  beforeAll(async () => {
    backend = await createBackend(kind, "cimd");
    await backend.store.migrate();
    [username] = (await createUsers(backend.store, "cimd", 1)) as [string];
    documents = await startTestHttpsServer((req, res) => {
      if (req.url !== "/client.json") {
        res.writeHead(404).end();
        return;
      }
      fetches++;
      res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=300" }).end(
        JSON.stringify({
          client_id: clientId,
          client_name: "Document client",
          redirect_uris: [REDIRECT_URI],
          token_endpoint_auth_method: "none",
        }),
      );
    });
    clientId = `${documents.origin}/client.json`;
    a = await instance();
    b = await instance();
  }, 60_000);

  afterAll(async () => {
    for (const served of servers) await served.close();
    await documents?.close();
    await backend?.cleanup();
  });

  it("fetched once by A, cached in the database, served from there by B; the flow hops A → B → A → B", async () => {
    const route = { authorize: a, login: b, consent: a, token: b } as const;
    const flow = {
      instanceFor: (step: keyof typeof route) => route[step],
      clientId,
      redirectUri: REDIRECT_URI,
      resource: RESOURCE,
      scope: SCOPES,
      user: { username, password: PASSWORD },
      browser: new Browser(),
    };
    const obtained = await obtainCode(flow);
    expect(fetches).toBe(1);
    expect(await backend.store.getCachedDocument(clientId, Date.now())).toBeDefined();

    // B resolves the same client id without fetching: from the shared cache.
    const query = new URLSearchParams({
      response_type: "code",
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: SCOPES,
    });
    const onB = await new Browser().request(`${b}/authorize?${query}`);
    expect(onB.status).toBe(303);
    expect(fetches).toBe(1);

    const tokens = await tokenSet(await redeemCode(b, flow, obtained));
    expect(tokens.access_token).toBeTypeOf("string");
  });
});
