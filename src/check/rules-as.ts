/**
 * Rules about the authorization server's metadata (RFC 8414, OpenID Connect Discovery 1.0) under
 * each discovery form.
 */
import { classifyTransport } from "./classify.js";
import { usable } from "./probes.js";
import { resourceRefusalIn } from "./resource-parameter.js";
import {
  contentTypeVerdict,
  describeResponse,
  endpointFields,
  fail,
  info,
  pass,
  perAsDocument,
  type Rule,
  refusedDPoPAlgorithms,
  skip,
  stringArray,
  type Verdict,
  warn,
} from "./rule-helpers.js";
import type { MachineRegistrationProbe, ResourceParameterProbe } from "./types.js";

export const AUTHORIZATION_SERVER_RULES: readonly Rule[] = [
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
          : fail(issuerMismatch(json.issuer, server.issuer)),
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
          return fail(
            'code_challenge_methods_supported is missing: clients MUST refuse to proceed. Add "code_challenge_methods_supported": ["S256"] to the authorization server\'s metadata (servers that do PKCE often just do not announce it); a hosted server whose metadata you cannot change needs one you control in authorization_servers of the protected resource metadata',
          );
        if (!methods.includes("S256"))
          return fail(
            `S256 is not offered (${methods.join(", ") || "empty"}): enable the S256 PKCE method on the authorization server and list it in code_challenge_methods_supported`,
          );
        return pass(methods.join(", "));
      });
    },
  },
  {
    id: "as.resource-parameter",
    group: "as",
    level: "MUST",
    spec: 'Spec "Resource parameter" (clients MUST send resource whether or not the server supports it); RFC 8707 §2; RFC 6749 §3.1 (unrecognized parameters MUST be ignored)',
    title: "The authorization server does not refuse the resource parameter",
    check(o) {
      const verdicts: Verdict[] = o.authorizationServers.flatMap((server) =>
        server.resourceParameter
          ? [{ ...resourceParameterVerdict(server.resourceParameter), subject: server.issuer }]
          : [],
      );
      const login = o.login;
      if (login?.tokenObtained) {
        verdicts.push(pass("the --login flow sent resource and obtained a token", "--login"));
      } else if (login?.error && resourceRefusalIn(login.error)) {
        verdicts.push(
          fail(`the --login flow stopped on resource: ${login.error}. ${RESOURCE_FIX}`, "--login"),
        );
      }
      return verdicts.length > 0 ? verdicts : skip("no authorization endpoint to send a request to");
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
    id: "as.anonymous-machine-clients",
    group: "as",
    level: "SHOULD",
    spec: "RFC 7591 §3 (an initial access token MAY protect registration); OAuth 2.1 §4.2, §7 (client_credentials is for clients the server can trust)",
    title: "An anonymous caller cannot register a client that gets tokens with no user",
    check(o) {
      const probes = o.authorizationServers.flatMap((s) =>
        s.machineRegistration ? [{ issuer: s.issuer, probe: s.machineRegistration }] : [],
      );
      if (probes.length === 0) return skip("no registration_endpoint announced");
      return probes.map(({ issuer, probe }) => machineRegistrationVerdict(probe, issuer));
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
  {
    id: "as.dpop-algorithms",
    group: "as",
    level: "MUST",
    spec: "RFC 9449 §4.2 (proofs use an asymmetric algorithm, never none or a MAC), §5.1",
    title: "dpop_signing_alg_values_supported lists only asymmetric JWS algorithms",
    check(o) {
      return perAsDocument(o, "DPoP algorithms", (json) => {
        const raw = json.dpop_signing_alg_values_supported;
        if (raw === undefined) return info("DPoP not advertised");
        const algs = stringArray(raw);
        if (!algs || algs.length === 0)
          return fail("dpop_signing_alg_values_supported is not a non-empty array of strings");
        // A server that lists `none` or an HMAC algorithm would accept proofs anyone can make.
        const refused = refusedDPoPAlgorithms(algs);
        if (refused.length) {
          return fail(
            `lists ${refused.join(", ")}: a DPoP proof must be signed with an asymmetric key (RFC 9449 §4.2); remove them from the server's accepted algorithms and its metadata`,
          );
        }
        if (!algs.includes("ES256")) {
          return warn(
            `${algs.join(", ")} without ES256: clients that sign proofs with ES256 only (Gatehouse's among them) will not ask for DPoP-bound tokens here`,
          );
        }
        return pass(algs.join(", "));
      });
    },
  },
];

/**
 * RFC 8414 §3.3 mismatch, with what to change for the two cases users meet most: a multi-tenant
 * template issuer (Entra ID's /common and /organizations metadata name `{tenantid}`) and a trailing
 * slash on one side only.
 */
function issuerMismatch(declared: unknown, listed: string): string {
  const base = `issuer "${String(declared)}" differs from "${listed}": clients MUST refuse this document`;
  if (typeof declared !== "string") return `${base}. The server's metadata must say "issuer": "${listed}"`;
  if (/\{[^}]*\}/.test(declared)) {
    const tenant = declared.replace(/\{[^}]*\}/g, "<tenant-id>");
    return `${base}. It is a template (multi-tenant metadata, as Microsoft Entra ID serves under /common and /organizations): list the tenant's own issuer (${tenant}) in authorization_servers of the protected resource metadata`;
  }
  if (declared.replace(/\/+$/, "") === listed.replace(/\/+$/, "")) {
    return `${base}, only by a trailing slash. Write the authorization_servers entry in the protected resource metadata exactly as "${declared}" (or set the server's issuer to "${listed}")`;
  }
  return `${base}. Set the authorization_servers entry in the protected resource metadata to the issuer the server declares, or the server's issuer to "${listed}"`;
}

