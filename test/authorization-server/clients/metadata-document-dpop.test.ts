/**
 * A Client ID Metadata Document that declares `dpop_bound_access_tokens: true` (RFC 9449 §5.2), on
 * a real authorization server on loopback fetching the document from a loopback HTTPS server: the
 * client signs in and consents like any other, and then every token request must carry a proof.
 * The same document without the field leaves proofs optional.
 */
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";
import { proof, proofKey } from "../dpop-support.js";
import {
  Agent,
  approve,
  type FlowServer,
  RESOURCE,
  signIn,
  startFlowServer,
} from "../support/flow-server.js";

const REDIRECT_URI = "https://app.example/callback";

let documents: TestHttpsServer;
let server: FlowServer | undefined;

/** The documents served, by path: one bound to DPoP, one not. */
const DOCUMENT_PATHS = { bound: "/always-dpop.json", plain: "/plain.json" } as const;

beforeAll(async () => {
  documents = await startTestHttpsServer((req, res) => {
    const path = req.url ?? "";
    if (path !== DOCUMENT_PATHS.bound && path !== DOCUMENT_PATHS.plain) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        client_id: `${documents.origin}${path}`,
        client_name: "Document client",
        redirect_uris: [REDIRECT_URI],
        ...(path === DOCUMENT_PATHS.bound ? { dpop_bound_access_tokens: true } : {}),
      }),
    );
  });
});
afterAll(async () => {
  await documents.close();
});
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Signs in, consents and redeems the code as the document client at `path`, with or without a proof. */
async function codeFlow(path: string, withProof: boolean) {
  server ??= await startFlowServer({
    extra: {
      clientMetadataDocuments: {
        enabled: true,
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
    },
  });
  const clientId = `${documents.origin}${path}`;
  const agent = new Agent(server.issuer);
  const grant = await approve(
    agent,
    await signIn(agent, { clientId, redirectUri: REDIRECT_URI, scope: "notes:read" }),
  );
  const key = await proofKey();
  const response = await fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(withProof ? { dpop: await proof(key, `${server.issuer}/token`, server.clock.now) } : {}),
    },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: grant.code,
      code_verifier: grant.verifier,
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      resource: RESOURCE,
    }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown>, key };
}

it("a document with dpop_bound_access_tokens: true makes its client send a proof with every token request", async () => {
  const without = await codeFlow(DOCUMENT_PATHS.bound, false);
  expect(without).toMatchObject({ status: 400, body: { error: "invalid_dpop_proof" } });
  expect(without.body.access_token).toBeUndefined();

  const bound = await codeFlow(DOCUMENT_PATHS.bound, true);
  expect(bound.status).toBe(200);
  expect(bound.body.token_type).toBe("DPoP");
  const claims = JSON.parse(
    Buffer.from(String(bound.body.access_token).split(".")[1]!, "base64url").toString("utf8"),
  );
  expect(claims.cnf).toEqual({ jkt: bound.key.jkt });
});

it("the same document without the field leaves the proof optional", async () => {
  const plain = await codeFlow(DOCUMENT_PATHS.plain, false);
  expect(plain.status).toBe(200);
  expect(plain.body.token_type).toBe("Bearer");
});
