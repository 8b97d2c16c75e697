/**
 * The anonymous authorization-request probe behind `as.resource-parameter`: does the authorization
 * server refuse the RFC 8707 `resource` parameter that spec-following clients MUST send (spec
 * "Resource parameter")? Microsoft Entra ID's v2.0 endpoints are the common case (AADSTS901002,
 * "The 'resource' request parameter is not supported").
 *
 * Why this has no side effects: the request is a plain GET, carries no credential, and names a
 * client no server knows (`gatehouse-check-probe`, deliberately not a URL, so a server supporting
 * Client ID Metadata Documents fetches nothing). OAuth 2.1 §4.1.2.1 forbids redirecting such a
 * request to its redirect_uri, so the answer is an error page; nothing is registered, granted or
 * logged in. Redirects are not followed (the redirect_uri is on loopback port 9 anyway).
 *
 * A server that judges the client before `resource` answers "unknown client" and the probe is
 * inconclusive: then only `--login` tells. To keep a page that mentions `invalid_target` for other
 * reasons (an error-code table in a script bundle) from failing a MUST rule, a refusal is confirmed
 * by a second request without `resource`: if that answer carries the same evidence, the parameter
 * is not what the server objects to.
 */
import { randomBytes } from "node:crypto";
import { discard, type Prober, readCapped } from "./probes.js";
import type { AuthorizationRequestProbe, ResourceParameterProbe } from "./types.js";

/** The client_id of the probe: unknown everywhere, and not a URL a CIMD server would fetch. */
const PROBE_CLIENT_ID = "gatehouse-check-probe";

/** Where the probe's (never honoured) redirect would go: loopback, the discard port. */
const PROBE_REDIRECT_URI = "http://127.0.0.1:9/callback";

/** Error pages larger than this are read only this far. */
const MAX_PAGE_BYTES = 64 * 1024;

/** How much of the server's wording the report quotes. */
const MAX_EVIDENCE_CHARS = 160;

/**
 * What in a server's answer says it refuses `resource`: the RFC 8707 §2 error code `invalid_target`,
 * or wording naming the `resource` parameter ("The 'resource' request parameter is not supported").
 * Undefined when the text names neither.
 */
export function resourceRefusalIn(text: string): string | undefined {
  // Quotes as an HTML page (&#39;) or a JSON error body (\") write them.
  const decoded = text.replace(/&#0*39;|&#x0*27;|&apos;/gi, "'").replace(/&quot;|&#0*34;|\\"/gi, '"');
  const code = /\binvalid_target\b/.exec(decoded);
  if (code) return "invalid_target";
  const wording = /['"`‘’]?\bresource\b['"`‘’]?\s+(?:request\s+)?parameter[^.<>\r\n"]{0,100}/i.exec(decoded);
  return wording ? wording[0].slice(0, MAX_EVIDENCE_CHARS).trim() : undefined;
}

function authorizationRequestUrl(endpoint: string, resource: string | undefined): URL {
  const url = new URL(endpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", PROBE_CLIENT_ID);
  url.searchParams.set("redirect_uri", PROBE_REDIRECT_URI);
  // PKCE and state as a client sends them (random, unused: no code can ever be issued).
  url.searchParams.set("code_challenge", randomBytes(32).toString("base64url"));
  url.searchParams.set("code_challenge_method", "S256");
  url.searchParams.set("state", randomBytes(16).toString("base64url"));
  if (resource !== undefined) url.searchParams.set("resource", resource);
  return url;
}

/** The error and error_description a redirect carries (query or fragment response mode). */
function redirectErrorText(location: string, base: string): string {
  try {
    const url = new URL(location, base);
    const fragment = new URLSearchParams(url.hash.slice(1));
    return ["error", "error_description"]
      .flatMap((k) => [url.searchParams.get(k), fragment.get(k)])
      .filter((v): v is string => v !== null)
      .join(" ");
  } catch {
    return "";
  }
}

async function sendAuthorizationRequest(
  prober: Prober,
  endpoint: string,
  resource: string | undefined,
): Promise<AuthorizationRequestProbe> {
  const url = authorizationRequestUrl(endpoint, resource).href;
  const probe: AuthorizationRequestProbe = { url, withResource: resource !== undefined };
  const { response, error } = await prober.send(url, {
    headers: { accept: "text/html" },
    credential: "none",
  });
  if (!response) {
    probe.transportError = error ?? "request failed";
    return probe;
  }
  probe.status = response.status;
  const location = response.headers.get("location");
  let text = "";
  if (location && response.status >= 300 && response.status < 400) {
    probe.location = location;
    text = redirectErrorText(location, url);
    await discard(response);
  } else {
    // Bounded read (SECURITY.md: bounded reads of anything remote); an oversized page is judged
    // on nothing rather than on a prefix.
    text = (await readCapped(response, MAX_PAGE_BYTES).catch(() => undefined)) ?? "";
  }
  const refusal = resourceRefusalIn(text);
  if (refusal) probe.resourceRefusal = refusal;
  return probe;
}

/**
 * Sends the anonymous authorization request with `resource` and, only when its answer names a
 * refusal, the same request without it as a control.
 */
export async function probeResourceParameter(
  prober: Prober,
  authorizationEndpoint: string,
  resource: string,
): Promise<ResourceParameterProbe> {
  const withResource = await sendAuthorizationRequest(prober, authorizationEndpoint, resource);
  const result: ResourceParameterProbe = { authorizationEndpoint, resource, withResource };
  if (withResource.resourceRefusal) {
    result.withoutResource = await sendAuthorizationRequest(prober, authorizationEndpoint, undefined);
  }
  return result;
}
