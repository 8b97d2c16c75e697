/**
 * `gatehouse check`: an auditor for a deployed protected resource and its authorization server.
 * It walks the discovery path the spec describes (401 challenge → protected resource metadata →
 * authorization server metadata), records every discovery form rather than stopping at the first
 * success, and reports rule by rule what holds.
 *
 * What it sends: metadata requests without credentials; two deliberately bogus tokens (one in the
 * Authorization header, one in the query string) to the resource URL only. The authorization server
 * gets metadata requests and one (at most two) anonymous authorization requests for an unknown
 * client (resource-parameter.ts), unless `login` is given: then this package's client runs the flow
 * and sends what a client sends (login.ts). Redirects are never followed.
 */
import type { FetchLike } from "../client/protocol/http.js";
import { GatehouseTypeError } from "../shared/errors.js";
import { DEFAULT_REVISION } from "../shared/revision.js";
import { findChallenge } from "../shared/www-authenticate.js";
import { type LoginOptions, probeLogin } from "./login.js";
import { probeMachineRegistration } from "./machine-registration.js";
import { type OperationsOptions, probeOperations } from "./operations.js";
import {
  MAX_AUTHORIZATION_SERVERS,
  Prober,
  probeAuthorizationServer,
  probeBogusBearer,
  probeBogusQuery,
  probeProtectedResourceMetadata,
  probeUnauthenticated,
  type RequestForm,
  usable,
} from "./probes.js";
import { probeResourceParameter } from "./resource-parameter.js";
import { evaluateRules, RULES } from "./rules.js";
import type { CheckReport, Observations, Outcome, ResponseProbe, Revision } from "./types.js";

export type { LoginOptions } from "./login.js";
export type { OperationsObservation, OperationsOptions } from "./operations.js";
export { formatHuman, formatJson } from "./report.js";
export { evaluateRules, RULES, type Rule, type Verdict } from "./rules.js";
export type * from "./types.js";

export interface CheckOptions {
  /** The fetch used for every request (default: the global one). */
  fetch?: FetchLike;
  /** Deadline per request in ms (default 10 000). */
  timeoutMs?: number;
  /** Which revision's rules apply (default `2026-07-28`). */
  revision?: Revision;
  /**
   * How the resource is called: `get`; `mcp` (a JSON-RPC `initialize` POST, as an MCP client's
   * first request); or `auto` (default): GET, then the MCP request when GET gets 404, 405 or 406.
   */
  request?: "get" | "mcp" | "auto";
  /** Run the whole flow with this package's client (see login.ts). Off by default. */
  login?: LoginOptions;
  /** Call the tools with this token holding few scopes and judge each refusal (see operations.ts). */
  operations?: OperationsOptions;
}

/**
 * Validates the URL given to the auditor: an absolute http(s) URL without a fragment (spec
 * "Canonical server URI" 2). Throws `GatehouseTypeError` `ERR_INVALID_URL`.
 */
export function parseResourceUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new GatehouseTypeError("ERR_INVALID_URL", "the resource URL is not an absolute URL", { cause });
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new GatehouseTypeError("ERR_INVALID_URL", "the resource URL must use https (or http)");
  }
  if (value.includes("#")) {
    throw new GatehouseTypeError("ERR_INVALID_URL", "the resource URL must not contain a fragment");
  }
  if (url.username || url.password) {
    throw new GatehouseTypeError("ERR_INVALID_URL", "the resource URL must not contain userinfo");
  }
  return url;
}

/**
 * Probes `resourceUrl` and its authorization servers, then evaluates {@link RULES}. Never throws for
 * what the servers do (an unreachable server is a failed rule); throws `GatehouseTypeError` for an
 * invalid URL.
 */
