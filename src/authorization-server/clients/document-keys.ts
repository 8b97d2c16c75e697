/**
 * The public keys of a Client ID Metadata Document client that authenticates with `private_key_jwt`
 * (RFC 7523 §2.2) and publishes them at a `jwks_uri` (ChatGPT does): fetched through the same
 * guarded fetch as the documents themselves (src/shared/guarded-fetch.ts: https only, special-use
 * addresses refused on the connected socket and literal addresses before any connection, no
 * redirects, a byte cap and one deadline, coalescing), under the documents' settings
 * (`clientMetadataDocuments`: deadline, cache clamps, the tests-only loopback opt-in).
 *
 * Caching (HTTP semantics within the documents' clamps, RFC 9111 §4.2.1): a key set is kept per
 * `client_id` together with the `jwks_uri` its document named, so an entry serves only the client
 * whose document named that URI, and a document that moves its keys elsewhere is fetched afresh.
 * A failure (unreachable, refused address, redirect, oversized, slow, not a key set, a symmetric or
 * private key) is never cached: the next request tries again. An assertion whose `kid` is not in a
 * cached set refetches once the set is older than {@link REFETCH_COOLDOWN_MS} (a client rotating
 * its keys is not locked out until the entry expires, and a stranger cannot make us refetch at will).
 *
 * Pre-registered clients keep their own path in clients/authentication.ts (an operator chose their
 * `jwks_uri`); this module serves clients whose `jwks_uri` a stranger chose.
 */
import { createLocalJWKSet, errors, type JWK, type JWTVerifyGetKey } from "jose";
import { type GuardedFetch, GuardedFetchError, guardedFetch } from "../../shared/guarded-fetch.js";
import { traceOutboundFetch } from "../../shared/telemetry.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { publicJwkProblem } from "./metadata-document.js";
import {
  cacheLifetimeSeconds,
  hostAllowed,
  type ResolvedDocumentSettings,
  resolveDocumentSettings,
} from "./resolver.js";

/** Cap on a key set's body: a few RSA keys with certificate chains fit; a document's 5 KiB may not. */
export const JWKS_MAX_BYTES = 16 * 1024;
/** Most keys a client's set may hold (as a document's inline `jwks`). */
const MAX_KEYS = 10;
/** A cached set is refetched for an unknown `kid` only when at least this old. */
const REFETCH_COOLDOWN_MS = 30_000;
/** Key sets kept per server; the oldest entry leaves first (bounded memory whatever strangers send). */
const MAX_ENTRIES = 1000;

/** Why a client's key set could not be had; `code` is the guarded fetch's or `invalid_jwks`. */
export class DocumentKeysError extends Error {
  constructor(
    readonly code: string,
    /** Safe to show the client: names the rule, never the body. */
    readonly publicReason: string,
    message: string,
  ) {
    super(message);
    this.name = "DocumentKeysError";
  }
}

interface Entry {
  jwksUri: string;
  keys: JWTVerifyGetKey;
  fetchedAt: number;
  expiresAt: number;
}

const PUBLIC_REASONS: Partial<Record<string, string>> = {
  redirect: "the jwks_uri answered with a redirect (redirects are not followed)",
  http_status: "the jwks_uri answered with an HTTP error",
  content_type: "the key set must be served as application/jwk-set+json or application/json",
  content_encoding: "the key set must not be content-encoded",
  too_large: `the key set is larger than ${JWKS_MAX_BYTES} bytes`,
  timeout: "the key set was not received in time",
  tls: "the jwks_uri host's TLS certificate was not accepted",
};

/** Parses and checks a fetched key set: 1 to 10 public asymmetric keys, else the whole set is refused. */
function parseClientKeySet(body: string): { keys: JWK[] } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    throw new DocumentKeysError("invalid_jwks", "the key set is not valid JSON", "jwks_uri body is not JSON");
  }
  const keys = (json as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.length > MAX_KEYS) {
    throw new DocumentKeysError(
      "invalid_jwks",
      `the key set must hold 1 to ${MAX_KEYS} keys`,
      "jwks_uri body has no keys array of the allowed length",
    );
  }
  for (const key of keys) {
    const problem = publicJwkProblem(key);
    if (problem) throw new DocumentKeysError("invalid_jwks", `the key set: ${problem}`, problem);
  }
  return { keys: keys as JWK[] };
}

/** Key sets of document clients for one server, keyed by `client_id`. */
class DocumentKeySets {
  readonly #entries = new Map<string, Entry>();
  readonly #settings: ResolvedDocumentSettings;
  readonly #fetch: GuardedFetch;
  readonly #now: () => number;