const RESOURCE_FIX =
  "Clients following the spec MUST send resource (RFC 8707) and cannot log in: make the authorization server accept this resource (register it there) or ignore the parameter, or list in authorization_servers of the protected resource metadata one that does (Microsoft Entra ID's v2.0 endpoints refuse the parameter, AADSTS901002)";

function resourceParameterVerdict(probe: ResourceParameterProbe): Verdict {
  const first = probe.withResource;
  if (first.transportError) return info(`authorization request failed: ${first.transportError}; not judged`);
  if (first.resourceRefusal && probe.withoutResource && !probe.withoutResource.resourceRefusal) {
    return fail(
      `an authorization request with resource=${probe.resource} is refused ("${first.resourceRefusal}", ${describeResponse(first)}); without resource it is not. ${RESOURCE_FIX}`,
    );
  }
  if (first.resourceRefusal) {
    return info(
      `the answer names "${first.resourceRefusal}" with and without resource, so it is not about the parameter; --login confirms`,
    );
  }
  return info(
    `an anonymous authorization request with resource is not refused for it (${describeResponse(first)}); a server that judges the client first is only judged by --login`,
  );
}

/** What the anonymous client_credentials registration (machine-registration.ts) showed. */
function machineRegistrationVerdict(probe: MachineRegistrationProbe, issuer: string): Verdict {
  if (probe.transportError) {
    return info(`registration request failed: ${probe.transportError}; not judged`, issuer);
  }
  if (probe.accepted) {
    const cleanup = probe.deleted
      ? "the probe's client was deleted again (RFC 7592)"
      : `the probe's client "gatehouse check probe" stays registered (never used): delete it`;
    return warn(
      `${probe.endpoint} registered a client_credentials client for an anonymous caller (${probe.status}): anyone can get tokens with no user, and a resource that treats a valid token as authorized is open to them. Require an initial access token for such registrations (RFC 7591 §3; Gatehouse: dynamicRegistration.initialAccessTokens) or refuse them; ${cleanup}`,
      issuer,
    );
  }
  const refusal = probe.error ? `${probe.status} ${probe.error}` : String(probe.status);
  return probe.status !== undefined && probe.status >= 400 && probe.status < 500
    ? pass(`refused (${refusal})`, issuer)
    : info(`answered ${refusal}; not judged`, issuer);
}
