/**
 * A Client ID Metadata Document client that authenticates with `private_key_jwt` and publishes its
 * keys at a `jwks_uri` (ChatGPT's shape), against a real authorization server on loopback fetching
 * documents and key sets from a loopback HTTPS server with a test CA (clients/document-keys.ts).
 *
 * Client authentication is probed with `grant_type=refresh_token` and a refresh token that does not
 * exist: the token endpoint authenticates the client before the grant, so 400 invalid_grant means
 * "authenticated" and 401 invalid_client "refused". The whole code flow runs in
 * test/interop/vendor-documents.test.ts.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { jsonLogger } from "../../../src/shared/log.js";
import {
  addAddressToLoopback,
  type HttpsServerOn,
  privateCaFor,
  startHttpsServerOn,
} from "../../support/private-network.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../../support/tls.js";
import { type FlowServer, startFlowServer } from "../support/flow-server.js";

const PRIVATE_ADDRESS = "10.78.21.1";

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

let rsa: KeyPair;
let publicJwk: JWK;
let documents: TestHttpsServer;
let privateServer: HttpsServerOn;
let removeAddress: () => void;
let server: FlowServer;
/** The server's log lines, parsed. */
const logs: Record<string, unknown>[] = [];

/** What each jwks path answers, per test; every request is counted by path. */
const jwksHandlers = new Map<string, (res: ServerResponse) => void>();
const hits = new Map<string, number>();

function serveJson(body: unknown, headers: Record<string, string> = {}) {
  return (res: ServerResponse) => {
    res.writeHead(200, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };
}

function documentFor(path: string, jwksUri: string, extra: Record<string, unknown> = {}) {
  return {
    client_id: `${documents.origin}${path}`,
    client_name: "ChatGPT-style client",
    redirect_uris: ["https://vendor.example/connector/oauth_redirect"],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "private_key_jwt",
    token_endpoint_auth_methods_supported: ["none", "private_key_jwt"],
    token_endpoint_auth_signing_alg: "RS256",
    jwks_uri: jwksUri,
    ...extra,
  };
}

/** Documents at /doc/<name>.json name the key set at /jwks/<name> unless the map says otherwise. */
const documentJwksUri = new Map<string, string>();
/** Fields a document overrides (undefined removes one). */
const documentExtra = new Map<string, Record<string, unknown>>();

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = (req.url ?? "").split("?")[0]!;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  const doc = /^\/doc\/([a-z0-9-]+)\.json$/.exec(path);
  if (doc) {
    const jwksUri = documentJwksUri.get(doc[1]!) ?? `${documents.origin}/jwks/${doc[1]}`;
    serveJson(documentFor(path, jwksUri, documentExtra.get(doc[1]!)))(res);
    return;
  }
  const handler = jwksHandlers.get(path);
  if (handler) {
    handler(res);
    return;
  }
  res.writeHead(404).end();
}

