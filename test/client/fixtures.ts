/** A purpose-built resource server + authorization server on loopback for the client's rules. */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeOptions {
  prmResource?: (base: string) => string;
  metadataIssuer?: (base: string) => string;
  pkceMethods?: string[] | null;
  issMode?: "correct" | "omit" | "wrong";
  expiresIn?: number;
  requiredScope?: string;
  /** The resource answers 403 insufficient_scope for this scope forever. */
  impossibleScope?: string;
  refreshFails?: boolean;
  /**
   * The token endpoint answers this grant 503 `temporarily_unavailable` (RFC 6749 §5.2), with
   * `retryAfter` as Retry-After when given, `times` times before answering as usual: an outage.
   */
  unavailable?: { grant: "authorization_code" | "refresh_token"; times: number; retryAfter?: string };
  /** No `registration_endpoint` (and no metadata document support): only pre-registered clients. */
  noRegistration?: boolean;
  /**
   * Publish a `revocation_endpoint` (RFC 7009) that records every call: `ok` answers 200 and
   * revokes the token; `fail` answers 400 invalid_request; `hold` keeps each call waiting until `releaseRevocations`.
   */
  revocation?: "ok" | "fail" | "hold";
}

export interface Fake {
  base: string;
  resourceUrl: string;
  counts: Record<string, number>;
  seen: {
    authorize: URLSearchParams[];
    token: URLSearchParams[];
    revoke: Array<{ form: URLSearchParams; authorization: string | undefined }>;
  };
  /** Answers the revocation calls that `revocation: "hold"` kept waiting. */
  releaseRevocations(): void;
  close(): Promise<void>;
}

/** A request body read whole (test servers only: bounded by what the tests send). */
export function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => resolve(data));
  });
}

export async function startFake(options: FakeOptions = {}): Promise<Fake> {
  const counts: Record<string, number> = {};
  const seen: Fake["seen"] = { authorize: [], token: [], revoke: [] };
  const held: Array<() => void> = [];
  const codes = new Map<string, { challenge: string; scope: string }>();
  const access = new Map<string, string>();
  let currentRefresh: string | undefined;
  let n = 0;
  let base = "";
  const issue = (scope: string) => {
    n++;
    const at = `at-${n}`;
    access.set(at, scope);
    currentRefresh = `rt-${n}`;
    return {
      access_token: at,
      token_type: "Bearer",
      expires_in: options.expiresIn ?? 3600,
      refresh_token: currentRefresh,
      ...(scope && { scope }),
    };
  };
  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", base);
    counts[url.pathname] = (counts[url.pathname] ?? 0) + 1;
    const json = (status: number, value: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(value));
    const prmUrl = `${base}/.well-known/oauth-protected-resource/mcp`;
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      return json(200, {
        resource: options.prmResource ? options.prmResource(base) : `${base}/mcp`,
        authorization_servers: [base],
        scopes_supported: ["read"],
      });
    }
    if (url.pathname === "/.well-known/oauth-authorization-server") {
      return json(200, {
        issuer: options.metadataIssuer ? options.metadataIssuer(base) : base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        ...(!options.noRegistration && { registration_endpoint: `${base}/register` }),
        ...(options.revocation && { revocation_endpoint: `${base}/revoke` }),
        ...(options.pkceMethods !== null && {
          code_challenge_methods_supported: options.pkceMethods ?? ["S256"],
        }),
        authorization_response_iss_parameter_supported: true,
        scopes_supported: ["read", "write", "offline_access"],
      });
    }
    if (url.pathname === "/register") {
      return json(201, { client_id: "client-1", redirect_uris: JSON.parse(await body(req)).redirect_uris });
    }
    if (url.pathname === "/authorize") {
      seen.authorize.push(url.searchParams);
      const code = `code-${codes.size + 1}`;
      codes.set(code, {
        challenge: url.searchParams.get("code_challenge") ?? "",
        scope: url.searchParams.get("scope") ?? "",
      });
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("code", code);
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      target.searchParams.set("error_description", "should never be shown");
      if (options.issMode !== "omit") {
        target.searchParams.set("iss", options.issMode === "wrong" ? "https://evil.example" : base);
      }
      return res.writeHead(302, { location: target.href }).end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(await body(req));
      seen.token.push(form);
      const outage = options.unavailable;
      if (outage && outage.times > 0 && form.get("grant_type") === outage.grant) {
        outage.times--;
        return json(
          503,
          { error: "temporarily_unavailable", error_description: "the database is not answering" },
          outage.retryAfter === undefined ? {} : { "retry-after": outage.retryAfter },
        );
      }
      if (form.get("grant_type") === "authorization_code") {
        const entry = codes.get(form.get("code") ?? "");
        const verifier = form.get("code_verifier") ?? "";
        if (!entry || createHash("sha256").update(verifier).digest("base64url") !== entry.challenge) {
          return json(400, { error: "invalid_grant" });
        }
        codes.delete(form.get("code") ?? "");
        return json(200, issue(entry.scope), { "cache-control": "no-store" });
      }
      if (form.get("grant_type") === "refresh_token") {
        // Slow enough that concurrent callers overlap.
        await new Promise((r) => setTimeout(r, 50));
        if (options.refreshFails || form.get("refresh_token") !== currentRefresh) {
          currentRefresh = undefined;
          return json(400, { error: "invalid_grant" });
        }
        return json(200, issue("read"));
      }
      return json(400, { error: "unsupported_grant_type" });
    }
    if (url.pathname === "/revoke" && options.revocation) {
      const form = new URLSearchParams(await body(req));
      seen.revoke.push({ form, authorization: req.headers.authorization });
      if (options.revocation === "hold") await new Promise<void>((r) => held.push(r));
      if (options.revocation === "fail") return json(400, { error: "invalid_request" });
      const token = form.get("token") ?? "";
      if (token === currentRefresh) currentRefresh = undefined;
      access.delete(token);
      return res.writeHead(200).end();
    }
    if (url.pathname.startsWith("/mcp")) {
      const auth = req.headers.authorization ?? "";
      const token = auth.startsWith("Bearer ") ? auth.slice(7) : "";
      const scopes = access.get(token);
      if (scopes === undefined) {
        return res
          .writeHead(401, { "www-authenticate": `Bearer resource_metadata="${prmUrl}", scope="read"` })
          .end();
      }
      const needed = options.impossibleScope ?? options.requiredScope;
      if ((needed && !scopes.split(" ").includes(needed)) || options.impossibleScope) {
        return res
          .writeHead(403, {
            "www-authenticate": `Bearer error="insufficient_scope", scope="${needed}", resource_metadata="${prmUrl}"`,
          })
          .end();
      }
      return json(200, { ok: true, method: req.method, body: await body(req) });
    }
    json(404, { error: "not_found" });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    resourceUrl: `${base}/mcp`,
    counts,
    seen,
    releaseRevocations: () => {
      for (const release of held.splice(0)) release();
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A user agent that follows one redirect and returns the callback URL. */
export async function followRedirect(url: URL): Promise<string> {
  const response = await fetch(url, { redirect: "manual" });
  await response.body?.cancel();
  return new URL(response.headers.get("location") ?? "", url).href;
}
