/**
 * A resource server and authorization server on loopback whose answers can each be made hostile:
 * a body that goes on far past any sane size, a `Content-Length` over the client's cap with no
 * body behind it, or a complete JSON body of the test's choosing. Every hostile answer records
 * how many body bytes the server handed to its socket and whether the connection closed before
 * the body ended, so a test can tell "abandoned at the cap" from "read to the end, then refused".
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What an endless body amounts to if nobody stops reading: far beyond every cap. */
export const ENDLESS_BYTES = 128 * 1024 * 1024;

export type HostileBody =
  /** Chunked, `prefix` then "a"s up to {@link ENDLESS_BYTES}, then `suffix` (valid JSON if read whole). */
  | { kind: "endless"; prefix: string; suffix: string }
  /** Headers only: `Content-Length: length`, then nothing, until the client hangs up. */
  | { kind: "declared"; length: number }
  /** A complete JSON document. */
  | { kind: "json"; value: unknown; status?: number };

/**
 * Which answer is hostile. `token` is the authorization code, client credentials and JWT bearer
 * grants; `refresh` the refresh grant; `idp-token` the enterprise identity provider's exchange.
 */
export type HostileRoute = "prm" | "as-metadata" | "register" | "token" | "refresh" | "revoke" | "idp-token";

export interface HostileAnswer {
  route: HostileRoute;
  /** Body bytes handed to the socket. */
  written: number;
  /** Resolves once the connection closed; `complete` says whether the whole body was sent. */
  closed: Promise<{ complete: boolean }>;
}

export interface OversizeServer {
  base: string;
  resourceUrl: string;
  prmUrl: string;
  /** Requests per path. */
  counts: Record<string, number>;
  /** Requests to the resource that carried an `Authorization` header (its length only). */
  authorizedResourceRequests: number[];
  /** Requests the HTTP parser refused (`HPE_*`, e.g. headers too large) before any handler saw them. */
  parserRejections: string[];
  answers: HostileAnswer[];
  close(): Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let data = "";
    req.on("data", (c) => {
      data += c;
    });
    req.on("end", () => resolve(data));
  });
}

function answerHostile(res: ServerResponse, route: HostileRoute, body: HostileBody): HostileAnswer {
  const answer: HostileAnswer = {
    route,
    written: 0,
    closed: new Promise((resolve) => res.on("close", () => resolve({ complete: res.writableFinished }))),
  };
  if (body.kind === "json") {
    const text = JSON.stringify(body.value);
    answer.written = Buffer.byteLength(text);
    res.writeHead(body.status ?? 200, { "content-type": "application/json" }).end(text);
    return answer;
  }
  if (body.kind === "declared") {
    res.writeHead(200, { "content-type": "application/json", "content-length": String(body.length) });
    res.flushHeaders();
    return answer;
  }
  res.writeHead(200, { "content-type": "application/json" });
  void (async () => {
    const chunk = Buffer.alloc(64 * 1024, "a");
    res.write(body.prefix);
    answer.written += Buffer.byteLength(body.prefix);
    while (answer.written < ENDLESS_BYTES && !res.destroyed) {
      answer.written += chunk.length;
      if (!res.write(chunk)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            res.off("drain", done);
            res.off("close", done);
            resolve();
          };
          res.on("drain", done);
          res.on("close", done);
        });
      }
    }
    if (!res.destroyed) res.end(body.suffix);
  })();
  return answer;
}

