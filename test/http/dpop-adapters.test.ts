/**
 * DPoP (RFC 9449 §7) through every adapter, on real loopback servers: the node:http fast path
 * (nodeRequireBearer, with and without a trusted proxy), Express and Hono judge the request head
 * and give the gate the method and the URL the server answers at (the proof's `htm` and `htu`).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDPoPKey, DPoPSigner } from "../../src/client/protocol/dpop.js";
import { requireBearerAuth } from "../../src/http/express.js";
import { type BearerAuthVariables, bearerAuth } from "../../src/http/hono.js";
import { nodeRequireBearer, toNodeListener } from "../../src/http/node.js";
import { createResourceServer, jwtVerifier, type ResourceServer } from "../../src/resource-server/index.js";
import { findChallenge, parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { craftProof, type ProofKey, proofKey } from "../resource-server/dpop-support.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";
import { rawRequest } from "../support/raw-request.js";

const RESOURCE = "https://mcp.example.com";
const NONCE_SECRET = "adapter tests nonce secret, 32+ bytes";

let issuer: TestIssuer;
let key: ProofKey;
let allowed: ResourceServer;
let withNonce: ResourceServer;
beforeAll(async () => {
  issuer = await startIssuer();
  key = await proofKey();
  const base = {
    resource: RESOURCE,
    authorizationServers: [issuer.issuer],
    verifier: jwtVerifier({ issuer: issuer.issuer, audience: RESOURCE, jwks: { keys: [issuer.publicJwk] } }),
  };
  allowed = createResourceServer({ ...base, dpop: { policy: "allowed" } });
  withNonce = createResourceServer({
    ...base,
    dpop: { policy: "required", nonce: { secret: NONCE_SECRET } },
  });
});
afterAll(async () => {
  await issuer.close();
});

function listenOn(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
}
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

const boundToken = (bound: ProofKey = key) =>
  issuer.sign({ aud: RESOURCE, sub: "alice", scope: "notes:read", cnf: { jkt: bound.jkt } });

function dpopError(response: Response): string | undefined {
  const challenges = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
  return findChallenge(challenges, "DPoP")?.params.error;
}

interface Started {
  url: string;
  close(): Promise<void>;
}

/** The DPoP checks every adapter must pass; `start(gate)` serves GET and POST /notes behind it. */
function dpopAdapterContract(name: string, start: (gate: ResourceServer) => Promise<Started>) {
  describe(name, () => {
    let plain: Started;
    let nonced: Started;
    beforeAll(async () => {
      plain = await start(allowed);
      nonced = await start(withNonce);
    });
    afterAll(async () => {
      await plain.close();
      await nonced.close();
    });

    it("takes a bound token with a proof for this method and URL; the handler sees dpopJkt", async () => {
      const at = await boundToken();
      for (const method of ["GET", "POST"]) {
        const url = `${plain.url}/notes?page=2`;
        const proof = await craftProof(key, { method, url, accessToken: at });
        const res = await fetch(url, { method, headers: { authorization: `DPoP ${at}`, dpop: proof } });
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ jkt: key.jkt });
      }
    });

    it("refuses a proof for another URL or another method", async () => {
      const at = await boundToken();
      const url = `${plain.url}/notes`;
      const elsewhere = await craftProof(key, { url: `http://127.0.0.1:1/notes`, accessToken: at });
      const res = await fetch(url, { headers: { authorization: `DPoP ${at}`, dpop: elsewhere } });
      expect(res.status).toBe(401);
      expect(dpopError(res)).toBe("invalid_dpop_proof");
      const post = await craftProof(key, { method: "POST", url, accessToken: at });
      const res2 = await fetch(url, { headers: { authorization: `DPoP ${at}`, dpop: post } });
      expect(dpopError(res2)).toBe("invalid_dpop_proof");
    });

    it("refuses two DPoP header fields sent on the wire", async () => {
      const at = await boundToken();
      const url = `${plain.url}/notes`;
      const a = await craftProof(key, { url, accessToken: at });
      const b = await craftProof(key, { url, accessToken: at });
      const host = new URL(plain.url).host;
      const raw = await rawRequest(
        plain.url,
        `GET /notes HTTP/1.1\r\nHost: ${host}\r\nAuthorization: DPoP ${at}\r\nDPoP: ${a}\r\nDPoP: ${b}\r\nConnection: close\r\n\r\n`,
      );
      expect(raw).toMatch(/^HTTP\/1\.1 401/);
      expect(raw).toMatch(/error="invalid_dpop_proof"/);
      expect(raw).not.toContain(at);
    });

    it("refuses a bound token sent as Bearer", async () => {
      const res = await fetch(`${plain.url}/notes`, {
        headers: { authorization: `Bearer ${await boundToken()}` },
      });
      expect(res.status).toBe(401);
      const challenges = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
      expect(findChallenge(challenges, "Bearer")?.params.error).toBe("invalid_token");
      expect(findChallenge(challenges, "DPoP")?.params.algs).toBe("ES256 EdDSA RS256 PS256");
    });

    it("demands a nonce (use_dpop_nonce, DPoP-Nonce), then takes the client's retried proof", async () => {
      const signer = new DPoPSigner(await createDPoPKey(issuer.issuer, `client-${name}`));
      const at = await issuer.sign({
        aud: RESOURCE,
        scope: "notes:read",
        cnf: { jkt: await signer.thumbprint() },
      });
      const url = `${nonced.url}/notes`;
      const send = async () => {
        const res = await fetch(url, {
          headers: { authorization: `DPoP ${at}`, dpop: await signer.proof("GET", url, at) },
        });
        signer.observe(url, res);
        return res;
      };
      const first = await send();
      expect(first.status).toBe(401);
      expect(dpopError(first)).toBe("use_dpop_nonce");
      expect(first.headers.get("dpop-nonce")).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(first.headers.get("access-control-expose-headers")).toContain("DPoP-Nonce");
      const second = await send();
      expect(second.status).toBe(200);
    });
  });
}