beforeAll(async () => {
  rsa = await generateKeyPair("RS256", { extractable: true });
  publicJwk = { ...(await exportJWK(rsa.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
  documents = await startTestHttpsServer(handle);
  removeAddress = addAddressToLoopback(PRIVATE_ADDRESS);
  privateServer = await startHttpsServerOn(PRIVATE_ADDRESS, privateCaFor([PRIVATE_ADDRESS]), (_req, res) =>
    serveJson({ keys: [publicJwk] })(res),
  );
  server = await startFlowServer({
    extra: {
      logger: jsonLogger((line) => logs.push(JSON.parse(line) as Record<string, unknown>)),
      clientMetadataDocuments: {
        enabled: true,
        timeoutMs: 3000,
        dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
      },
    },
  });
});
afterAll(async () => {
  await server?.close();
  await documents?.close();
  await privateServer?.close();
  removeAddress?.();
});
beforeEach(() => {
  logs.length = 0;
});

function clientId(name: string): string {
  return `${documents.origin}/doc/${name}.json`;
}

async function assertion(
  name: string,
  key: KeyPair["privateKey"] = rsa.privateKey,
  kid = "k1",
  alg = "RS256",
) {
  const id = clientId(name);
  return new SignJWT({})
    .setProtectedHeader({ alg, kid })
    .setIssuer(id)
    .setSubject(id)
    .setAudience(`${server.issuer}/token`)
    .setIssuedAt(Math.floor(server.clock.now / 1000))
    .setExpirationTime(Math.floor(server.clock.now / 1000) + 120)
    .setJti(crypto.randomUUID())
    .sign(key);
}

/** A token request authenticated with `form`'s client authentication; status and OAuth error. */
async function probe(
  form: Record<string, string>,
): Promise<{ status: number; error: string; description: string }> {
  const response = await fetch(`${server.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "not-a-real-token", ...form }),
  });
  const body = (await response.json()) as { error: string; error_description: string };
  return { status: response.status, error: body.error, description: body.error_description };
}

async function withKey(name: string, key?: KeyPair["privateKey"], kid?: string, alg?: string) {
  return probe({
    client_id: clientId(name),
    client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    client_assertion: await assertion(name, key, kid, alg),
  });
}

const AUTHENTICATED = { status: 400, error: "invalid_grant" };
const REFUSED = { status: 401, error: "invalid_client" };

describe("a document's jwks_uri is fetched through the guarded fetch and keyed to the document", () => {
  it("ChatGPT's shape: the keys at jwks_uri authenticate the client (RS256 private_key_jwt)", async () => {
    jwksHandlers.set("/jwks/chatgpt", serveJson({ keys: [publicJwk] }));
    expect(await withKey("chatgpt")).toMatchObject(AUTHENTICATED);
  });

  it("hostile: none at /token for a document that chose private_key_jwt is refused (no downgrade), also with a key's kid", async () => {
    jwksHandlers.set("/jwks/downgrade", serveJson({ keys: [publicJwk] }));
    expect(await probe({ client_id: clientId("downgrade") })).toMatchObject(REFUSED);
    const other = await generateKeyPair("RS256");
    expect(await withKey("downgrade", other.privateKey)).toMatchObject(REFUSED);
    expect(await withKey("downgrade")).toMatchObject(AUTHENTICATED);
  });

  it("hostile: an assertion signed with another algorithm than the document's RS256 is refused", async () => {
    const ps = await generateKeyPair("PS256", { extractable: true });
    const psJwk = { ...(await exportJWK(ps.publicKey)), kid: "k1" };
    jwksHandlers.set("/jwks/alg", serveJson({ keys: [psJwk] }));
    jwksHandlers.set("/jwks/no-alg", serveJson({ keys: [psJwk] }));
    documentExtra.set("no-alg", { token_endpoint_auth_signing_alg: undefined });
    expect(await withKey("alg", ps.privateKey, "k1", "PS256")).toMatchObject(REFUSED);
    // The same key and algorithm for a document that names no algorithm: accepted (PS256 is allowed).
    expect(await withKey("no-alg", ps.privateKey, "k1", "PS256")).toMatchObject(AUTHENTICATED);
  });

  it("cached within the clamps: a second authentication does not refetch; no-store is used once", async () => {
    jwksHandlers.set("/jwks/cached", serveJson({ keys: [publicJwk] }, { "cache-control": "max-age=600" }));
    jwksHandlers.set("/jwks/uncached", serveJson({ keys: [publicJwk] }, { "cache-control": "no-store" }));
    for (let i = 0; i < 3; i++) {
      expect(await withKey("cached")).toMatchObject(AUTHENTICATED);
      expect(await withKey("uncached")).toMatchObject(AUTHENTICATED);
    }
    expect(hits.get("/jwks/cached")).toBe(1);
    expect(hits.get("/jwks/uncached")).toBe(3);
  });

  it("keyed to the document: two documents naming one jwks_uri each fetch it; a cache entry serves only its own client", async () => {
    const shared = `${documents.origin}/jwks/shared`;
    jwksHandlers.set("/jwks/shared", serveJson({ keys: [publicJwk] }, { "cache-control": "max-age=600" }));
    documentJwksUri.set("first", shared);
    documentJwksUri.set("second", shared);
    expect(await withKey("first")).toMatchObject(AUTHENTICATED);
    expect(await withKey("first")).toMatchObject(AUTHENTICATED);
    expect(hits.get("/jwks/shared")).toBe(1);
    expect(await withKey("second")).toMatchObject(AUTHENTICATED);
    expect(hits.get("/jwks/shared")).toBe(2);
  });

  it("a rotated key: an unknown kid refetches once the cached set is 30 s old, not before", async () => {
    const next = await generateKeyPair("RS256", { extractable: true });
    const nextJwk = { ...(await exportJWK(next.publicKey)), kid: "k2", alg: "RS256" };
    let keys: JWK[] = [publicJwk];
    jwksHandlers.set("/jwks/rotating", (res) =>
      serveJson({ keys }, { "cache-control": "max-age=3600" })(res),
    );
    expect(await withKey("rotating")).toMatchObject(AUTHENTICATED);
    keys = [publicJwk, nextJwk];
    expect(await withKey("rotating", next.privateKey, "k2")).toMatchObject(REFUSED);
    expect(hits.get("/jwks/rotating")).toBe(1);
    server.clock.now += 31_000;
    expect(await withKey("rotating", next.privateKey, "k2")).toMatchObject(AUTHENTICATED);
    expect(hits.get("/jwks/rotating")).toBe(2);
  });

  it("a failure is never cached: the next request after the key set is fixed succeeds", async () => {
    let broken = true;
    jwksHandlers.set("/jwks/flaky", (res) => {
      if (broken) res.writeHead(500).end();
      else serveJson({ keys: [publicJwk] }, { "cache-control": "max-age=600" })(res);
    });
    expect(await withKey("flaky")).toMatchObject(REFUSED);
    broken = false;
    expect(await withKey("flaky")).toMatchObject(AUTHENTICATED);
  });
});

describe("hostile key sets and jwks_uri destinations are refused", () => {
  it("a redirect is not followed (the target is never asked)", async () => {
    jwksHandlers.set("/jwks/redirect", (res) => {
      res.writeHead(302, { location: `${documents.origin}/jwks/redirect-target` }).end();
    });
    jwksHandlers.set("/jwks/redirect-target", serveJson({ keys: [publicJwk] }));
    const answer = await withKey("redirect");
    expect(answer).toMatchObject(REFUSED);
    expect(answer.description).toBe(
      "client keys could not be used: the jwks_uri answered with a redirect (redirects are not followed)",
    );
    expect(hits.get("/jwks/redirect-target")).toBeUndefined();
  });

  it("an oversized key set is refused (byte cap, whatever the framing)", async () => {
    const padding = "x".repeat(20_000);
    jwksHandlers.set("/jwks/oversized", (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      // No Content-Length: the cap must hold on the bytes that arrive.
      res.write(JSON.stringify({ keys: [{ ...publicJwk, padding }] }));
      res.end();
    });
    const answer = await withKey("oversized");
    expect(answer).toMatchObject(REFUSED);
    expect(answer.description).toContain("larger than 16384 bytes");
  });

  it("a slow key set is refused at the deadline (headers sent, body trickling)", async () => {
    jwksHandlers.set("/jwks/slow", (res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"keys":[');
      const timer = setInterval(() => res.write(" "), 200);
      res.on("close", () => clearInterval(timer));
    });
    const answer = await withKey("slow");
    expect(answer).toMatchObject(REFUSED);
    expect(answer.description).toBe("client keys could not be used: the key set was not received in time");
  });

  it("a symmetric key or a private key in the set refuses the whole set", async () => {
    jwksHandlers.set(
      "/jwks/symmetric",
      serveJson({ keys: [publicJwk, { kty: "oct", k: "c2VjcmV0LXNlY3JldA" }] }),
    );
    const privateJwk = { ...(await exportJWK(rsa.privateKey)), kid: "k1", alg: "RS256" };
    jwksHandlers.set("/jwks/private", serveJson({ keys: [privateJwk] }));
    const symmetric = await withKey("symmetric");
    expect(symmetric).toMatchObject(REFUSED);
    expect(symmetric.description).toBe(
      "client keys could not be used: the key set: symmetric keys (kty oct) are not accepted",
    );
    const leaked = await withKey("private");
    expect(leaked).toMatchObject(REFUSED);
    expect(leaked.description).toBe("client keys could not be used: the key set: must hold public keys only");
    // Neither the key material nor the body reaches the answer or the log.
    expect(JSON.stringify(logs)).not.toContain(String(privateJwk.d));
  });

  it("with an allow-list trust policy, a jwks_uri on a host off the list is refused and never asked", async () => {
    jwksHandlers.set("/jwks/listed", serveJson({ keys: [publicJwk] }));
    jwksHandlers.set("/jwks/unlisted", serveJson({ keys: [publicJwk] }));
    // The documents are on 127.0.0.1 (listed); `localhost` reaches the same server but is not listed.
    documentJwksUri.set("unlisted", `https://localhost:${documents.port}/jwks/unlisted`);
    const main = server;
    server = await startFlowServer({
      extra: {
        clientMetadataDocuments: {
          enabled: true,
          trust: { kind: "allow-list", hosts: ["127.0.0.1"] },
          dangerouslyAllowLoopbackForTesting: { ca: [testTls().ca] },
        },
      },
    });
    try {
      expect(await withKey("listed")).toMatchObject(AUTHENTICATED);
      const answer = await withKey("unlisted");
      expect(answer).toMatchObject(REFUSED);
      expect(answer.description).toBe(
        "client keys could not be used: the jwks_uri host is not allowed by this server's policy",
      );
      expect(hits.get("/jwks/unlisted")).toBeUndefined();
    } finally {
      await server.close();
      server = main;
    }
  });

  it("a jwks_uri on a private address is refused before any connection (a real server listens there)", async () => {
    documentJwksUri.set("private-address", `${privateServer.origin}/jwks`);
    const answer = await withKey("private-address");
    expect(answer).toMatchObject(REFUSED);
    expect(answer.description).toBe("client keys could not be used: the key set could not be fetched");
    expect(privateServer.connections()).toBe(0);
    expect(logs.some((l) => l.event === "client_jwks.refused" && l.error === "blocked_address")).toBe(true);
  });

  it("a jwks_uri on the cloud metadata address is refused before any connection", async () => {
    documentJwksUri.set("metadata-address", "https://169.254.169.254/latest/jwks");
    const answer = await withKey("metadata-address");
    expect(answer).toMatchObject(REFUSED);
    expect(logs.some((l) => l.event === "client_jwks.refused" && l.error === "blocked_address")).toBe(true);
  });
});