/** `hostile` is called with the server's base URL, which hostile documents may need to name. */
export async function startOversizeServer(
  hostile: (base: string) => Partial<Record<HostileRoute, HostileBody>>,
  options: { expiresIn?: number } = {},
): Promise<OversizeServer> {
  const counts: Record<string, number> = {};
  const authorizedResourceRequests: number[] = [];
  const parserRejections: string[] = [];
  const answers: HostileAnswer[] = [];
  const issued = new Set<string>();
  let base = "";
  let n = 0;
  const tokens = () => {
    n++;
    issued.add(`at-${n}`);
    return {
      access_token: `at-${n}`,
      token_type: "Bearer",
      expires_in: options.expiresIn ?? 3600,
      refresh_token: `rt-${n}`,
      scope: "read",
    };
  };
  // Large enough that an oversized token reaches the handler and is counted there.
  const server: Server = createServer({ maxHeaderSize: 1024 * 1024 }, async (req, res) => {
    const url = new URL(req.url ?? "/", base);
    counts[url.pathname] = (counts[url.pathname] ?? 0) + 1;
    const json = (status: number, value: unknown) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
    const hostileAnswer = (route: HostileRoute): boolean => {
      const body = hostile(base)[route];
      if (!body) return false;
      // A complete token response is a real issuance: its access token works at the resource.
      const issuedToken = body.kind === "json" && (body.value as { access_token?: unknown }).access_token;
      if (typeof issuedToken === "string") issued.add(issuedToken);
      answers.push(answerHostile(res, route, body));
      return true;
    };
    if (url.pathname === "/.well-known/oauth-protected-resource/mcp") {
      if (hostileAnswer("prm")) return;
      return json(200, {
        resource: `${base}/mcp`,
        authorization_servers: [base],
        scopes_supported: ["read"],
      });
    }
    if (url.pathname === "/.well-known/oauth-authorization-server") {
      if (hostileAnswer("as-metadata")) return;
      return json(200, {
        issuer: base,
        authorization_endpoint: `${base}/authorize`,
        token_endpoint: `${base}/token`,
        registration_endpoint: `${base}/register`,
        revocation_endpoint: `${base}/revoke`,
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none", "client_secret_basic"],
        grant_types_supported: [
          "authorization_code",
          "refresh_token",
          "client_credentials",
          "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ],
        scopes_supported: ["read"],
      });
    }
    if (url.pathname === "/register") {
      await readBody(req);
      if (hostileAnswer("register")) return;
      return json(201, { client_id: "client-1", redirect_uris: ["http://127.0.0.1:9/callback"] });
    }
    if (url.pathname === "/authorize") {
      const target = new URL(url.searchParams.get("redirect_uri") ?? "");
      target.searchParams.set("code", "code-1");
      target.searchParams.set("state", url.searchParams.get("state") ?? "");
      target.searchParams.set("iss", base);
      return res.writeHead(302, { location: target.href }).end();
    }
    if (url.pathname === "/token") {
      const form = new URLSearchParams(await readBody(req));
      const route = form.get("grant_type") === "refresh_token" ? "refresh" : "token";
      if (hostileAnswer(route)) return;
      return json(200, tokens());
    }
    if (url.pathname === "/idp/token") {
      await readBody(req);
      if (hostileAnswer("idp-token")) return;
      return json(200, {
        access_token: "id-jag",
        issued_token_type: "urn:ietf:params:oauth:token-type:id-jag",
        token_type: "N_A",
      });
    }
    if (url.pathname === "/revoke") {
      await readBody(req);
      if (hostileAnswer("revoke")) return;
      return res.writeHead(200).end();
    }
    if (url.pathname === "/mcp") {
      const authorization = req.headers.authorization;
      if (authorization !== undefined) authorizedResourceRequests.push(authorization.length);
      if (authorization && issued.has(authorization.replace(/^Bearer /, ""))) return json(200, { ok: true });
      return res
        .writeHead(401, {
          "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`,
        })
        .end();
    }
    json(404, { error: "not_found" });
  });
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    // HTTP parser refusals only; a reset is the client hanging up, which the tests expect.
    if (error.code?.startsWith("HPE_")) parserRejections.push(error.code);
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base,
    resourceUrl: `${base}/mcp`,
    prmUrl: `${base}/.well-known/oauth-protected-resource/mcp`,
    counts,
    authorizedResourceRequests,
    parserRejections,
    answers,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
