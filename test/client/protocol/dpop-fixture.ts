/**
 * A DPoP authorization server and resource server on two loopback origins, checking every proof
 * with jose the way RFC 9449 §4.3 says: signature by the embedded public `jwk` (no private members),
 * `typ` dpop+jwt, `htm`, `htu` (no query or fragment), `iat` window, unique `jti`, `ath` at the
 * resource, the server's nonce when it asks for one, and `cnf.jkt` binding of the access token.
 */
import { createHash, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  calculateJwkThumbprint,
  decodeProtectedHeader,
  EmbeddedJWK,
  generateKeyPair,
  type JWK,
  jwtVerify,
  SignJWT,
} from "jose";

export interface DPoPFakeOptions {
  /** The AS answers `use_dpop_nonce` until the proof carries its nonce. */
  asNonce?: boolean;
  /** The RS answers `use_dpop_nonce` until the proof carries its nonce. */
  rsNonce?: boolean;
  /** The RS demands a new nonce on every request (a server that never accepts). */
  rsNonceAlwaysNew?: boolean;
  /** Advertise `dpop_signing_alg_values_supported` (default true). */
  advertise?: boolean;
  /** The RS challenges with the DPoP scheme (default true). */
  dpopChallenge?: boolean;
  expiresIn?: number;
}

export interface ProofRecord {
  where: "token" | "resource";
  ok: boolean;
  error?: string;
  jkt?: string;
  jti?: string;
  nonce?: string;
  htu?: string;
}

export interface DPoPFake {
  asBase: string;
  resourceUrl: string;
  proofs: ProofRecord[];
  tokenRequests: Array<{ grant: string; dpop: boolean; status: number }>;
  resourceRequests: Array<{ scheme: string; status: number }>;
  close(): Promise<void>;
}

const ALGS = ["ES256", "ES384", "EdDSA", "RS256", "PS256"];

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => resolve(data));
  });
}

function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(value));
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** RFC 9449 §4.3 checks 1-11 (the nonce is checked by the caller, which knows whether it wants one). */
async function checkProof(
  proof: string | string[] | undefined,
  method: string,
  url: string,
  seenJtis: Set<string>,
  accessToken?: string,
): Promise<ProofRecord & { nonce?: string }> {
  const where = accessToken === undefined ? "token" : "resource";
  if (typeof proof !== "string" || proof.includes(",")) return { where, ok: false, error: "one DPoP header" };
  try {
    const header = decodeProtectedHeader(proof);
    if (header.typ !== "dpop+jwt") return { where, ok: false, error: "typ" };
    const jwk = header.jwk as JWK | undefined;
    if (!jwk || "d" in jwk) return { where, ok: false, error: "jwk" };
    const { payload } = await jwtVerify(proof, EmbeddedJWK, { typ: "dpop+jwt", algorithms: ALGS });
    const jti = payload.jti;
    if (typeof jti !== "string" || seenJtis.has(jti)) return { where, ok: false, error: "jti" };
    seenJtis.add(jti);
    if (payload.htm !== method) return { where, ok: false, error: "htm" };
    const target = new URL(url);
    if (payload.htu !== `${target.origin}${target.pathname}`) return { where, ok: false, error: "htu" };
    if (typeof payload.iat !== "number" || Math.abs(Date.now() / 1000 - payload.iat) > 60) {
      return { where, ok: false, error: "iat" };
    }
    if (accessToken !== undefined) {
      const ath = createHash("sha256").update(accessToken, "ascii").digest("base64url");
      if (payload.ath !== ath) return { where, ok: false, error: "ath" };
    }
    return {
      where,
      ok: true,
      jkt: await calculateJwkThumbprint(jwk, "sha256"),
      jti,
      htu: String(payload.htu),
      ...(typeof payload.nonce === "string" && { nonce: payload.nonce }),
    };
  } catch {
    return { where, ok: false, error: "signature" };
  }
}

