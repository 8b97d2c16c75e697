/**
 * Audit events: one typed union (DESIGN.md "Observability"), the same values written to the JSON
 * log and handed to the application's `onAuditEvent` hook, and kept in a bounded in-memory trail
 * per instance for the admin page.
 *
 * Events carry identifiers only (client, user, grant ids, hosts, addresses, OAuth error codes),
 * never a token, code, secret or password (SECURITY.md: "never a token/code/secret in logs").
 * Field names are the log's (snake_case, like the OAuth parameters), so a line in the log and the
 * object the hook receives are the same value.
 */
import type { OAuthErrorCode } from "../../shared/errors.js";
import type { Logger } from "../../shared/log.js";

/** Which rate limit refused a request (docs/authorization-server.md "Rate limits"). */
export type RateLimitName = "registration" | "token" | "login" | "device_code";
/** What a rate limit counted by: the address, the client id, or a metadata document's host. */
export type RateLimitKeyKind = "address" | "client" | "host" | "username";

/** Every audit event, by `type`. `at` is the server clock (ms since the epoch). */
export type AuditEvent = {
  at: number;
} /** `upstream_provider`: the sign-in went through that upstream identity provider. */ & (
  | { type: "login_succeeded"; user_id: string; upstream_provider?: string }
  /** An upstream sign-in did not complete; `reason` names the step (never the provider's words). */
  | { type: "upstream_sign_in_failed"; upstream_provider: string; reason: string }
  /** A first upstream sign-in created a local account (`createAccounts`). */
  | { type: "upstream_account_created"; upstream_provider: string; user_id: string }
  /** A resource server received a kept upstream access token (vault/upstream-tokens.ts); never the token. */
  | { type: "upstream_token_issued"; upstream_provider: string; client_id: string; grant_id: string }
  /**
   * `user_id` only when the username exists (the password was wrong, or, with `reason`, right for
   * an account an operator disabled).
   */
  | { type: "login_failed"; user_id?: string; reason?: "account_disabled" }
  /**
   * An operator changed an account (user-accounts.ts): on the admin page (`admin_id`) or with
   * `gatehouse users` (`by: "cli"`). Disabling and removing say what they ended.
   */
  | {
      type: "user_changed";
      user_id: string;
      change: "disable" | "enable" | "make-admin" | "remove-admin" | "remove";
      by: "admin" | "cli";
      admin_id?: string;
      grants_revoked?: number;
      sessions_ended?: number;
    }
  /** The account page's sign-out: the session ended and the grants approved in it were revoked. */
  | { type: "signed_out"; user_id: string; grants_revoked: number }
  | { type: "consent_granted"; client_id: string; user_id: string }
  | { type: "consent_denied"; client_id: string; user_id: string }
  | { type: "consent_revoked"; client_id: string; user_id: string; by: "user" | "admin" }
  | {
      type: "grant_issued";
      client_id: string;
      grant_id: string;
      grant_type:
        | "authorization_code"
        | "client_credentials"
        | "urn:ietf:params:oauth:grant-type:device_code"
        | "urn:ietf:params:oauth:grant-type:jwt-bearer";
      /** For `jwt-bearer`: which kind of assertion, and the trusted issuer that signed it. */
      assertion?: "identity_assertion" | "workload_identity";
      assertion_issuer?: string;
      /** For an identity assertion: the local user id it mapped to. */
      user_id?: string;
    }
  /** RFC 8693: a resource server exchanged a user's token for one for a downstream resource. */
  | {
      type: "token_exchanged";
      client_id: string;
      grant_id: string;
      subject_client_id: string;
      from_resource: string;
      to_resource: string;
    }
  /** A jwt-bearer assertion was refused (RFC 7523 §3.1); `reason` names the check, never the assertion. */
  | {
      type: "assertion_refused";
      client_id: string;
      error: OAuthErrorCode;
      reason: string;
      assertion_issuer?: string;
    }
  | { type: "grant_refreshed"; client_id: string; grant_id: string }
  | { type: "grant_revoked"; client_id: string; grant_id: string; by: "client" | "admin" | "user" }
  | { type: "grant_superseded"; client_id: string; grant_id: string; superseded_by: string }
  | { type: "access_token_revoked"; client_id: string; jti: string }
  /** A rotated refresh token came back (RFC 9700 §4.14.2): the grant is revoked. */
  | { type: "refresh_token_reused"; client_id: string }
  /** A redeemed authorization code came back (OAuth 2.1 §4.1.3): its grant is revoked. */
  | { type: "authorization_code_replayed"; client_id: string }
  /** A redeemed device code came back (RFC 8628 §3.5 invalid_grant). */
  | { type: "device_code_replayed"; client_id: string }
  | { type: "client_registered"; client_id: string; auth_method: string; address: string }
  /**
   * A self-registered client asked for a grant without a user and was refused
   * (policy/grants-without-user.ts); `grant_type` names the use, `client_source` how it registered.
   */
  | {
      type: "grant_without_user_refused";
      client_id: string;
      grant_type: "client_credentials" | "workload_identity" | "token_exchange";
      client_source: "preregistered" | "dynamic" | "metadata-document";
    }
  | { type: "client_registration_refused"; error: OAuthErrorCode; address: string }
  | { type: "client_deleted"; client_id: string; by: "admin" }
  | { type: "client_metadata_document_failed"; client_id: string; host: string; error: OAuthErrorCode }
  | {
      type: "rate_limited";
      limit: RateLimitName;
      key_kind?: RateLimitKeyKind;
      retry_after_seconds?: number;
      client_id?: string;
      address?: string;
    }
);