function nodeServer(gate: ResourceServer, trustProxy = false): Server {
  return createServer(
    nodeRequireBearer(gate, { scopes: ["notes:read"], trustProxy }, (_req, res, auth) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ jkt: auth.dpopJkt }));
    }),
  );
}

dpopAdapterContract("node:http (nodeRequireBearer)", async (gate) => {
  const server = nodeServer(gate);
  return { url: await listenOn(server), close: () => closeServer(server) };
});

dpopAdapterContract("web handler (toNodeListener + requireBearer)", async (gate) => {
  const guarded = gate.requireBearer({ scopes: ["notes:read"] });
  const server = createServer(
    toNodeListener((request) =>
      guarded(request, async (_request, auth) => Response.json({ jkt: auth.dpopJkt })),
    ),
  );
  return { url: await listenOn(server), close: () => closeServer(server) };
});

dpopAdapterContract("express (requireBearerAuth)", async (gate) => {
  const app = express();
  const handler = (req: express.Request, res: express.Response) => void res.json({ jkt: req.auth?.dpopJkt });
  app.get("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), handler);
  app.post("/notes", requireBearerAuth(gate, { scopes: ["notes:read"] }), handler);
  const server = createServer(app);
  return { url: await listenOn(server), close: () => closeServer(server) };
});

dpopAdapterContract("hono (bearerAuth)", async (gate) => {
  const app = new Hono<{ Variables: BearerAuthVariables }>();
  app.use("/notes", bearerAuth(gate, { scopes: ["notes:read"] }));
  app.on(["GET", "POST"], "/notes", (c) => c.json({ jkt: c.get("auth").dpopJkt }));
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => closeServer(server) };
});

describe("behind a trusted proxy", () => {
  it("node:http: htu is the forwarded URL the client called, not the hop's", async () => {
    const server = nodeServer(allowed, true);
    const url = await listenOn(server);
    try {
      const at = await boundToken();
      const publicUrl = "https://api.example.com/notes";
      const headers = {
        authorization: `DPoP ${at}`,
        "x-forwarded-proto": "https",
        "x-forwarded-host": "api.example.com",
      };
      const good = await fetch(`${url}/notes`, {
        headers: { ...headers, dpop: await craftProof(key, { url: publicUrl, accessToken: at }) },
      });
      expect(good.status).toBe(200);
      const hop = await fetch(`${url}/notes`, {
        headers: { ...headers, dpop: await craftProof(key, { url: `${url}/notes`, accessToken: at }) },
      });
      expect(hop.status).toBe(401);
      expect(dpopError(hop)).toBe("invalid_dpop_proof");
    } finally {
      await closeServer(server);
    }
  });

  it("express: htu follows the app's trust proxy setting", async () => {
    const app = express();
    app.set("trust proxy", 1);
    app.get("/notes", requireBearerAuth(allowed, { scopes: ["notes:read"] }), (req, res) => {
      res.json({ jkt: req.auth?.dpopJkt });
    });
    const server = createServer(app);
    const url = await listenOn(server);
    try {
      const at = await boundToken();
      const res = await fetch(`${url}/notes`, {
        headers: {
          authorization: `DPoP ${at}`,
          "x-forwarded-proto": "https",
          "x-forwarded-host": "api.example.com",
          dpop: await craftProof(key, { url: "https://api.example.com/notes", accessToken: at }),
        },
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ jkt: key.jkt });
    } finally {
      await closeServer(server);
    }
  });
});
