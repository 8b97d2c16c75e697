/**
 * The auditor's HTTP probes. Unlike the client's discovery (src/client/protocol/discovery.ts), which stops at
 * the first document that works, every probe here records what each discovery form returned, so the
 * report can say which forms are served and which are not.
 *
 * Credential discipline (the auditor "never sends credentials anywhere the spec would not"):
 * - metadata requests (PRM, authorization server metadata) carry nothing;
 * - the two deliberately bogus tokens go only to the resource URL itself, never to another host;
 * - redirects are never followed, so no request is silently re-sent somewhere else.
 */
import { randomBytes } from "node:crypto";
import {
  authorizationServerMetadataUrls,
  protectedResourceMetadataUrls,
} from "../client/protocol/discovery.js";
import type { FetchLike } from "../client/protocol/http.js";
import { readTextUpTo, TOO_LARGE } from "../shared/bounded-body.js";
import { AuthorizationServerMetadataSchema, ProtectedResourceMetadataSchema } from "../shared/metadata.js";
import { parseWWWAuthenticate } from "../shared/www-authenticate.js";
import type {
  AsForm,
  AsMetadataProbe,
  AuthorizationServerProbe,
  CredentialKind,
  DocumentProbe,
  Exchange,
  PrmProbe,
  ResponseProbe,
} from "./types.js";

/** Metadata documents larger than this are reported, not parsed. */
export const MAX_DOCUMENT_BYTES = 256 * 1024;

/** At most this many `authorization_servers` entries are probed. */
export const MAX_AUTHORIZATION_SERVERS = 5;

/** Sends requests for the auditor and keeps a log of them (without credentials). */
export class Prober {
  readonly exchanges: Exchange[] = [];
  readonly #fetch: FetchLike;
  readonly #timeoutMs: number;

  constructor(fetchImpl: FetchLike, timeoutMs: number) {
    this.#fetch = fetchImpl;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * One request with `redirect: "manual"` and a deadline. `logUrl` is what the exchange log shows
   * (the query token probe logs its URL with the bogus value masked).
   */
  async send(
    url: string,
    init: {
      headers?: Record<string, string>;
      credential: CredentialKind;
      logUrl?: string;
      method?: "GET" | "POST" | "DELETE";
      body?: string;
    },
  ): Promise<{ response?: Response; error?: string }> {
    const method = init.method ?? "GET";
    const exchange: Exchange = { method, url: init.logUrl ?? url, credential: init.credential };
    this.exchanges.push(exchange);
    try {
      const response = await this.#fetch(url, {
        method,
        headers: init.headers ?? {},
        ...(init.body !== undefined && { body: init.body }),
        redirect: "manual",
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      exchange.status = response.status;
      return { response };
    } catch (cause) {
      const error = describeTransportError(cause);
      exchange.error = error;
      return { error };
    }
  }
}

function describeTransportError(cause: unknown): string {
  if (cause instanceof Error) {
    if (cause.name === "TimeoutError" || cause.name === "AbortError") return "timed out";
    const inner = (cause as { cause?: unknown }).cause;
    const code = inner && typeof inner === "object" ? (inner as { code?: unknown }).code : undefined;
    return typeof code === "string" ? `${cause.message} (${code})` : cause.message;
  }
  return String(cause);
}

/** Reads at most `limit` bytes of a body; `undefined` when it is larger. */
export async function readCapped(response: Response, limit: number): Promise<string | undefined> {
  const text = await readTextUpTo(response.body, limit);
  return text === TOO_LARGE ? undefined : text;
}

export async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => undefined);
}