export type AuditEventType = AuditEvent["type"];
/** An event as an emitter writes it: the server adds `at`. */
export type AuditEventInput = AuditEvent extends infer E
  ? E extends AuditEvent
    ? Omit<E, "at">
    : never
  : never;

/** Signals an operator should look at are warnings; the rest of the trail is info. */
const WARNING_EVENTS: ReadonlySet<AuditEventType> = new Set([
  "login_failed",
  "upstream_sign_in_failed",
  "refresh_token_reused",
  "authorization_code_replayed",
  "device_code_replayed",
  "client_registration_refused",
  "grant_without_user_refused",
  "client_metadata_document_failed",
  "assertion_refused",
  "rate_limited",
]);

/** Events kept per client for the admin page, and how many clients are remembered. */
export const AUDIT_EVENTS_PER_CLIENT = 20;
export const AUDIT_CLIENTS_REMEMBERED = 1000;
/** The newest events of any kind (client or not) the admin page lists. */
export const AUDIT_RECENT_EVENTS = 50;

/**
 * The recent audit events of this instance, in memory and bounded: `AUDIT_EVENTS_PER_CLIENT` per
 * client for at most `AUDIT_CLIENTS_REMEMBERED` clients (the least recently active is forgotten
 * first), and the newest `AUDIT_RECENT_EVENTS` overall. Not in storage: the JSON log and the hook
 * are the durable record; this trail answers "what just happened to this client" on the admin
 * page without a write per token request or a schema change. Each instance keeps its own.
 */
export class AuditTrail {
  readonly #byClient = new Map<string, AuditEvent[]>();
  readonly #recent: AuditEvent[] = [];

  record(event: AuditEvent): void {
    this.#recent.push(event);
    if (this.#recent.length > AUDIT_RECENT_EVENTS) this.#recent.shift();
    const clientId = "client_id" in event ? event.client_id : undefined;
    if (clientId === undefined) return;
    const events = this.#byClient.get(clientId) ?? [];
    // Re-inserting moves the client to the end of the Map's order: the first key is the least recent.
    this.#byClient.delete(clientId);
    this.#byClient.set(clientId, events);
    events.push(event);
    if (events.length > AUDIT_EVENTS_PER_CLIENT) events.shift();
    if (this.#byClient.size > AUDIT_CLIENTS_REMEMBERED) {
      const oldest = this.#byClient.keys().next().value;
      if (oldest !== undefined) this.#byClient.delete(oldest);
    }
  }

  /** The client's events, newest first. */
  forClient(clientId: string): AuditEvent[] {
    return [...(this.#byClient.get(clientId) ?? [])].reverse();
  }

  /** The newest events of any kind, newest first. */
  recent(): AuditEvent[] {
    return [...this.#recent].reverse();
  }
}

export type AuditHook = (event: AuditEvent) => void | Promise<void>;

/**
 * The one function every emitter calls: stamps the event, writes it as a JSON line (`event` is its
 * type, `audit: true` marks it), keeps it in the trail and hands it to the hook. A failing hook is
 * logged by its error's name and never fails the request that caused the event.
 */
export function createAuditor(
  log: Logger,
  trail: AuditTrail,
  now: () => number,
  hook?: AuditHook,
): (input: AuditEventInput) => void {
  const hookFailed = (error: unknown) =>
    log.error("audit_hook_failed", { error: error instanceof Error ? error.name : typeof error });
  return (input) => {
    const event = { ...input, at: now() } as AuditEvent;
    const { type, ...fields } = event;
    if (WARNING_EVENTS.has(type)) log.warn(type, { audit: true, ...fields });
    else log.info(type, { audit: true, ...fields });
    trail.record(event);
    if (!hook) return;
    try {
      const result = hook(event);
      if (result && typeof result.then === "function") result.then(undefined, hookFailed);
    } catch (error) {
      hookFailed(error);
    }
  };
}