export async function startDPoPFake(options: DPoPFakeOptions = {}): Promise<DPoPFake> {
  const signing = await generateKeyPair("ES256");
  const proofs: ProofRecord[] = [];
  const tokenRequests: DPoPFake["tokenRequests"] = [];
  const resourceRequests: DPoPFake["resourceRequests"] = [];
  const asJtis = new Set<string>();
  const rsJtis = new Set<string>();
  const codes = new Map<string, { challenge: string; scope: string }>();
  const refreshTokens = new Map<string, string>(); // refresh token -> jkt it is bound to
  const asNonce = `as-nonce-${randomUUID()}`;
  let rsNonce = `rs-nonce-${randomUUID()}`;
  let asBase = "";
  let rsBase = "";

  const issue = async (jkt: string, scope: string) => {
    const access = await new SignJWT({ scope, cnf: { jkt } })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt" })
      .setIssuer(asBase)
      .setAudience(`${rsBase}/mcp`)
      .setSubject("user-1")
      .setIssuedAt()
      // The JWT outlives the advertised expires_in, so a slow machine never sees it expire mid-test.
      .setExpirationTime(`${Math.max(options.expiresIn ?? 3600, 300)}s`)
      .setJti(randomUUID())
      .sign(signing.privateKey);
    const refresh = `rt-${randomUUID()}`;
    refreshTokens.set(refresh, jkt);
    return {
      access_token: access,
      token_type: "DPoP",
      expires_in: options.expiresIn ?? 3600,
      refresh_token: refresh,
      scope,
    };
  };

  const as = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", asBase);
    if (url.pathname === "/.well-known/oauth-authorization-server") {
      return json(res, 200, {
        issuer: asBase,
        authorization_endpoint: `${asBase}/authorize`,
        token_endpoint: `${asBase}/token`,
        registration_endpoint: `${asBase}/register`,
        code_challenge_methods_supported: ["S256"],
        authorization_response_iss_parameter_supported: true,
        scopes_supported: ["read", "offline_access"],
        ...(options.advertise !== false && { dpop_signing_alg_values_supported: ["ES256", "RS256"] }),
      });
    }
    if (url.pathname === "/register") {
      const meta = JSON.parse(await readBody(req)) as { redirect_uris?: string[] };
      return json(res, 201, { client_id: "dpop-client", redirect_uris: meta.redirect_uris });
    }
    if (url.pathname === "/authorize") {
      const code = `code-${randomUUID()}`;
      codes.set(code, {
        challenge: url.searchParams.get("code_challenge") ?? "",
        scope: url.searchParams.get("scope") ?? "",
      });
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("code", code);
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      target.searchParams.set("iss", asBase);
      return res.writeHead(302, { location: target.href }).end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(await readBody(req));
      const grant = form.get("grant_type") ?? "";
      const hasProof = req.headers.dpop !== undefined;
      const answer = (status: number, value: unknown, headers: Record<string, string> = {}) => {
        tokenRequests.push({ grant, dpop: hasProof, status });
        json(res, status, value, { "cache-control": "no-store", ...headers });
      };
      const proof = await checkProof(req.headers.dpop, "POST", `${asBase}/token`, asJtis);
      proofs.push(proof);
      if (!proof.ok) return answer(400, { error: "invalid_dpop_proof" });
      // RFC 9449 §8: the nonce is checked before the grant, so a code survives the challenge.
      if (options.asNonce && proof.nonce !== asNonce) {
        return answer(400, { error: "use_dpop_nonce" }, { "dpop-nonce": asNonce });
      }
      if (grant === "authorization_code") {
        const entry = codes.get(form.get("code") ?? "");
        const verifier = form.get("code_verifier") ?? "";
        if (!entry || createHash("sha256").update(verifier).digest("base64url") !== entry.challenge) {
          return answer(400, { error: "invalid_grant" });
        }
        codes.delete(form.get("code") ?? "");
        return answer(200, await issue(proof.jkt ?? "", entry.scope));
      }
      if (grant === "refresh_token") {
        const refresh = form.get("refresh_token") ?? "";
        const bound = refreshTokens.get(refresh);
        // RFC 9449 §5: a public client's refresh token is bound to its DPoP key.
        if (bound === undefined || bound !== proof.jkt) return answer(400, { error: "invalid_grant" });
        refreshTokens.delete(refresh);
        return answer(200, await issue(bound, "read"));
      }
      if (grant === "client_credentials") return answer(200, await issue(proof.jkt ?? "", "read"));
      return answer(400, { error: "unsupported_grant_type" });
    }
    json(res, 404, { error: "not_found" });
  });

  const rs = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", rsBase);
    const prmUrl = `${rsBase}/.well-known/oauth-protected-resource/mcp`;
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      return json(res, 200, {
        resource: `${rsBase}/mcp`,
        authorization_servers: [asBase],
        scopes_supported: ["read"],
      });
    }
    if (url.pathname !== "/mcp") return json(res, 404, { error: "not_found" });
    const authorization = req.headers.authorization ?? "";
    const space = authorization.indexOf(" ");
    const scheme = space > 0 ? authorization.slice(0, space) : "";
    const token = space > 0 ? authorization.slice(space + 1) : "";
    const reject = (error?: string, headers: Record<string, string> = {}) => {
      resourceRequests.push({ scheme, status: 401 });
      const scheme401 = options.dpopChallenge === false ? "Bearer" : "DPoP";
      const params = [
        ...(error ? [`error="${error}"`] : []),
        ...(scheme401 === "DPoP" ? ['algs="ES256"'] : []),
        `resource_metadata="${prmUrl}"`,
      ].join(", ");
      res.writeHead(401, { "www-authenticate": `${scheme401} ${params}`, ...headers }).end();
    };
    if (scheme.toLowerCase() !== "dpop") return reject();
    const proof = await checkProof(req.headers.dpop, req.method ?? "GET", url.href, rsJtis, token);
    proofs.push(proof);
    if (!proof.ok) return reject("invalid_dpop_proof");
    try {
      const { payload } = await jwtVerify(token, signing.publicKey, {
        issuer: asBase,
        audience: `${rsBase}/mcp`,
        typ: "at+jwt",
      });
      if ((payload.cnf as { jkt?: string } | undefined)?.jkt !== proof.jkt) return reject("invalid_token");
    } catch {
      return reject("invalid_token");
    }
    if (options.rsNonceAlwaysNew) rsNonce = `rs-nonce-${randomUUID()}`;
    if ((options.rsNonce || options.rsNonceAlwaysNew) && proof.nonce !== rsNonce) {
      return reject("use_dpop_nonce", { "dpop-nonce": rsNonce });
    }
    resourceRequests.push({ scheme, status: 200 });
    json(res, 200, { ok: true, method: req.method, body: await readBody(req) });
  });

  asBase = await listen(as);
  rsBase = await listen(rs);
  const stop = (server: Server) =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return {
    asBase,
    resourceUrl: `${rsBase}/mcp`,
    proofs,
    tokenRequests,
    resourceRequests,
    close: async () => {
      await Promise.all([stop(as), stop(rs)]);
    },
  };
}
