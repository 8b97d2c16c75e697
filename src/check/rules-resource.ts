/**
 * Rules about the protected resource: transport, the 401 challenge, protected resource metadata
 * (RFC 9728) and how the resource treats bogus tokens (RFC 6750).
 */
import { classifyTransport, compareResource } from "./classify.js";
import { usable } from "./probes.js";
import {
  accessChallenge,
  bearerChallenge,
  contentTypeVerdict,
  describeResponse,
  dpopChallenge,
  fail,
  info,
  pass,
  type Rule,
  servedPrm,
  skip,
  splitScope,
  stringArray,
  unauthenticated401,
  uniqueByUrl,
  warn,
} from "./rule-helpers.js";

export const RESOURCE_RULES: readonly Rule[] = [
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
    spec: "RFC 9110 §11.6.1 and §15.5.2 (a 401 carries WWW-Authenticate); RFC 6750 §3; RFC 9449 §7.1",
    title:
      "The 401 carries a parsable WWW-Authenticate: Bearer challenge (DPoP alone where only DPoP is accepted)",
    check(o) {
      if (!unauthenticated401(o)) return skip("no 401 to inspect");
      const header = o.unauthenticated.wwwAuthenticate;
      if (!header) return fail("the 401 has no WWW-Authenticate header");
      if (!o.unauthenticated.challenges?.length)
        return fail("WWW-Authenticate is not parsable (RFC 9110 §11.6.1)");
      if (!bearerChallenge(o.unauthenticated)) {
        // RFC 9449 §7.1: a resource that accepts only DPoP-bound tokens challenges with DPoP alone.
        if (dpopChallenge(o.unauthenticated)) return pass("DPoP challenge only (bearer tokens not accepted)");
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
      const challenge = accessChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer or DPoP challenge");
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
      const challenge = accessChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer or DPoP challenge");
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
      const challenge = accessChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer or DPoP challenge");
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
      const challenge = accessChallenge(o.unauthenticated);
      if (!challenge) return skip("no Bearer or DPoP challenge");
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
      const challenge = accessChallenge(probe);
      if (!challenge) return warn("no parsable Bearer or DPoP challenge on the 401");
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
];
