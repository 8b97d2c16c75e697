/**
 * Small pure helpers the rules share: the transport classifier and the PRM `resource` comparison.
 */
import { resourceMatchesServer } from "../client/protocol/discovery.js";
import { canonicalResourceUri, isLoopbackHost } from "../shared/resource-uri.js";

/**
 * How a URL is reached (spec "Token theft and communication security" 3: authorization server
 * endpoints MUST be HTTPS). Plain http is tolerated only on loopback hosts, where no network
 * attacker sits in between (local development), and reported with a warning.
 */
export type TransportClass = "https" | "loopback-http" | "insecure" | "invalid";

export function classifyTransport(value: string): TransportClass {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "invalid";
  }
  if (url.protocol === "https:") return "https";
  if (url.protocol === "http:") return isLoopbackHost(url.hostname) ? "loopback-http" : "insecure";
  return "insecure";
}

/**
 * How the PRM `resource` relates to the URL the auditor called (RFC 9728 §3.3):
 * - `exact`: identical strings (what RFC 9728 §3.3 requires);
 * - `canonical`: identical once the called URL is put in canonical form (lowercase scheme and host,
 *   no trailing slash; spec "Canonical server URI");
 * - `prefix`: same origin and a parent path on a segment boundary, which MCP clients accept (the
 *   relaxation proposed by draft-mcguinness-oauth-rfc9728bis) but RFC 9728 §3.3 does not;
 * - `mismatch`: anything else; a client MUST NOT use the document.
 */
export type ResourceMatch = "exact" | "canonical" | "prefix" | "mismatch";

export function compareResource(prmResource: string, calledUrl: string): ResourceMatch {
  if (prmResource === calledUrl) return "exact";
  try {
    if (prmResource === canonicalResourceUri(calledUrl)) return "canonical";
  } catch {
    // the called URL is not a valid resource URI: fall through to the looser checks
  }
  return resourceMatchesServer(prmResource, calledUrl) ? "prefix" : "mismatch";
}
