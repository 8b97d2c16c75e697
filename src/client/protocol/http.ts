/**
 * Outbound HTTP for the client's own requests (metadata, registration, token endpoint): URL checks,
 * JSON reading under the document's size cap, and the options oauth4webapi needs (whose fetch
 * reads every body under the cap too; see response-limits.ts). These requests always go through
 * the caller's *underlying* fetch, never through the wrapped one.
 */
import * as oauth from "oauth4webapi";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import { AuthorizationFlowError } from "../errors.js";
import { cappedResponse, type RemoteDocument, readCappedBody } from "./response-limits.js";

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/**
 * Spec "Token theft and communication security" 3: authorization server endpoints MUST be served
 * over HTTPS. Plain http is accepted only for loopback hosts, where no network attacker sits
 * between client and server (local development and tests). Anything else is refused.
 */
export function assertSecureUrl(value: string, step: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new AuthorizationFlowError("insecure_url", "the URL is not a valid absolute URL", {
      kind: "nonconforming",
      step,
      cause,
    });
  }
  if (url.protocol === "https:") return url;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return url;
  throw new AuthorizationFlowError(
    "insecure_url",
    `refusing ${url.protocol.replace(":", "")} URL for host ${url.hostname}: https is required (http only on loopback)`,
    { kind: "refused", step },
  );
}

/** True when oauth4webapi must be told that plain http is acceptable for this URL (loopback only). */
export function isLoopbackHttp(value: string | URL): boolean {
  const url = typeof value === "string" ? new URL(value) : value;
  return url.protocol === "http:" && isLoopbackHost(url.hostname);
}

/**
 * Options for every oauth4webapi call: our fetch, and http permitted only where loopback. The
 * fetch hands oauth4webapi a copy of each response whose body was read under the cap of
 * `document` (oauth4webapi reads bodies itself, so the cap must apply before it does).
 */
export function wireOptions(
  fetchImpl: FetchLike,
  urls: Array<string | undefined>,
  document: RemoteDocument,
  step: string,
): Record<symbol, unknown> {
  const insecure = urls.some((u) => u !== undefined && isLoopbackHttp(u));
  return {
    [oauth.customFetch]: async (url: string, init: RequestInit) =>
      cappedResponse(await fetchImpl(url, init), document, url, step),
    [oauth.allowInsecureRequests]: insecure,
  };
}

/** Sends a request, turning a network failure into a `transport_failed` error naming the step. */
export async function send(
  fetchImpl: FetchLike,
  url: string,
  init: RequestInit,
  step: string,
): Promise<Response> {
  try {
    return await fetchImpl(url, { ...init, redirect: "manual" });
  } catch (cause) {
    throw new AuthorizationFlowError("transport_failed", `could not reach ${new URL(url).origin}`, {
      kind: "transport",
      step,
      cause,
      url,
    });
  }
}

/**
 * Reads a JSON object body: the `document` fetched from `url`, under its cap (`response_too_large`
 * past it). Throws `invalid_document` if it is not a JSON object.
 */
export async function readJsonObject(
  response: Response,
  step: string,
  document: RemoteDocument,
  url: string,
): Promise<Record<string, unknown>> {
  const bytes = await readCappedBody(response, document, url, step);
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new AuthorizationFlowError("invalid_document", "response body is not JSON", {
      kind: "nonconforming",
      step,
      status: response.status,
      cause,
    });
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new AuthorizationFlowError("invalid_document", "response body is not a JSON object", {
      kind: "nonconforming",
      step,
      status: response.status,
    });
  }
  return body as Record<string, unknown>;
}

/** Drops the body of a response we do not use, so the connection can be reused. */
export async function discard(response: Response): Promise<void> {
  try {
    await response.body?.cancel();
  } catch {
    // nothing to release
  }
}