  constructor(deps: { settings: ResolvedDocumentSettings; now(): number; fetch?: GuardedFetch }) {
    this.#settings = deps.settings;
    this.#now = deps.now;
    this.#fetch = deps.fetch ?? guardedFetch;
  }

  /**
   * A key lookup for `client`'s assertions (for `jwtVerify`), its set fetched now unless a fresh
   * one is cached for this client and this `jwks_uri`. Throws {@link DocumentKeysError} when the
   * set cannot be had; the lookup itself refetches once for an unknown `kid` (see the module).
   */
  async keysFor(client: ClientRecord & { jwksUri: string }): Promise<JWTVerifyGetKey> {
    const clientId = client.clientId;
    const jwksUri = client.jwksUri;
    let entry = this.#entries.get(clientId);
    if (!entry || entry.jwksUri !== jwksUri || entry.expiresAt <= this.#now()) {
      entry = await this.#load(clientId, jwksUri);
    }
    const first = entry;
    return async (header, token) => {
      try {
        return await first.keys(header, token);
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
        if (this.#now() - first.fetchedAt < REFETCH_COOLDOWN_MS) throw error;
        const fresh = await this.#load(clientId, jwksUri);
        return fresh.keys(header, token);
      }
    };
  }

  async #load(clientId: string, jwksUri: string): Promise<Entry> {
    const settings = this.#settings;
    // The document validated jwks_uri as an https URL (fetchUrlProblem), so it parses.
    const host = new URL(jwksUri).hostname;
    // An operator who allow-listed the hosts that may be clients expects no fetch elsewhere: the key
    // set's host must be on the list too. (A callback policy judges the client_id URL only.)
    if (settings.trust.kind === "allow-list" && !hostAllowed(host, settings.trust.hosts)) {
      throw new DocumentKeysError(
        "untrusted_host",
        "the jwks_uri host is not allowed by this server's policy",
        "jwks_uri host not on the trust allow-list",
      );
    }
    let response: Awaited<ReturnType<GuardedFetch>>;
    try {
      response = await traceOutboundFetch("client_jwks", host, () =>
        this.#fetch(jwksUri, {
          maxBytes: JWKS_MAX_BYTES,
          timeoutMs: settings.timeoutMs,
          allowLoopback: settings.allowLoopback,
          accept: "application/jwk-set+json, application/json",
        }),
      );
    } catch (error) {
      // A failure is never cached: the next request fetches again.
      if (error instanceof GuardedFetchError) {
        throw new DocumentKeysError(
          error.code,
          PUBLIC_REASONS[error.code] ?? "the key set could not be fetched",
          `guarded fetch ${error.code}: ${error.message}`,
        );
      }
      throw error;
    }
    if (response.status !== 200) {
      throw new DocumentKeysError("http_status", PUBLIC_REASONS.http_status!, `HTTP ${response.status}`);
    }
    const set = parseClientKeySet(response.body);
    const now = this.#now();
    const seconds =
      cacheLifetimeSeconds(response.headers, now, settings.minCacheSeconds, settings.maxCacheSeconds) ?? 0;
    const entry: Entry = {
      jwksUri,
      keys: createLocalJWKSet(set),
      fetchedAt: now,
      expiresAt: now + seconds * 1000,
    };
    this.#entries.delete(clientId);
    // no-store / no-cache: used for this request only.
    if (seconds > 0) {
      this.#entries.set(clientId, entry);
      if (this.#entries.size > MAX_ENTRIES) {
        const oldest = this.#entries.keys().next().value;
        if (oldest !== undefined) this.#entries.delete(oldest);
      }
    }
    return entry;
  }
}

const perServer = new WeakMap<ServerContext, DocumentKeySets>();

/** The document key sets of the server behind `ctx` (created on first use from its settings). */
function documentKeySets(ctx: ServerContext): DocumentKeySets {
  let sets = perServer.get(ctx);
  if (!sets) {
    sets = new DocumentKeySets({
      settings: resolveDocumentSettings(ctx.options.clientMetadataDocuments),
      now: () => ctx.now(),
    });
    perServer.set(ctx, sets);
  }
  return sets;
}

/**
 * The keys that verify `client`'s `private_key_jwt` assertions when they come from its metadata
 * document's `jwks_uri`; undefined for any other client (inline `jwks`, pre-registered clients:
 * clients/authentication.ts). For the token endpoint and every grant that authenticates a client
 * by key (the JWT bearer grant for document clients relies on it through authenticateClient).
 */
export async function documentClientKeys(
  ctx: ServerContext,
  client: ClientRecord,
): Promise<JWTVerifyGetKey | undefined> {
  if (client.source !== "metadata-document" || client.jwks || !client.jwksUri) return undefined;
  return documentKeySets(ctx).keysFor({ ...client, jwksUri: client.jwksUri });
}
