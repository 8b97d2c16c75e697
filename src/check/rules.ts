/**
 * The auditor's rule table. Each rule names the spec rule it checks (the project spec's section and
 * the RFC section behind it), its RFC 2119 level, and a pure check over what the probes observed.
 * A rule yields one verdict, or one per subject (per PRM location, per authorization server, per
 * metadata URL). Only MUST rules can `fail`; a SHOULD that is not met is a `warn`.
 */
import { findChallenge } from "../shared/www-authenticate.js";
import { classifyTransport, compareResource } from "./classify.js";
import { usable } from "./probes.js";
import type {
  AuthorizationServerProbe,
  Group,
  Level,
  Observations,
  Outcome,
  PrmProbe,
  ResponseProbe,
  Revision,
} from "./types.js";

export interface Verdict {
  outcome: Outcome;
  message: string;
  subject?: string;
}

export interface Rule {
  id: string;
  group: Group;
  level: Level;
  /** Where the requirement comes from: the spec section and the RFC section. */
  spec: string;
  title: string;
  /** Revisions the rule applies to (default: both). */
  revisions?: readonly Revision[];
  check(observations: Observations): Verdict | Verdict[];
}

const pass = (message: string, subject?: string): Verdict => ({ outcome: "pass", message, subject });
const fail = (message: string, subject?: string): Verdict => ({ outcome: "fail", message, subject });
const warn = (message: string, subject?: string): Verdict => ({ outcome: "warn", message, subject });
const info = (message: string, subject?: string): Verdict => ({ outcome: "info", message, subject });
const skip = (message: string, subject?: string): Verdict => ({ outcome: "skip", message, subject });

function describeResponse(probe: { status?: number; transportError?: string; location?: string }): string {
  if (probe.transportError) return `request failed: ${probe.transportError}`;
  if (probe.location && probe.status !== undefined && probe.status >= 300 && probe.status < 400) {
    return `${probe.status} redirect to ${probe.location} (not followed)`;
  }
  return `HTTP ${probe.status}`;
}

function bearerChallenge(probe: ResponseProbe | undefined) {
  return probe?.challenges ? findChallenge(probe.challenges, "Bearer") : undefined;
}

function unauthenticated401(o: Observations): boolean {
  return o.unauthenticated.status === 401;
}

function splitScope(value: string | undefined): string[] {
  return value ? value.split(" ").filter((s) => s !== "") : [];
}

function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : undefined;
}

/** Probes once per URL (the challenge's URL is often one of the well-known ones). */
function uniqueByUrl<T extends { url: string }>(probes: T[]): T[] {
  const seen = new Set<string>();
  return probes.filter((p) => !seen.has(p.url) && seen.add(p.url));
}

/** PRM documents that answered 200 with a JSON object, once per URL. */
function servedPrm(o: Observations): PrmProbe[] {
  return uniqueByUrl(o.prm.filter((p) => p.status === 200 && p.json !== undefined));
}

interface ServedAsDocument {
  server: AuthorizationServerProbe;
  json: Record<string, unknown>;
  urls: string[];
}

/**
 * Valid AS metadata documents. Identical documents served under several forms of one server are
 * checked once, with every URL named in the subject.
 */
function servedAsMetadata(o: Observations): ServedAsDocument[] {
  return o.authorizationServers.flatMap((server) => {
    const byBody = new Map<string, ServedAsDocument>();
    for (const form of server.forms.filter((f) => usable(f))) {
      const key = JSON.stringify(form.json);
      const entry = byBody.get(key);
      if (entry) entry.urls.push(form.url);
      else byBody.set(key, { server, json: form.json!, urls: [form.url] });
    }
    return [...byBody.values()];
  });
}

function perAsDocument(
  o: Observations,
  what: string,
  check: (json: Record<string, unknown>, server: AuthorizationServerProbe) => Verdict,
): Verdict[] {
  const docs = servedAsMetadata(o);
  if (docs.length === 0) return [skip(`no authorization server metadata to check ${what} in`)];
  return docs.map(({ server, json, urls }) => ({ ...check(json, server), subject: urls.join(" and ") }));
}