export async function runCheck(resourceUrl: string, options: CheckOptions = {}): Promise<CheckReport> {
  parseResourceUrl(resourceUrl);
  const revision = options.revision ?? DEFAULT_REVISION;
  const startedAt = new Date().toISOString();
  const prober = new Prober(options.fetch ?? globalThis.fetch, options.timeoutMs ?? 10_000);

  const mode = options.request ?? "auto";
  let form: RequestForm = mode === "mcp" ? "mcp" : "get";
  let unauthenticated = await probeUnauthenticated(prober, resourceUrl, form);
  let getAnswer: ResponseProbe | undefined;
  if (mode === "auto" && [404, 405, 406].includes(unauthenticated.status ?? 0)) {
    // Streamable HTTP MCP servers may serve only POST: call it the way an MCP client first does.
    const viaMcp = await probeUnauthenticated(prober, resourceUrl, "mcp");
    if (viaMcp.status === 401 || (viaMcp.status !== undefined && viaMcp.status < 300)) {
      getAnswer = unauthenticated;
      unauthenticated = viaMcp;
      form = "mcp";
    }
  }
  const bearer = unauthenticated.challenges ? findChallenge(unauthenticated.challenges, "Bearer") : undefined;
  const prm = await probeProtectedResourceMetadata(prober, resourceUrl, bearer?.params.resource_metadata);
  // The document a client following the spec would read first (challenge URL, path-specific, root).
  const selectedPrm = prm.find((p) => usable(p));

  const observations: Observations = {
    resourceUrl,
    revision,
    unauthenticated,
    prm,
    authorizationServers: [],
  };
  if (getAnswer) observations.getAnswer = getAnswer;
  if (selectedPrm) observations.selectedPrm = selectedPrm;

  const issuers = selectedPrm ? (selectedPrm.json!.authorization_servers as string[]) : [];
  for (const issuer of issuers.slice(0, MAX_AUTHORIZATION_SERVERS)) {
    observations.authorizationServers.push(await probeAuthorizationServer(prober, issuer));
  }

  // Does the authorization server refuse `resource`? One anonymous request for an unknown client
  // (no credential, no side effect: see resource-parameter.ts), with the value a client would send.
  const prmResource = selectedPrm?.json?.resource;
  const resourceValue = typeof prmResource === "string" ? prmResource : resourceUrl;
  for (const server of observations.authorizationServers) {
    const endpoint = server.forms.find((f) => usable(f))?.json?.authorization_endpoint;
    if (typeof endpoint !== "string" || !/^https?:\/\//i.test(endpoint)) continue;
    server.resourceParameter = await probeResourceParameter(prober, endpoint, resourceValue);
  }

  // May an anonymous caller register a client that mints tokens with no user? One registration
  // request, no credential; what a server accepts is deleted where it allows (machine-registration.ts).
  for (const server of observations.authorizationServers) {
    const endpoint = server.forms.find((f) => usable(f))?.json?.registration_endpoint;
    if (typeof endpoint !== "string" || !/^https?:\/\//i.test(endpoint)) continue;
    server.machineRegistration = await probeMachineRegistration(prober, endpoint);
  }

  // Bogus tokens: to the resource URL only.
  observations.bogusBearer = await probeBogusBearer(prober, resourceUrl, form);
  observations.bogusQuery = await probeBogusQuery(prober, resourceUrl, form);

  if (options.login) {
    observations.login = await probeLogin({
      resourceUrl,
      form,
      revision,
      fetch: options.fetch ?? globalThis.fetch,
      exchanges: prober.exchanges,
      login: options.login,
    });
  }

  if (options.operations) {
    observations.operations = await probeOperations(prober, resourceUrl, options.operations);
  }

  return buildReport(observations, prober, startedAt);
}

/** Evaluates the rules over `observations` and assembles the report. */
export function buildReport(
  observations: Observations,
  prober: { exchanges: CheckReport["exchanges"] },
  startedAt: string,
): CheckReport {
  const findings = evaluateRules(observations, RULES);
  const summary: Record<Outcome, number> = { pass: 0, fail: 0, warn: 0, info: 0, skip: 0 };
  for (const f of findings) summary[f.outcome]++;
  return {
    resource: observations.resourceUrl,
    revision: observations.revision,
    startedAt,
    ok: !findings.some((f) => f.level === "MUST" && f.outcome === "fail"),
    summary,
    findings,
    exchanges: prober.exchanges,
    observations,
  };
}
