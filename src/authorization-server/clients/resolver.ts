/**
 * Finds the client behind a `client_id`: registered clients from storage, and Client ID Metadata
 * Documents for URL ids (spec "Client ID Metadata Documents, authorization server rules";
 * draft-ietf-oauth-client-id-metadata-document-00 §4).
 *
 * For a URL id, in order: feature switch, URL shape (`invalid_request`), trust policy
 * (`invalid_client`), the shared document cache in storage, then a guarded fetch
 * (src/shared/guarded-fetch.ts), validation (`invalid_client`), caching within clamps and an
 * upsert of the client record so grants and consents can refer to it. Failures are never cached.
 */

import { OAuthError } from "../../shared/errors.js";
import { type GuardedFetch, GuardedFetchError, guardedFetch } from "../../shared/guarded-fetch.js";
import type { Logger } from "../../shared/log.js";
import { traceOutboundFetch } from "../../shared/telemetry.js";
import type { AuthorizationStore, ClientRecord } from "../../storage/contract.js";
import type { AuditEventInput } from "../core/audit.js";
import { isUrlClientId } from "../core/client-id.js";
import type { ClientResolver, ResolvedOptions } from "../core/context.js";
import type { ClientDocumentTrustPolicy } from "../core/options.js";
import { clientIdUrlProblem, validateClientMetadataDocument } from "./metadata-document.js";

export interface ClientResolverDeps {
  store: AuthorizationStore;
  options: ResolvedOptions;
  log: Logger;
  now(): number;
  /** Records `client_metadata_document_failed` audit events (the server's `ctx.audit`). */
  audit?: (event: AuditEventInput) => void;
  /** The outbound fetch; defaults to the process-wide guarded fetch (shared per-host limits). */
  fetch?: GuardedFetch;
}

/** Client ID Metadata Document settings with every default applied. */
export interface ResolvedDocumentSettings {
  enabled: boolean;
  trust: ClientDocumentTrustPolicy;
  maxBytes: number;
  timeoutMs: number;
  minCacheSeconds: number;
  maxCacheSeconds: number;
  allowLoopback: false | { ca?: string[] };
}

/**
 * The settings as the resolver uses them. They were validated, with every default and bound, once
 * by config/resolve-options.ts (OPTION_LIMITS, the trust policy); nothing is checked again here.
 */
export function resolveDocumentSettings(
  options: ResolvedOptions["clientMetadataDocuments"],
): ResolvedDocumentSettings {
  return {
    enabled: options.enabled,
    // resolveOptions always sets these (its defaults); the option type leaves them optional.
    trust: options.trust!,
    maxBytes: options.maxBytes!,
    timeoutMs: options.timeoutMs!,
    minCacheSeconds: options.minCacheSeconds!,
    maxCacheSeconds: options.maxCacheSeconds!,
    allowLoopback: options.dangerouslyAllowLoopbackForTesting
      ? { ca: options.dangerouslyAllowLoopbackForTesting.ca ?? [] }
      : false,
  };
}

/** True when `hostname` matches an allow-list rule: exact, or `*.example.com` for any subdomain. */
export function hostAllowed(hostname: string, rules: readonly string[]): boolean {
  const host = hostname.toLowerCase();
  return rules.some((rule) => (rule.startsWith("*.") ? host.endsWith(rule.slice(1)) : host === rule));
}

/**
 * Freshness from response headers (RFC 9111 §4.2.1), clamped to [min, max] seconds; undefined
 * means "do not cache" (`no-store`, or `no-cache`, which would need revalidation we do not do).
 * Without any freshness information the minimum applies.
 */
export function cacheLifetimeSeconds(
  headers: Headers,
  now: number,
  min: number,
  max: number,
): number | undefined {
  const directives = (headers.get("cache-control") ?? "")
    .split(",")
    .map((d) => d.trim().toLowerCase())
    .filter((d) => d !== "");
  if (directives.some((d) => d === "no-store" || d === "no-cache" || d.startsWith("no-cache=")))
    return undefined;
  let lifetime: number | undefined;
  const maxAge = directives.find((d) => d.startsWith("max-age="));
  if (maxAge !== undefined) {
    const n = Number(maxAge.slice("max-age=".length).replace(/^"|"$/g, ""));
    lifetime = Number.isFinite(n) && n >= 0 ? Math.floor(n) : 0;
  } else if (headers.has("expires")) {
    const expires = Date.parse(headers.get("expires") ?? "");
    const date = Date.parse(headers.get("date") ?? "");
    // An unparseable Expires means "already expired" (RFC 9111 §5.3).
    lifetime = Number.isNaN(expires) ? 0 : Math.floor((expires - (Number.isNaN(date) ? now : date)) / 1000);
  }
  return Math.min(max, Math.max(min, lifetime ?? min));
}

function fetchFailure(error: GuardedFetchError, maxBytes: number): OAuthError {
  const reasons: Partial<Record<GuardedFetchError["code"], string>> = {
    redirect: "the document URL answered with a redirect (redirects are not followed)",
    http_status: `the document URL answered HTTP ${error.status ?? "error"}`,
    content_type: "the document must be served as application/json",
    content_encoding: "the document must not be content-encoded",
    too_large: `the document is larger than ${maxBytes} bytes`,
    timeout: "the document was not received in time",
    bad_body: "the document is not UTF-8",
    tls: "the document host's TLS certificate was not accepted",
  };
  // Connection-level failures share one public text: which internal address was refused is not the
  // caller's business.
  const reason = reasons[error.code] ?? "the document could not be fetched";
  return new OAuthError("invalid_client", {
    description: `client metadata document: ${reason}`,
    detail: `guarded fetch ${error.code}: ${error.message}`,
    cause: error,
  });
}