/** RFC 8414 §3.2 / RFC 9728 §3.2: `application/json`, parameters (charset) allowed. */
function contentTypeVerdict(probe: { url: string; contentType?: string }): Verdict {
  const type = probe.contentType?.split(";")[0]?.trim().toLowerCase();
  return type === "application/json"
    ? pass(probe.contentType!, probe.url)
    : fail(`content type ${probe.contentType ?? "(none)"}`, probe.url);
}

/** The endpoints whose scheme the transport rule inspects. */
function endpointFields(json: Record<string, unknown>): Array<[string, string]> {
  return Object.entries(json).filter(
    (entry): entry is [string, string] =>
      typeof entry[1] === "string" && (entry[0].endsWith("_endpoint") || entry[0] === "jwks_uri"),
  );
}

export const RULES: readonly Rule[] = [
  // ── Transport ──────────────────────────────────────────────────────────────────────────────
  {
    id: "transport.resource-https",
    group: "transport",
    level: "MUST",
    spec: "RFC 9728 §1.2 (resource identifier uses https); RFC 6750 §5.3",
    title: "The protected resource is served over HTTPS",
    check(o) {
      switch (classifyTransport(o.resourceUrl)) {
        case "https":
          return pass("https");
        case "loopback-http":
          return warn("plain http, accepted only because the host is loopback (development)");
        default:
          return fail("plain http on a non-loopback host: bearer tokens would travel in clear text");
      }
    },
  },

  // ── 401 challenge ──────────────────────────────────────────────────────────────────────────
  {
    id: "challenge.status-401",
    group: "challenge",
    level: "MUST",
    spec: 'Spec "Authorization flow" 1 and "Other error conditions"; "Token validation" 6; RFC 6750 §3',
    title: "A request without a token gets 401",
    check(o) {
      const u = o.unauthenticated;
      const via = o.getAnswer ? ` (to an MCP initialize POST; GET got ${o.getAnswer.status})` : "";
      if (u.status === 401) return pass(`401 Unauthorized${via}`);
      if (u.status !== undefined && u.status >= 200 && u.status < 300) {
        return fail(
          `${u.status}${via}: the resource answered without a token (it MUST return no data to unauthorized parties)`,
        );
      }
      return fail(`${describeResponse(u)} instead of 401${via}`);
    },
  },
  {
    id: "challenge.www-authenticate",
    group: "challenge",
    level: "MUST",
    spec: "RFC 9110 §11.6.1 and §15.5.2 (a 401 carries WWW-Authenticate); RFC 6750 §3",
    title: "The 401 carries a parsable WWW-Authenticate: Bearer challenge",
    check(o) {
      if (!unauthenticated401(o)) return skip("no 401 to inspect");
      const header = o.unauthenticated.wwwAuthenticate;
      if (!header) return fail("the 401 has no WWW-Authenticate header");
      if (!o.unauthenticated.challenges?.length)
        return fail("WWW-Authenticate is not parsable (RFC 9110 §11.6.1)");
      if (!bearerChallenge(o.unauthenticated)) {
        const schemes = o.unauthenticated.challenges.map((c) => c.scheme).join(", ");
        return fail(`no Bearer challenge (schemes offered: ${schemes})`);
      }
      return pass("Bearer challenge present and parsable");
    },
  },
  {
    id: "challenge.resource-metadata",
    group: "challenge",
    level: "SHOULD",
    spec: 'Spec "Other error conditions" and "Protected resource metadata discovery" 1(a); RFC 9728 §5.1',
    title: "The challenge names the PRM with resource_metadata",
    check(o) {
      const challenge = bearerChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer challenge");
      const value = challenge.params.resource_metadata;
      if (value === undefined)
        return warn("no resource_metadata parameter: clients must guess the well-known URLs");
      if (classifyTransport(value) === "invalid")
        return warn(`resource_metadata is not an absolute URL: ${value}`);
      return pass(value);
    },
  },
  {
    id: "challenge.scope",
    group: "challenge",
    level: "SHOULD",
    spec: 'Spec "Scope selection (client)" 3 and "Other error conditions"; RFC 6750 §3',
    title: "The challenge states the scopes needed",
    check(o) {
      const challenge = bearerChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer challenge");
      const scope = challenge.params.scope;
      return scope === undefined ? warn("no scope parameter") : pass(`scope="${scope}"`);
    },
  },
  {
    id: "challenge.no-error-without-token",
    group: "challenge",
    level: "SHOULD",
    spec: "RFC 6750 §3.1 (no error code when the request has no authentication)",
    title: "No error code in the challenge to a request without a token",
    check(o) {
      const challenge = bearerChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer challenge");
      const error = challenge.params.error;
      return error === undefined
        ? pass("no error parameter")
        : warn(`error="${error}" on a request that carried no token`);
    },
  },
  {
    id: "challenge.no-offline-access",
    group: "challenge",
    level: "SHOULD",
    revisions: ["2026-07-28"],
    spec: 'Spec "Refresh tokens (2026-07-28)": resource server SHOULD NOT put offline_access in the challenge',
    title: "The challenge scope does not contain offline_access",
    check(o) {
      const challenge = bearerChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer challenge");
      return splitScope(challenge.params.scope).includes("offline_access")
        ? warn("scope contains offline_access; refresh is the client's and authorization server's business")
        : pass("no offline_access");
    },
  },

  // ── Protected resource metadata ────────────────────────────────────────────────────────────
  {
    id: "prm.resource-metadata-url",
    group: "prm",
    level: "MUST",
    spec: 'Spec "Protected resource metadata discovery" 2 (clients MUST use the challenge URL); RFC 9728 §5.1',
    title: "The resource_metadata URL serves the metadata",
    check(o) {
      const probe = o.prm.find((p) => p.source === "resource_metadata");
      if (!probe) return skip("the challenge names no resource_metadata URL");
      if (usable(probe)) return pass("served", probe.url);
      if (probe.status === 200) return fail("served, but not a valid document (see prm.valid)", probe.url);
      return fail(`${describeResponse(probe)}: clients MUST use this URL and will stop here`, probe.url);
    },
  },
  {
    id: "prm.path-specific",
    group: "prm",
    level: "MAY",
    spec: 'Spec "Protected resource metadata discovery" 1(b); RFC 9728 §3.1',
    title: "PRM at the path-specific well-known URL",
    check(o) {
      const probe = o.prm.find((p) => p.source === "path-specific");
      if (!probe) return skip("the resource is at the root: the path-specific form does not apply");
      return usable(probe)
        ? pass("served", probe.url)
        : info(`not served (${describeResponse(probe)})`, probe.url);
    },
  },
  {
    id: "prm.root",
    group: "prm",
    level: "MAY",
    spec: 'Spec "Protected resource metadata discovery" 1(b); RFC 9728 §3',
    title: "PRM at the root well-known URL",
    check(o) {
      const probe = o.prm.find((p) => p.source === "root");
      if (!probe) return skip("not probed");
      return usable(probe)
        ? pass("served", probe.url)
        : info(`not served (${describeResponse(probe)})`, probe.url);
    },
  },
  {
    id: "prm.discoverable",
    group: "prm",
    level: "MUST",
    spec: 'Spec "Overview rules" 4 and "Protected resource metadata discovery" 1; RFC 9728 §3, §5',
    title: "Protected resource metadata can be discovered",
    check(o) {
      const selected = o.selectedPrm;
      if (selected) return pass(`a client following the spec reads ${selected.url}`);
      return fail("no location serves a valid protected resource metadata document");
    },
  },
  {
    id: "prm.valid",
    group: "prm",
    level: "MUST",
    spec: "RFC 9728 §2 (resource REQUIRED; field types) and §3.2 (a JSON object)",
    title: "Each PRM document served is a valid JSON object",
    check(o) {
      const served = uniqueByUrl(o.prm.filter((p) => p.status === 200));
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => {
        if (p.bodyError) return fail(p.bodyError, p.url);
        const issues = (p.schemaIssues ?? []).filter((i) => !i.startsWith("authorization_servers"));
        if (issues.length) return fail(`fields do not conform: ${issues.join("; ")}`, p.url);
        return pass("JSON object with the required fields", p.url);
      });
    },
  },
  {
    id: "prm.content-type",
    group: "prm",
    level: "MUST",
    spec: "RFC 9728 §3.2 (a successful response uses the application/json content type)",
    title: "PRM documents are served as application/json",
    check(o) {
      const served = uniqueByUrl(o.prm.filter((p) => p.status === 200));
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => contentTypeVerdict(p));
    },
  },
  {
    id: "prm.authorization-servers",
    group: "prm",
    level: "MUST",
    spec: 'Spec "Protected resource metadata document" (authorization_servers: at least one entry); RFC 9728 §2',
    title: "authorization_servers lists at least one authorization server",
    check(o) {
      const served = servedPrm(o);
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => {
        const list = stringArray(p.json!.authorization_servers);
        if (!list) return fail("authorization_servers is missing or not an array of strings", p.url);
        if (list.length === 0) return fail("authorization_servers is empty", p.url);
        return pass(list.join(", "), p.url);
      });
    },
  },
  {
    id: "prm.resource",
    group: "prm",
    level: "MUST",
    spec: 'RFC 9728 §3.3 (resource identical to the URL called); spec "Canonical server URI"',
    title: "PRM resource identifies the resource called",
    check(o) {
      const served = servedPrm(o);
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => {
        const resource = p.json!.resource;
        if (typeof resource !== "string") return fail("resource is missing", p.url);
        switch (compareResource(resource, o.resourceUrl)) {
          case "exact":
            return pass(`"${resource}"`, p.url);
          case "canonical":
            return pass(`"${resource}" (the canonical form of the URL called)`, p.url);
          case "prefix":
            return warn(
              `"${resource}" is a parent of the URL called, not identical to it: MCP clients accept this, a strict RFC 9728 §3.3 client does not`,
              p.url,
            );
          default:
            return fail(
              `"${resource}" does not identify ${o.resourceUrl}: clients MUST NOT use this document`,
              p.url,
            );
        }
      });
    },
  },
  {
    id: "prm.scopes-no-offline-access",
    group: "prm",
    level: "SHOULD",
    revisions: ["2026-07-28"],
    spec: 'Spec "Refresh tokens (2026-07-28)": resource server SHOULD NOT list offline_access in scopes_supported',
    title: "scopes_supported does not contain offline_access",
    check(o) {
      const served = servedPrm(o);
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => {
        const scopes = stringArray(p.json!.scopes_supported);
        if (!scopes) return info("no scopes_supported", p.url);
        return scopes.includes("offline_access")
          ? warn("scopes_supported contains offline_access", p.url)
          : pass(scopes.join(" ") || "(empty)", p.url);
      });
    },
  },
  {
    id: "prm.bearer-methods",
    group: "prm",
    level: "MUST",
    spec: 'Spec "Access token usage" 1-2 (Authorization header; never the query string); RFC 9728 §2',
    title: "bearer_methods_supported offers the header and not the query string",
    check(o) {
      const served = servedPrm(o);
      if (served.length === 0) return skip("no PRM document served");
      return served.map((p) => {
        const raw = p.json!.bearer_methods_supported;
        if (raw === undefined) return pass("not listed (the header is assumed)", p.url);
        const methods = stringArray(raw);
        if (!methods) return fail("bearer_methods_supported is not an array of strings", p.url);
        if (methods.includes("query"))
          return fail(`lists "query": tokens MUST NOT travel in the query string`, p.url);
        if (!methods.includes("header"))
          return fail(`does not list "header" (${methods.join(", ") || "empty"})`, p.url);
        return pass(methods.join(", "), p.url);
      });
    },
  },

  // ── Token handling at the resource ─────────────────────────────────────────────────────────
  {
    id: "resource.invalid-token-401",
    group: "resource",
    level: "MUST",
    spec: 'Spec "Token validation by the resource server" 5; RFC 6750 §3.1',
    title: "A bogus bearer token gets 401",
    check(o) {
      const probe = o.bogusBearer;
      if (!probe) return skip("not probed");
      if (probe.status === 401) return pass("401");
      if (probe.status !== undefined && probe.status >= 200 && probe.status < 300) {
        return fail(`${probe.status}: the resource accepted a token no authorization server issued`);
      }
      return fail(`${describeResponse(probe)} instead of 401`);
    },
  },
  {
    id: "resource.invalid-token-error",
    group: "resource",
    level: "SHOULD",
    spec: 'RFC 6750 §3.1 (error="invalid_token")',
    title: 'The 401 to a bogus token says error="invalid_token"',
    check(o) {
      const probe = o.bogusBearer;
      if (probe?.status !== 401) return skip("no 401 to inspect");
      const challenge = bearerChallenge(probe);
      if (!challenge) return warn("no parsable Bearer challenge on the 401");
      const error = challenge.params.error;
      return error === "invalid_token" ? pass('error="invalid_token"') : warn(`error=${error ?? "(none)"}`);
    },
  },
  {
    id: "resource.query-token-refused",
    group: "resource",
    level: "MUST",
    spec: 'Spec "Access token usage" 2 (never in the query string); OAuth 2.1 §5.2; "Token validation" 6',
    title: "A token in the query string is refused",
    check(o) {
      const probe = o.bogusQuery;
      if (!probe) return skip("not probed");
      const anonymous = o.unauthenticated.status;
      if (anonymous !== undefined && anonymous >= 200 && anonymous < 300) {
        return skip("the resource answers without any token, so a refusal cannot be observed");
      }
      const status = probe.status;
      if (status === 400 || status === 401 || status === 403) return pass(String(status));
      if (status !== undefined && status >= 200 && status < 300) {
        return fail(`${status}: the resource answered a request whose only credential was ?access_token=`);
      }
      return warn(`${describeResponse(probe)} (expected 400 or 401)`);
    },
  },

  // ── Authorization server metadata ──────────────────────────────────────────────────────────
  {
    id: "as.issuer-identifier",
    group: "as",
    level: "MUST",
    spec: "RFC 8414 §2 (issuer: https URL, no query or fragment); RFC 9728 §2",
    title: "Each authorization_servers entry is a valid issuer identifier",
    check(o) {
      if (o.authorizationServers.length === 0) return skip("no authorization server listed");
      return o.authorizationServers.map((s) =>
        s.invalid ? fail(s.invalid, s.issuer) : pass("absolute URL without query or fragment", s.issuer),
      );
    },
  },
  {
    id: "as.discovery-form",
    group: "as",
    level: "MAY",
    spec: 'Spec "Authorization server metadata discovery"; RFC 8414 §3.1; OpenID Connect Discovery 1.0 §4',
    title: "Metadata under each discovery form",
    check(o) {
      const forms = o.authorizationServers.flatMap((s) => s.forms);
      if (forms.length === 0) return skip("no authorization server to probe");
      return forms.map((f) =>
        usable(f)
          ? pass(`${f.form}: served`, f.url)
          : info(`${f.form}: not served (${describeResponse(f)})`, f.url),
      );
    },
  },
  {
    id: "as.metadata-found",
    group: "as",
    level: "MUST",
    spec: 'Spec "Overview rules" 5 and "Authorization server metadata discovery"; RFC 8414 §3',
    title: "Authorization server metadata is found under at least one form",
    check(o) {
      const servers = o.authorizationServers.filter((s) => !s.invalid);
      if (servers.length === 0) return skip("no authorization server to probe");
      return servers.map((s) => {
        const first = s.forms.find((f) => usable(f));
        return first
          ? pass(`a client following the spec reads ${first.url}`, s.issuer)
          : fail("no discovery form serves valid metadata", s.issuer);
      });
    },
  },
  {
    id: "as.metadata-valid",
    group: "as",
    level: "MUST",
    spec: "RFC 8414 §3.2 (a JSON object with the §2 fields)",
    title: "Each metadata document served is valid",
    check(o) {
      const served = o.authorizationServers.flatMap((s) => s.forms).filter((f) => f.status === 200);
      if (served.length === 0) return skip("no metadata document served");
      return served.map((f) => {
        if (f.bodyError) return fail(f.bodyError, f.url);
        if (f.schemaIssues) return fail(`fields do not conform: ${f.schemaIssues.join("; ")}`, f.url);
        return pass("valid", f.url);
      });
    },
  },
  {
    id: "as.content-type",
    group: "as",
    level: "MUST",
    spec: "RFC 8414 §3.2 (a successful response uses the application/json content type)",
    title: "Metadata documents are served as application/json",
    check(o) {
      const served = o.authorizationServers.flatMap((s) => s.forms).filter((f) => f.status === 200);
      if (served.length === 0) return skip("no metadata document served");
      return served.map((f) => contentTypeVerdict(f));
    },
  },
  {
    id: "as.issuer",
    group: "as",
    level: "MUST",
    spec: "RFC 8414 §3.3 (issuer identical to the issuer identifier); OpenID Connect Discovery 1.0 §4.3",
    title: "issuer equals the authorization server's identifier exactly",
    check(o) {
      return perAsDocument(o, "the issuer", (json, server) =>
        json.issuer === server.issuer
          ? pass(`"${server.issuer}"`)
          : fail(
              `issuer "${String(json.issuer)}" differs from "${server.issuer}": clients MUST refuse this document`,
            ),
      );
    },
  },
  {
    id: "as.pkce",
    group: "as",
    level: "MUST",
    spec: 'Spec "PKCE" 1-3 (code_challenge_methods_supported present; S256); OAuth 2.1 §7.5.2',
    title: "code_challenge_methods_supported is present and contains S256",
    check(o) {
      return perAsDocument(o, "PKCE support", (json) => {
        const methods = stringArray(json.code_challenge_methods_supported);
        if (!methods)
          return fail("code_challenge_methods_supported is missing: clients MUST refuse to proceed");
        if (!methods.includes("S256")) return fail(`S256 is not offered (${methods.join(", ") || "empty"})`);
        return pass(methods.join(", "));
      });
    },
  },
  {
    id: "as.endpoints",
    group: "as",
    level: "MUST",
    spec: "RFC 8414 §2 (authorization_endpoint and token_endpoint REQUIRED for the code grant)",
    title: "authorization_endpoint and token_endpoint are present",
    check(o) {
      return perAsDocument(o, "endpoints", (json) => {
        const missing = ["authorization_endpoint", "token_endpoint"].filter(
          (k) => typeof json[k] !== "string",
        );
        return missing.length ? fail(`missing: ${missing.join(", ")}`) : pass("both present");
      });
    },
  },
  {
    id: "as.response-type-code",
    group: "as",
    level: "MUST",
    spec: 'RFC 8414 §2 (response_types_supported REQUIRED); OAuth 2.1 §4.1; spec "Authorization flow"',
    title: 'response_types_supported contains "code"',
    check(o) {
      return perAsDocument(o, "response types", (json) => {
        const types = stringArray(json.response_types_supported);
        if (!types) return fail("response_types_supported is missing");
        return types.includes("code")
          ? pass(types.join(", "))
          : fail(`"code" is not offered (${types.join(", ")})`);
      });
    },
  },
  {
    id: "as.https",
    group: "as",
    level: "MUST",
    spec: 'Spec "Token theft and communication security" 3 (all authorization server endpoints over HTTPS)',
    title: "The issuer and every endpoint use HTTPS",
    check(o) {
      return perAsDocument(o, "endpoint schemes", (json, server) => {
        const urls: Array<[string, string]> = [["issuer", server.issuer], ...endpointFields(json)];
        const insecure = urls.filter(([, u]) => ["insecure", "invalid"].includes(classifyTransport(u)));
        if (insecure.length) return fail(`not HTTPS: ${insecure.map(([k, u]) => `${k}=${u}`).join(", ")}`);
        const loopback = urls.filter(([, u]) => classifyTransport(u) === "loopback-http");
        if (loopback.length) {
          return warn(`plain http on loopback (development only): ${loopback.map(([k]) => k).join(", ")}`);
        }
        return pass(`${urls.length} URLs, all https`);
      });
    },
  },
  {
    id: "as.iss-parameter",
    group: "as",
    level: "SHOULD",
    revisions: ["2026-07-28"],
    spec: 'Spec "Authorization response validation (2026-07-28)"; RFC 9207 §2, §3',
    title: "authorization_response_iss_parameter_supported is true",
    check(o) {
      return perAsDocument(o, "iss support", (json) =>
        json.authorization_response_iss_parameter_supported === true
          ? pass("true: authorization responses carry iss")
          : warn("not announced: clients cannot detect mix-up attacks through iss"),
      );
    },
  },
  {
    id: "as.client-id-metadata-documents",
    group: "as",
    level: "SHOULD",
    spec: 'Spec "Overview rules" 2; OAuth Client ID Metadata Documents draft 00',
    title: "client_id_metadata_document_supported is true",
    check(o) {
      return perAsDocument(o, "CIMD support", (json) =>
        json.client_id_metadata_document_supported === true
          ? pass("true")
          : warn(
              typeof json.registration_endpoint === "string"
                ? "not announced: clients fall back to dynamic registration"
                : "not announced, and no registration_endpoint: clients need pre-registration",
            ),
      );
    },
  },
  {
    id: "as.registration-endpoint",
    group: "as",
    level: "MAY",
    spec: 'Spec "Overview rules" 3 (dynamic registration MAY; deprecated in 2026-07-28); RFC 7591',
    title: "registration_endpoint (dynamic client registration)",
    check(o) {
      return perAsDocument(o, "registration", (json) => {
        if (typeof json.registration_endpoint !== "string") return info("not offered");
        return o.revision === "2026-07-28"
          ? info("offered (deprecated in 2026-07-28; kept for clients without CIMD)")
          : pass("offered");
      });
    },
  },
  {
    id: "as.grant-types",
    group: "as",
    level: "SHOULD",
    spec: "OAuth 2.1 §1.3, §10 (no implicit or password grant); RFC 8414 §2",
    title: "grant_types_supported offers authorization_code and no removed grants",
    check(o) {
      return perAsDocument(o, "grant types", (json) => {
        const raw = json.grant_types_supported;
        // RFC 8414 §2: omitted means ["authorization_code", "implicit"].
        if (raw === undefined)
          return warn('not listed: RFC 8414 then implies ["authorization_code", "implicit"]');
        const grants = stringArray(raw) ?? [];
        const removed = grants.filter((g) => g === "implicit" || g === "password");
        if (!grants.includes("authorization_code"))
          return warn(`authorization_code is not offered (${grants.join(", ")})`);
        if (removed.length) return warn(`offers grants OAuth 2.1 removed: ${removed.join(", ")}`);
        return pass(grants.join(", "));
      });
    },
  },

  // ── Login flow (--login) ───────────────────────────────────────────────────────────────────
  {
    id: "login.flow",
    group: "login",
    level: "MUST",
    spec: 'Spec "Authorization flow" 1-8 (discovery, registration, PKCE, resource, iss, token request)',
    title: "A client following the spec obtains a token",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return fail(`the flow stopped: ${login.error ?? "unknown reason"}`);
      const how = login.clientSource ? ` as a ${login.clientSource} client` : "";
      return pass(`token from ${login.issuer}${how}${login.scope ? ` with scope "${login.scope}"` : ""}`);
    },
  },
  {
    id: "login.token-accepted",
    group: "login",
    level: "MUST",
    spec: 'Spec "Authorization flow" 9; "Token validation by the resource server" 1-3',
    title: "The resource accepts the token it led the client to",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      if (login.resourceError) return fail(login.resourceError);
      const status = login.resourceStatus;
      const upgrades = login.stepUps ? ` after ${login.stepUps} scope upgrade(s)` : "";
      if (status !== undefined && status >= 200 && status < 300) return pass(`${status}${upgrades}`);
      return fail(`HTTP ${status}${upgrades}`);
    },
  },
  {
    id: "login.step-up",
    group: "login",
    level: "MAY",
    spec: 'Spec "Insufficient scope at run time" and "Client handling (scope upgrade)"',
    title: "Scope upgrades during the flow",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      return login.stepUps
        ? pass(`the resource asked for more scope ${login.stepUps} time(s) and the upgrade worked`)
        : info("the audited request needed no scope upgrade");
    },
  },
  {
    id: "login.token-lifetime",
    group: "login",
    level: "SHOULD",
    spec: 'Spec "Token theft and communication security" 2 and "Limits" 2 (short-lived access tokens)',
    title: "Access tokens are short-lived",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      const lifetime = login.accessTokenLifetimeSeconds;
      if (lifetime === undefined) return info("the token response has no expires_in");
      return lifetime <= 3600 ? pass(`${lifetime} s`) : warn(`${lifetime} s (more than an hour)`);
    },
  },
  {
    id: "login.refresh",
    group: "login",
    level: "MUST",
    spec: 'OAuth 2.1 §4.3 (a refresh token issued can be used); spec "Refresh tokens (2026-07-28)"',
    title: "A refresh token, when issued, yields a new access token",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      if (!login.refreshTokenIssued) return skip("no refresh token issued (the client MUST NOT assume one)");
      return login.refreshWorked
        ? pass("refreshed")
        : fail(`refresh failed: ${login.refreshError ?? "no new token"}`);
    },
  },
  {
    id: "login.refresh-rotation",
    group: "login",
    level: "MUST",
    spec: 'Spec "Token theft and communication security" 2 (rotate refresh tokens for public clients); OAuth 2.1 §4.3.1',
    title: "Refresh tokens of a public client rotate",
    check(o) {
      const login = o.login!;
      if (!login.refreshWorked) return skip("no refresh to inspect");
      if (login.publicClient === false) return skip("the client is confidential: rotation is not required");
      return login.refreshRotated
        ? pass("a new refresh token on every use")
        : fail("the same refresh token came back");
    },
  },
];

/** Evaluates every rule that applies to the revision, in table order. */
export function evaluateRules(observations: Observations, rules: readonly Rule[] = RULES) {
  return (
    rules
      .filter((rule) => !rule.revisions || rule.revisions.includes(observations.revision))
      // Login rules only when --login ran.
      .filter((rule) => rule.group !== "login" || observations.login !== undefined)
      .flatMap((rule) => {
        const verdicts = [rule.check(observations)].flat();
        return verdicts.map((v) => ({
          rule: rule.id,
          group: rule.group,
          level: rule.level,
          spec: rule.spec,
          title: rule.title,
          // Only a MUST can fail; anything weaker that is not met is a warning.
          outcome: v.outcome === "fail" && rule.level !== "MUST" ? ("warn" as const) : v.outcome,
          message: v.message,
          ...(v.subject !== undefined && { subject: v.subject }),
        }));
      })
  );
}
