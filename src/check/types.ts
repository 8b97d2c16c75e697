/**
 * Types shared by the auditor's probes, rules and report. The auditor works in two passes: the
 * probes make every HTTP request and record what they saw ({@link Observations}); the rules are pure
 * functions of those observations. So a rule can be tested with a hand-built observation, and the
 * report can list exactly which requests were made and with what credential.
 */

import type { Revision } from "../shared/revision.js";
import type { Challenge } from "../shared/www-authenticate.js";

export type { Revision };

/** RFC 2119 strength of the requirement a rule checks. */
export type Level = "MUST" | "SHOULD" | "MAY";

/**
 * - `pass`: the requirement holds.
 * - `fail`: a MUST (or MUST NOT) does not hold. Only MUST rules fail; the exit status is 1.
 * - `warn`: a SHOULD is not met, or a MUST holds only in a form clients commonly accept.
 * - `info`: an observation (a MAY feature, a discovery form not served, a lifetime seen).
 * - `skip`: the rule could not be evaluated (an earlier step failed, or it does not apply).
 */
export type Outcome = "pass" | "fail" | "warn" | "info" | "skip";

/** Report sections, in display order. */
export type Group = "transport" | "challenge" | "prm" | "resource" | "as" | "login";

export const GROUP_TITLES: Record<Group, string> = {
  transport: "Transport",
  challenge: "401 challenge (unauthenticated request)",
  prm: "Protected resource metadata (RFC 9728)",
  resource: "Token handling at the resource",
  as: "Authorization server metadata (RFC 8414 / OpenID Connect Discovery)",
  login: "Login flow (--login)",
};

/** One verdict of one rule, possibly about one subject (a URL, an issuer). */
export interface Finding {
  rule: string;
  group: Group;
  level: Level;
  /** The spec rule and RFC section the requirement comes from. */
  spec: string;
  title: string;
  outcome: Outcome;
  message: string;
  subject?: string;
}

/** What kind of credential a request carried. Only bogus values are ever sent without `--login`. */
export type CredentialKind = "none" | "bogus-bearer" | "bogus-query" | "access-token" | "client";

/** One HTTP exchange the auditor made (never the credential itself). */
export interface Exchange {
  method: string;
  url: string;
  credential: CredentialKind;
  status?: number;
  error?: string;
}

/** A fetched JSON document and what went wrong reading it. */
export interface DocumentProbe {
  url: string;
  /** Undefined when the request failed at the transport level. */
  status?: number;
  contentType?: string;
  /** Set on a redirect: clients do not follow redirects for metadata. */
  location?: string;
  transportError?: string;
  /** The body, when it was a JSON object. */
  json?: Record<string, unknown>;
  /** Why a 200 response is not a usable JSON object (not JSON, too large, not an object). */
  bodyError?: string;
}

export type PrmSource = "resource_metadata" | "path-specific" | "root";

export interface PrmProbe extends DocumentProbe {
  source: PrmSource;
  /** Schema problems (field paths), when the document is JSON but does not conform. */
  schemaIssues?: string[];
}

/**
 * The discovery URL forms (spec "Authorization server metadata discovery"): for an issuer with a
 * path, RFC 8414 inserted, OpenID Connect inserted, OpenID Connect appended; without a path, RFC 8414
 * and OpenID Connect.
 */
export type AsForm = "rfc8414" | "oidc-inserted" | "oidc-appended" | "oidc";

export interface AsMetadataProbe extends DocumentProbe {
  form: AsForm;
  schemaIssues?: string[];
}

export interface AuthorizationServerProbe {
  /** The `authorization_servers` entry, exactly as listed. */
  issuer: string;
  /** Set when the entry is not a URL the auditor can build discovery URLs from. */
  invalid?: string;
  forms: AsMetadataProbe[];
  /** The anonymous authorization requests of resource-parameter.ts (when an endpoint was found). */
  resourceParameter?: ResourceParameterProbe;
  /** The anonymous client_credentials registration of machine-registration.ts (when announced). */
  machineRegistration?: MachineRegistrationProbe;
}

/** One anonymous registration asking for a client_credentials client, and what it answered. */
export interface MachineRegistrationProbe {
  endpoint: string;
  status?: number;
  transportError?: string;
  /** A 2xx with a `client_id`: the server registered a machine client for an anonymous caller. */
  accepted?: boolean;
  /** The OAuth error code of a refusal, bounded. */
  error?: string;
  /** For an accepted registration: whether RFC 7592 deletion succeeded. */
  deleted?: boolean;
}

/** One anonymous authorization request (unknown client, no credential) and what it answered. */
export interface AuthorizationRequestProbe {
  url: string;
  withResource: boolean;
  status?: number;
  transportError?: string;
  location?: string;
  /** What in the answer (redirect error or page) names `resource` as refused, quoted and bounded. */
  resourceRefusal?: string;
}

export interface ResourceParameterProbe {
  authorizationEndpoint: string;
  /** The `resource` value sent (the PRM's `resource`, as a client sends it). */
  resource: string;
  withResource: AuthorizationRequestProbe;
  /** The control request without `resource`, sent only when the first answer named a refusal. */
  withoutResource?: AuthorizationRequestProbe;
}

export interface ResponseProbe {
  url: string;
  /** `get`, or `mcp` for a JSON-RPC initialize POST (see `RequestForm` in probes.ts). */
  form: "get" | "mcp";
  status?: number;
  transportError?: string;
  /** Raw `WWW-Authenticate` value(s), comma-joined as Headers does. */
  wwwAuthenticate?: string | null;
  challenges?: Challenge[];
  location?: string;
}

export interface LoginObservation {
  attempted: boolean;
  /** Why the flow stopped before a token was obtained. */
  error?: string;
  tokenObtained?: boolean;
  issuer?: string;
  scope?: string;
  /** How the client identified itself, and whether it is public (`none` authentication). */
  clientSource?: "preregistered" | "metadata-document" | "dynamic";
  publicClient?: boolean;
  /** `expires_in` of the token response, when the server gave one. */
  accessTokenLifetimeSeconds?: number;
  /** Status of the resource called with the token (after any scope upgrade). */
  resourceStatus?: number;
  resourceError?: string;
  /** Scope upgrades the client made on the way (spec "Client handling (scope upgrade)"). */
  stepUps?: number;
  refreshTokenIssued?: boolean;
  refreshWorked?: boolean;
  refreshRotated?: boolean;
  refreshError?: string;
}

/** Everything the probes saw. */
export interface Observations {
  resourceUrl: string;
  revision: Revision;
  unauthenticated: ResponseProbe;
  /** When the GET got 404/405/406 and the MCP initialize POST was used instead: the GET's answer. */
  getAnswer?: ResponseProbe;
  prm: PrmProbe[];
  /** The document a spec-following client would use (first usable one in the spec's order). */
  selectedPrm?: PrmProbe;
  authorizationServers: AuthorizationServerProbe[];
  bogusBearer?: ResponseProbe;
  bogusQuery?: ResponseProbe;
  login?: LoginObservation;
}

export interface CheckReport {
  resource: string;
  revision: Revision;
  startedAt: string;
  /** False when any MUST rule failed. */
  ok: boolean;
  summary: Record<Outcome, number>;
  findings: Finding[];
  exchanges: Exchange[];
  observations: Observations;
}