/**
 * Creates the resolver the endpoints use (context.ts `ClientResolver`). Validates the Client ID
 * Metadata Document settings now, so a bad configuration fails at start-up.
 *
 * `resolve(clientId)`:
 * - not starting with `https://` (any case): the stored client, or undefined;
 * - URL id stored as a non-document client (an administrator pre-registered it): that client;
 * - documents disabled: undefined;
 * - malformed URL id: throws `OAuthError("invalid_request")`;
 * - host refused by the trust policy: throws `OAuthError("invalid_client")`;
 * - otherwise the cached or freshly fetched document, validated; a fetch or validation failure
 *   throws `OAuthError("invalid_client")` with a public description starting
 *   "client metadata document:". Storage errors propagate unchanged.
 */
export function createClientResolver(deps: ClientResolverDeps): ClientResolver {
  const settings = resolveDocumentSettings(deps.options.clientMetadataDocuments);
  const fetchDocument = deps.fetch ?? guardedFetch;
  const { store, log } = deps;

  async function trusted(url: URL): Promise<boolean> {
    const trust = settings.trust;
    if (trust.kind === "any-https") return true;
    if (trust.kind === "allow-list") return hostAllowed(url.hostname, trust.hosts);
    try {
      return (await trust.decide(new URL(url.href))) === true;
    } catch (err) {
      // Fail closed: a policy that cannot decide does not admit the client.
      log.error("client_metadata_document.trust_callback_failed", {
        host: url.hostname,
        error: err instanceof Error ? err.name : "unknown",
      });
      return false;
    }
  }

  function refuse(clientId: string, host: string, error: OAuthError): never {
    log.warn("client_metadata_document.refused", { host, error: error.code, detail: error.detail });
    deps.audit?.({ type: "client_metadata_document_failed", client_id: clientId, host, error: error.code });
    throw error;
  }

  async function resolveDocument(
    clientId: string,
    existing: ClientRecord | undefined,
  ): Promise<ClientRecord> {
    const problem = clientIdUrlProblem(clientId);
    if (problem) {
      throw new OAuthError("invalid_request", { description: problem });
    }
    const url = new URL(clientId);
    if (!(await trusted(url))) {
      refuse(
        clientId,
        url.hostname,
        new OAuthError("invalid_client", { description: "client host not allowed by this server's policy" }),
      );
    }
    const keep = (record: ClientRecord): ClientRecord =>
      existing ? { ...record, createdAt: existing.createdAt, lastUsedAt: existing.lastUsedAt } : record;

    const now = deps.now();
    const cached = await store.getCachedDocument(clientId, now);
    if (cached) {
      try {
        const record = keep(validateClientMetadataDocument(clientId, JSON.parse(cached.body), now));
        if (!existing) await store.upsertClient(record);
        return record;
      } catch (err) {
        if (!(err instanceof OAuthError) && !(err instanceof SyntaxError)) throw err;
        // Only valid documents are cached; an entry that no longer validates (rules changed) is refetched.
        log.warn("client_metadata_document.cache_entry_invalid", { host: url.hostname });
      }
    }

    let response: Awaited<ReturnType<GuardedFetch>>;
    try {
      response = await traceOutboundFetch("client_metadata_document", url.hostname, () =>
        fetchDocument(clientId, {
          maxBytes: settings.maxBytes,
          timeoutMs: settings.timeoutMs,
          allowLoopback: settings.allowLoopback,
          accept: "application/json",
        }),
      );
    } catch (err) {
      if (err instanceof GuardedFetchError)
        refuse(clientId, url.hostname, fetchFailure(err, settings.maxBytes));
      throw err;
    }
    if (response.status !== 200) {
      refuse(
        clientId,
        url.hostname,
        fetchFailure(
          new GuardedFetchError("http_status", `unexpected HTTP ${response.status}`, {
            status: response.status,
          }),
          settings.maxBytes,
        ),
      );
    }
    let json: unknown;
    try {
      json = JSON.parse(response.body);
    } catch {
      refuse(
        clientId,
        url.hostname,
        new OAuthError("invalid_client", {
          description: "client metadata document: the document is not valid JSON",
        }),
      );
    }
    let record: ClientRecord;
    try {
      record = keep(validateClientMetadataDocument(clientId, json, now));
    } catch (err) {
      if (err instanceof OAuthError) refuse(clientId, url.hostname, err);
      throw err;
    }

    const seconds = cacheLifetimeSeconds(
      response.headers,
      now,
      settings.minCacheSeconds,
      settings.maxCacheSeconds,
    );
    // no-store: used for this request only. Only a document that validated reaches this line.
    if (seconds !== undefined && seconds > 0)
      await store.putCachedDocument(clientId, response.body, now + seconds * 1000);
    await store.upsertClient(record);
    log.info("client_metadata_document.fetched", { host: url.hostname, cache_seconds: seconds ?? 0 });
    return record;
  }

  return {
    async resolve(clientId) {
      if (typeof clientId !== "string" || clientId === "") return undefined;
      if (!isUrlClientId(clientId)) return store.getClient(clientId);
      const existing = await store.getClient(clientId);
      // A URL id an administrator registered by hand is a pre-registered client (spec order:
      // pre-registered information first); dynamic registration never issues https ids.
      if (existing && existing.source !== "metadata-document") return existing;
      if (!settings.enabled) return undefined;
      return resolveDocument(clientId, existing);
    },
  };
}
