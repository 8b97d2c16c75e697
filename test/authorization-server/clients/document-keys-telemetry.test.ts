/**
 * The fetch of a metadata document's key set is traced like the document's own fetch (a client
 * span with the host only, never the path), with a real OpenTelemetry SDK installed the way an
 * application would (docs/authorization-server.md, OpenTelemetry table).
 */

import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";
import { type FlowServer, startFlowServer } from "../support/flow-server.js";

const spans = new InMemorySpanExporter();
const tracerProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
let documents: TestHttpsServer;
let server: FlowServer;
let rsa: Awaited<ReturnType<typeof generateKeyPair>>;

beforeAll(async () => {
  tracerProvider.register();
  rsa = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(rsa.publicKey)), kid: "k1", alg: "RS256" };
  documents = await startTestHttpsServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    if (req.url === "/secret-path/jwks.json") {
      res.end(JSON.stringify({ keys: [jwk] }));
      return;
    }
    res.end(
      JSON.stringify({
        client_id: `${documents.origin}${req.url}`,
        client_name: "Keyed client",
        redirect_uris: ["https://vendor.example/callback"],
        token_endpoint_auth_method: "private_key_jwt",
        jwks_uri: `${documents.origin}/secret-path/jwks.json`,
      }),
    );
  });
  server = await startFlowServer({
    extra: {
      clientMetadataDocuments: { enabled: true, dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] } },
    },
  });
});
afterAll(async () => {
  await server?.close();
  await documents?.close();
  await tracerProvider.shutdown();
});

it("a key set fetch is a client span GET client_jwks naming the host only", async () => {
  const clientId = `${documents.origin}/client.json`;
  const now = Math.floor(server.clock.now / 1000);
  const assertion = await new SignJWT({})
    .setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(`${server.issuer}/token`)
    .setIssuedAt(now)
    .setExpirationTime(now + 60)
    .setJti(crypto.randomUUID())
    .sign(rsa.privateKey);
  const response = await fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "refresh_token",
      refresh_token: "not-a-real-token",
      client_id: clientId,
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: assertion,
    }),
  });
  // Authenticated (the grant then fails): the keys were fetched and used.
  expect(response.status).toBe(400);
  const span = spans.getFinishedSpans().find((s) => s.name === "GET client_jwks");
  expect(span?.attributes).toMatchObject({
    "gatehouse.fetch.purpose": "client_jwks",
    "server.address": "127.0.0.1",
  });
  expect(span?.status.code).not.toBe(2);
  const everything = JSON.stringify(spans.getFinishedSpans().map((s) => [s.name, s.attributes]));
  expect(everything).not.toContain("secret-path");
  expect(everything).not.toContain(assertion);
});
