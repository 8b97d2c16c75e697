/**
 * The signed identity assertion to the HTTP upstream: what a real upstream on loopback receives,
 * verified the way docs/gateway.md tells an upstream to verify it (jose's jwtVerify with the
 * gateway's public key, the expected typ, issuer and audience). Hostile: a client's own header of
 * that name, an assertion presented to another upstream, a key that is not asymmetric, a header
 * name that would replace the transport's.
 */
import { createSecretKey, generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { importJWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHttpGateway } from "../../src/gateway/http-gateway.js";
import { IDENTITY_ASSERTION_TYP, identityAssertionSigner } from "../../src/gateway/identity-assertion.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import {
  cachedVerifier,
  createOperationGate,
  createResourceServer,
  jwtVerifier,
} from "../../src/resource-server/index.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

const HEADER = "X-Gatehouse-Identity";

let issuer: TestIssuer;
let upstream: Server;
let upstreamUrl: string;
const seen: IncomingHttpHeaders[] = [];
beforeAll(async () => {
  issuer = await startIssuer();
  upstream = createServer((req, res) => {
    seen.push(req.headers);
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: body ? JSON.parse(body).id : null, result: {} }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  await issuer?.close();
  await new Promise<void>((resolve) => upstream?.close(() => resolve()));
});

async function startGateway(privateKey: string, lifetimeSeconds?: number) {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const server: ListeningServer = await listen((request) => handler(request));
  const resource = `${server.url}/mcp`;
  const resourceServer = createResourceServer({
    resource,
    authorizationServers: [issuer.issuer],
    verifier: cachedVerifier(
      jwtVerifier({ issuer: issuer.issuer, audience: resource, jwksUri: issuer.jwksUri }),
    ),
  });
  const gate = createOperationGate(resourceServer, { policy: { base: ["mcp:use"], default: {} } });
  const signer = identityAssertionSigner({
    privateKey,
    issuer: resource,
    audience: upstreamUrl,
    ...(lifetimeSeconds !== undefined && { lifetimeSeconds }),
  });
  const gateway = createHttpGateway({
    upstream: upstreamUrl,
    resourceServer,
    gate,
    identityAssertion: { header: HEADER, signer },
  });
  handler = (request) => gateway.fetch(request);
  const call = async (token: string, extra: Record<string, string> = {}) => {
    const response = await fetch(resource, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...extra,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(response.status).toBe(200);
    await response.text();
    return seen.at(-1)!;
  };
  return { resource, server, signer, call };
}

const p256 = () =>
  generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
    type: "pkcs8",
    format: "pem",
  }) as string;