/** GETs a metadata document without any credential and records what came back. */
export async function probeDocument(prober: Prober, url: string): Promise<DocumentProbe> {
  const probe: DocumentProbe = { url };
  const { response, error } = await prober.send(url, {
    headers: { accept: "application/json" },
    credential: "none",
  });
  if (!response) {
    probe.transportError = error ?? "request failed";
    return probe;
  }
  probe.status = response.status;
  const contentType = response.headers.get("content-type");
  if (contentType) probe.contentType = contentType;
  const location = response.headers.get("location");
  if (location && response.status >= 300 && response.status < 400) probe.location = location;
  if (response.status !== 200) {
    await discard(response);
    return probe;
  }
  let text: string | undefined;
  try {
    text = await readCapped(response, MAX_DOCUMENT_BYTES);
  } catch (cause) {
    probe.bodyError = `body could not be read: ${describeTransportError(cause)}`;
    return probe;
  }
  if (text === undefined) {
    probe.bodyError = `body is larger than ${MAX_DOCUMENT_BYTES} bytes`;
    return probe;
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    probe.bodyError = "body is not JSON";
    return probe;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    probe.bodyError = "body is not a JSON object";
    return probe;
  }
  probe.json = body as Record<string, unknown>;
  return probe;
}

function schemaIssues(
  schema: typeof ProtectedResourceMetadataSchema | typeof AuthorizationServerMetadataSchema,
  json: Record<string, unknown> | undefined,
): string[] | undefined {
  if (!json) return undefined;
  const result = schema.safeParse(json);
  if (result.success) return undefined;
  return [...new Set(result.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`))];
}

/**
 * How the resource is called. `get` is the plain request the spec's endpoint table shows; `mcp` is
 * the first request of an MCP client over Streamable HTTP (a JSON-RPC `initialize` POST), for
 * servers that answer GET with 404 or 405.
 */
export type RequestForm = "get" | "mcp";

const MCP_INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: "2025-11-25",
    capabilities: {},
    clientInfo: { name: "gatehouse-check", version: "1" },
  },
});

/** The method, body and headers of a call to the resource in the given form (shared with --login). */
export function requestInit(form: RequestForm): {
  method: "GET" | "POST";
  body?: string;
  headers: Record<string, string>;
} {
  if (form === "get") return { method: "GET", headers: {} };
  return {
    method: "POST",
    body: MCP_INITIALIZE,
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  };
}

/**
 * Step 1 of the flow: the request without a token. The challenge header is parsed with the shared
 * RFC 9110 §11.6.1 parser; an unparsable header yields no challenges.
 */
export async function probeUnauthenticated(
  prober: Prober,
  resourceUrl: string,
  form: RequestForm = "get",
): Promise<ResponseProbe> {
  return probeResource(prober, resourceUrl, form, {}, "none");
}

async function probeResource(
  prober: Prober,
  url: string,
  form: RequestForm,
  headers: Record<string, string>,
  credential: CredentialKind,
  logUrl?: string,
): Promise<ResponseProbe> {
  const probe: ResponseProbe = { url: logUrl ?? url, form };
  const init = requestInit(form);
  const { response, error } = await prober.send(url, {
    method: init.method,
    ...(init.body !== undefined && { body: init.body }),
    headers: { ...init.headers, ...headers },
    credential,
    ...(logUrl !== undefined && { logUrl }),
  });
  if (!response) {
    probe.transportError = error ?? "request failed";
    return probe;
  }
  probe.status = response.status;
  const header = response.headers.get("www-authenticate");
  probe.wwwAuthenticate = header;
  probe.challenges = header ? parseWWWAuthenticate(header) : [];
  const location = response.headers.get("location");
  if (location) probe.location = location;
  await discard(response);
  return probe;
}

/** A value that is obviously not a token any server issued. Never logged. */
function bogusToken(): string {
  return `gatehouse-check-bogus-${randomBytes(16).toString("hex")}`;
}

/**
 * RFC 6750 §3.1 / spec "Token validation" 5: an invalid token gets 401 `invalid_token`. The bogus
 * token goes to the resource URL only.
 */
export async function probeBogusBearer(
  prober: Prober,
  resourceUrl: string,
  form: RequestForm = "get",
): Promise<ResponseProbe> {
  return probeResource(
    prober,
    resourceUrl,
    form,
    { authorization: `Bearer ${bogusToken()}` },
    "bogus-bearer",
  );
}

/**
 * Spec "Access token usage" 2 (OAuth 2.1 §5.2): a token in the query string must not be accepted.
 * The bogus token goes to the resource URL only; the log shows the URL with the value masked.
 */
export async function probeBogusQuery(
  prober: Prober,
  resourceUrl: string,
  form: RequestForm = "get",
): Promise<ResponseProbe> {
  const url = new URL(resourceUrl);
  url.searchParams.append("access_token", bogusToken());
  const masked = new URL(resourceUrl);
  masked.searchParams.append("access_token", "BOGUS");
  return probeResource(prober, url.href, form, {}, "bogus-query", masked.href);
}

/**
 * Every PRM location (spec "Protected resource metadata discovery"): the `resource_metadata` URL of
 * the challenge (when there is one), the path-specific well-known URL (not for a resource at the
 * root), and the root well-known URL. Each is fetched and reported, whatever the others gave.
 */
export async function probeProtectedResourceMetadata(
  prober: Prober,
  resourceUrl: string,
  resourceMetadataUrl: string | undefined,
): Promise<PrmProbe[]> {
  const wellKnown = protectedResourceMetadataUrls(resourceUrl);
  const candidates: Array<{ url: string; source: PrmProbe["source"] }> = [];
  if (resourceMetadataUrl !== undefined)
    candidates.push({ url: resourceMetadataUrl, source: "resource_metadata" });
  if (wellKnown.length === 2) candidates.push({ url: wellKnown[0]!, source: "path-specific" });
  candidates.push({ url: wellKnown[wellKnown.length - 1]!, source: "root" });
  const probes: PrmProbe[] = [];
  for (const candidate of candidates) {
    if (!isHttpUrl(candidate.url)) {
      probes.push({
        url: candidate.url,
        source: candidate.source,
        transportError: "not an absolute http(s) URL",
      });
      continue;
    }
    const doc = await probeDocument(prober, candidate.url);
    const issues = schemaIssues(ProtectedResourceMetadataSchema, doc.json);
    probes.push({ ...doc, source: candidate.source, ...(issues && { schemaIssues: issues }) });
  }
  return probes;
}

/** True when the probe gave a document a client can use. */
export function usable(probe: DocumentProbe & { schemaIssues?: string[] }): boolean {
  return probe.status === 200 && probe.json !== undefined && probe.schemaIssues === undefined;
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:";
  } catch {
    return false;
  }
}

function formsFor(issuer: string): AsForm[] {
  const path = new URL(issuer).pathname.replace(/\/+$/, "");
  return path ? ["rfc8414", "oidc-inserted", "oidc-appended"] : ["rfc8414", "oidc"];
}

/**
 * Authorization server metadata under every discovery form (spec "Authorization server metadata
 * discovery"; RFC 8414 §3.1, OpenID Connect Discovery 1.0 §4). No credentials are sent.
 */
export async function probeAuthorizationServer(
  prober: Prober,
  issuer: string,
): Promise<AuthorizationServerProbe> {
  if (!isHttpUrl(issuer)) return { issuer, invalid: "not an absolute http(s) URL", forms: [] };
  const parsed = new URL(issuer);
  if (parsed.search || parsed.hash) {
    // RFC 8414 §2: the issuer has no query or fragment component.
    return { issuer, invalid: "an issuer identifier has no query or fragment (RFC 8414 §2)", forms: [] };
  }
  const urls = authorizationServerMetadataUrls(issuer);
  const forms = formsFor(issuer);
  const probes: AsMetadataProbe[] = [];
  for (const [index, url] of urls.entries()) {
    const doc = await probeDocument(prober, url);
    const issues = schemaIssues(AuthorizationServerMetadataSchema, doc.json);
    probes.push({ ...doc, form: forms[index]!, ...(issues && { schemaIssues: issues }) });
  }
  return { issuer, forms: probes };
}