describe("identity assertion", () => {
  it("the upstream receives a JWT it verifies with the gateway's public key: sub, client_id, scope, its own audience", async () => {
    const gateway = await startGateway(p256());
    try {
      const token = await issuer.sign({
        aud: gateway.resource,
        sub: "alice",
        client_id: "app",
        scope: "mcp:use notes:read",
      });
      const headers = await gateway.call(token);
      const assertion = headers[HEADER.toLowerCase()] as string;
      const jwk = await gateway.signer.publicJwk();
      expect(jwk).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
      expect(jwk.d).toBeUndefined();
      const { payload, protectedHeader } = await jwtVerify(assertion, await importJWK(jwk), {
        typ: IDENTITY_ASSERTION_TYP,
        issuer: gateway.resource,
        audience: upstreamUrl,
        algorithms: ["ES256"],
      });
      expect(protectedHeader.kid).toBe(jwk.kid);
      expect(payload).toMatchObject({ sub: "alice", client_id: "app", scope: "mcp:use notes:read" });
      expect(payload.exp! - payload.iat!).toBe(60);
      // Never the client's token, in the assertion or anywhere in the request.
      expect(JSON.stringify(headers)).not.toContain(token);
      // Another upstream, expecting its own audience, refuses it (RFC 7519 §4.1.3).
      await expect(
        jwtVerify(assertion, await importJWK(jwk), {
          typ: IDENTITY_ASSERTION_TYP,
          audience: "http://127.0.0.1:1/other",
        }),
      ).rejects.toThrow(/aud/);
    } finally {
      await gateway.server.close();
    }
  });

  it("a client's own header of that name never reaches the upstream; another caller gets their own assertion", async () => {
    const gateway = await startGateway(p256());
    try {
      const mallory = await issuer.sign({
        aud: gateway.resource,
        sub: "mallory",
        client_id: "app",
        scope: "mcp:use",
      });
      const forged = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.";
      const headers = await gateway.call(mallory, { [HEADER]: forged });
      const assertion = headers[HEADER.toLowerCase()] as string;
      expect(assertion).not.toBe(forged);
      const { payload } = await jwtVerify(assertion, await importJWK(await gateway.signer.publicJwk()), {
        typ: IDENTITY_ASSERTION_TYP,
        audience: upstreamUrl,
      });
      expect(payload.sub).toBe("mallory");
      const bob = await issuer.sign({
        aud: gateway.resource,
        sub: "bob",
        client_id: "app",
        scope: "mcp:use",
      });
      const bobs = (await gateway.call(bob))[HEADER.toLowerCase()] as string;
      expect(bobs).not.toBe(assertion);
    } finally {
      await gateway.server.close();
    }
  });

  it("an Ed25519 key signs EdDSA; a symmetric or RSA key, a bad lifetime and a transport header name are refused", async () => {
    const ed = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }) as string;
    const signer = identityAssertionSigner({
      privateKey: ed,
      issuer: "https://gw.example/mcp",
      audience: upstreamUrl,
    });
    expect(await signer.publicJwk()).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA" });
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
      type: "pkcs8",
      format: "pem",
    }) as string;
    expect(() =>
      identityAssertionSigner({ privateKey: createSecretKey(randomBytes(32)), issuer: "x", audience: "y" }),
    ).toThrow(/must be a private key/);
    expect(() => identityAssertionSigner({ privateKey: rsa, issuer: "x", audience: "y" })).toThrow(
      /P-256 or an Ed25519/,
    );
    expect(() =>
      identityAssertionSigner({
        privateKey: "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----",
        issuer: "x",
        audience: "y",
      }),
    ).toThrow();
    expect(() =>
      identityAssertionSigner({ privateKey: p256(), issuer: "x", audience: "y", lifetimeSeconds: 3600 }),
    ).toThrow(/lifetime/);
    const resourceServer = createResourceServer({
      resource: "http://127.0.0.1:1/mcp",
      authorizationServers: [issuer.issuer],
      verifier: jwtVerifier({
        issuer: issuer.issuer,
        audience: "http://127.0.0.1:1/mcp",
        jwksUri: issuer.jwksUri,
      }),
    });
    const gate = createOperationGate(resourceServer, { policy: { base: ["mcp:use"] } });
    expect(() =>
      createHttpGateway({
        upstream: upstreamUrl,
        resourceServer,
        gate,
        identityAssertion: { header: "Mcp-Session-Id", signer },
      }),
    ).toThrow(/would replace a header of the MCP transport/);
  });

  it("one assertion serves a caller while more than half its lifetime is left, then a new one is signed", async () => {
    let now = Date.UTC(2026, 10, 27, 12, 0, 0);
    const signer = identityAssertionSigner({
      privateKey: p256(),
      issuer: "https://gw.example/mcp",
      audience: upstreamUrl,
      now: () => now,
    });
    const auth = {
      subject: "alice",
      clientId: "app",
      scopes: ["mcp:use"],
      audience: [],
      expiresAt: 0,
      issuer: undefined,
    };
    const first = await signer.assertion(auth);
    now += 29_000;
    expect(await signer.assertion(auth)).toBe(first);
    now += 2_000;
    expect(await signer.assertion(auth)).not.toBe(first);
    // Another scope set is another assertion.
    expect(await signer.assertion({ ...auth, scopes: ["mcp:use", "math"] })).not.toBe(
      await signer.assertion(auth),
    );
  });
});
