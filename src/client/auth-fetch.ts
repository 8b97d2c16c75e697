/**
 * `createAuthFetch`: a `fetch` that turns a 401 (or a 403 `insufficient_scope`) from a protected
 * resource into a correct authorization, following the spec's ordered flow ("Authorization flow"
 * 1-9), then retries the request with `Authorization: Bearer` (spec "Access token usage").
 */
import type * as oauth from "oauth4webapi";
import type { AuthorizationServerMetadata } from "../shared/metadata.js";
import { findChallenge, parseWWWAuthenticate } from "../shared/www-authenticate.js";
import type { CreateAuthFetchOptions, LogoutOutcome, LogoutResult } from "./auth-options.js";
import {
  assertOpenableAuthorizationUrl,
  createAuthorizationRequest,
  validateAuthorizationResponse,
} from "./authorization.js";
import {
  discoverAuthorizationServer,
  discoverProtectedResource,
  legacyAuthorizationServer,
  resourceMatchesServer,
} from "./discovery.js";
import { createDPoPKey, DPoPSigner, wantsDPoP } from "./dpop.js";
import { AuthorizationFlowError } from "./errors.js";
import { discard, type FetchLike } from "./http.js";
import { resolveClient } from "./registration.js";
import { revokeToken } from "./revocation.js";
import {
  asksForMore,
  type BearerChallenge,
  defaultScopeStrategy,
  readChallenge,
  type ScopeStrategy,
  selectInitialScope,
  selectStepUpScope,
  splitScope,
  withOfflineAccess,
} from "./step-up.js";
import { MemoryTokenStore } from "./stores/memory.js";
import {
  type StoredClient,
  type StoredResource,
  type StoredTokens,
  type TokenStore,
  tokensKey,
} from "./stores/types.js";
import {
  type ClientKeyMaterial,
  exchangeAuthorizationCode,
  refreshAccessToken,
  SingleFlight,
  type TokenRequestContext,
  toStoredTokens,
} from "./tokens.js";
import { type AuthorizationSessionFactory, fixedSession } from "./user-agent/session.js";

export type {
  AuthEvent,
  CreateAuthFetchOptions,
  GrantProvider,
  LogoutOutcome,
  LogoutResult,
} from "./auth-options.js";

/** Records the key a DPoP-bound token is bound to (a `Bearer` answer means the server did not bind it). */
async function bindTokens(tokens: StoredTokens, signer: DPoPSigner | undefined): Promise<StoredTokens> {
  if (!signer || !isDPoPToken(tokens)) return tokens;
  return { ...tokens, dpop_jkt: await signer.thumbprint() };
}

/** RFC 9449 §9: a 401 whose `DPoP` challenge says `use_dpop_nonce` and that carries `DPoP-Nonce`. */
function isNonceChallenge(response: Response): boolean {
  const header = response.headers.get("www-authenticate");
  if (response.status !== 401 || !header || !response.headers.has("dpop-nonce")) return false;
  return findChallenge(parseWWWAuthenticate(header), "DPoP")?.params.error === "use_dpop_nonce";
}

function isDPoPToken(tokens: StoredTokens): boolean {
  return tokens.token_type.toLowerCase() === "dpop";
}

interface Binding {
  resource: StoredResource;
  tokens: StoredTokens | undefined;
}

/** Everything the wrapper does, also usable directly (the CLI's login, status and logout). */
export class AuthClient {
  readonly #fetch: FetchLike;
  readonly #store: TokenStore;
  readonly #options: CreateAuthFetchOptions;
  readonly #strategy: ScopeStrategy;
  readonly #maxStepUps: number;
  readonly #session: AuthorizationSessionFactory | undefined;
  readonly #refreshFlight = new SingleFlight<StoredTokens | undefined>();
  readonly #authorizeFlight = new SingleFlight<StoredTokens>();
  readonly #clients = new Map<string, StoredClient>();
  readonly #keys = new Map<string, ClientKeyMaterial | undefined>();
  /** DPoP signers by issuer, and the nonces servers sent, by origin (RFC 9449 §8, §9). */
  readonly #signers = new Map<string, DPoPSigner>();
  readonly #dpopNonces = new Map<string, string>();
  /** Best-effort work that no request waits for (see `idle`). */
  readonly #background = new Set<Promise<void>>();

  constructor(options: CreateAuthFetchOptions = {}) {
    this.#options = options;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#store = options.store ?? new MemoryTokenStore();
    this.#strategy = options.scopeStrategy ?? defaultScopeStrategy(options.revision ?? "2026-07-28");
    this.#maxStepUps = options.maxStepUps ?? 2;
    if (!Number.isInteger(this.#maxStepUps) || this.#maxStepUps < 0) {
      throw new TypeError("maxStepUps must be a non-negative integer");
    }
    if (options.authorizationSession) this.#session = options.authorizationSession;
    else if (options.userAgent && options.redirectUri)
      this.#session = fixedSession(options.redirectUri, options.userAgent);
    else if (options.userAgent || options.redirectUri) {
      throw new TypeError("userAgent and redirectUri must be given together");
    }
  }

  get store(): TokenStore {
    return this.#store;
  }

  /** The wrapped fetch. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const serverUrl = request.url;
    let binding = await this.#bindingFor(serverUrl);
    let tokens = binding?.tokens ? await this.#fresh(binding.tokens) : undefined;
    let stepUps = 0;
    let reauthorized = false;
    let refreshed = false;
    let nonceRetried = false;
    for (;;) {
      const { request: outgoing, signer } = await this.#withToken(request, tokens);
      if (tokens && !outgoing.headers.has("authorization")) tokens = undefined;
      const response = await this.#fetch(outgoing);
      signer?.observe(outgoing.url, response);
      if (response.status !== 401 && response.status !== 403) return response;
      if (signer && isNonceChallenge(response)) {
        // RFC 9449 §9: the resource wants a nonce in the proof; retry once with the one it sent.
        // A second demand is the server's problem, not the token's: its answer goes back as is.
        if (nonceRetried) return response;
        nonceRetried = true;
        await discard(response);
        continue;
      }
      const challenge = readChallenge(response);
      if (!challenge) return response;
      const challenged = splitScope(challenge.scope);
      const granted = splitScope(tokens?.scope).filter((s) => s !== "offline_access");
      const isStepUp =
        tokens !== undefined &&
        (response.status === 403
          ? challenge.error === "insufficient_scope"
          : challenged.length > 0 && asksForMore(granted, challenged) && challenge.error !== "invalid_token");
      if (response.status === 403 && !isStepUp) return response;
      await discard(response);
      if (isStepUp) {
        // Spec "Client handling (scope upgrade)" 2-3: a few attempts, then a permanent failure.
        if (stepUps >= this.#maxStepUps) {
          throw new AuthorizationFlowError(
            "step_up_limit",
            `the resource still answers insufficient_scope after ${stepUps} scope upgrade(s); giving up`,
            {
              kind: "refused",
              step: "scope upgrade (spec: Client handling, retry limit)",
              status: response.status,
            },
          );
        }
        stepUps++;
        tokens = await this.#authorize(serverUrl, challenge, { previousScopes: granted, fresh: false });
        continue;
      }
      if (tokens && !refreshed && tokens.refresh_token) {
        refreshed = true;
        const renewed = await this.#refresh(tokens, true);
        if (renewed) {
          tokens = renewed;
          continue;
        }
      }
      if (reauthorized) {
        throw new AuthorizationFlowError(
          "reauthorization_loop",
          "the resource rejected a token issued moments ago; not authorizing again",
          { kind: "refused", step: "token use (spec: Access token usage)", status: response.status },
        );
      }
      reauthorized = true;
      // A token we presented was rejected: the resource's metadata may have changed (a new
      // authorization server, for instance), so nothing cached about it is trusted.
      tokens = await this.#authorize(serverUrl, challenge, { fresh: tokens !== undefined });
      binding = undefined;
    }
  };

  /** Logs in to a resource ahead of use (the CLI's `login`). */
  async login(resourceUrl: string, options: { force?: boolean } = {}): Promise<StoredTokens> {
    const binding = await this.#bindingFor(resourceUrl);
    if (binding?.tokens && !options.force) {
      const fresh = await this.#fresh(binding.tokens);
      if (fresh) return fresh;
    }
    const probe = await this.#fetch(resourceUrl, { method: "GET", redirect: "manual" });
    const challenge = probe.status === 401 || probe.status === 403 ? readChallenge(probe) : undefined;
    await discard(probe);
    return this.#authorize(resourceUrl, challenge ?? { scheme: "Bearer" }, { fresh: true });
  }

  /**
   * Logs out of one resource (its PRM `resource` value) or of all: revokes each stored refresh
   * token and live access token at the authorization server's `revocation_endpoint` when it has
   * one (RFC 7009 §2.1, authenticated as registered), then forgets the tokens locally — also when
   * revocation failed, which the outcome reports. `revoke: false` only forgets.
   */
  async logout(resource?: string, options: { revoke?: boolean } = {}): Promise<LogoutResult> {
    const outcomes: LogoutOutcome[] = [];
    let removed = 0;
    for (const [key, tokens] of await this.#store.list("tokens")) {
      if (resource !== undefined && tokens.resource !== resource) continue;
      const outcome =
        options.revoke === false ? { revocation: "skipped" as const } : await this.#revokeStored(tokens);
      outcomes.push({
        resource: tokens.resource,
        issuer: tokens.issuer,
        client_id: tokens.client_id,
        ...outcome,
      });
      await this.#store.delete("tokens", key);
      removed++;
    }
    return { removed, outcomes };
  }

  /** Resolves once background work (revoking superseded refresh tokens) has settled. */
  async idle(): Promise<void> {
    while (this.#background.size) await Promise.allSettled([...this.#background]);
  }

  async #revokeStored(tokens: StoredTokens): Promise<Pick<LogoutOutcome, "revocation" | "error">> {
    const live: Array<[string, "refresh_token" | "access_token"]> = [];
    if (tokens.refresh_token) live.push([tokens.refresh_token, "refresh_token"]);
    if (tokens.expires_at === undefined || tokens.expires_at > Date.now()) {
      live.push([tokens.access_token, "access_token"]);
    }
    if (!live.length) return { revocation: "nothing_to_revoke" };
    let metadata: AuthorizationServerMetadata;
    try {
      metadata = await this.#serverMetadata(tokens.issuer, false);
    } catch (error) {
      return { revocation: "failed", error };
    }
    if (!metadata.revocation_endpoint) return { revocation: "no_endpoint" };
    const client = await this.#revocationClient(tokens);
    let revoked = 0;
    for (const [token, hint] of live) {
      try {
        const result = await revokeToken(
          { metadata, client, fetch: this.#fetch, ...this.#keysFor(client) },
          token,
          hint,
        );
        if (result === "revoked") revoked++;
      } catch (error) {
        return { revocation: "failed", error };
      }
    }
    return { revocation: revoked ? "revoked" : "unsupported" };
  }

  /**
   * The registration to authenticate a revocation with. A pre-registered client this instance was
   * not configured with is not stored, so it is tried as a public client (RFC 7009 §2.1: the
   * `client_id` identifies it); a confidential one is then refused by the server and reported.
   */
  async #revocationClient(tokens: StoredTokens): Promise<StoredClient> {
    return (
      (await this.#clientFor(tokens.issuer, tokens.client_id)) ?? {
        issuer: tokens.issuer,
        client_id: tokens.client_id,
        token_endpoint_auth_method: "none",
        source: "preregistered",
        registered_at: 0,
      }
    );
  }

  /**
   * After a step-up: the superseded refresh token is revoked in the background (never awaited by
   * the request that triggered it, never logged); a failure becomes a `revocation_failed` event.
   */
  #revokeSuperseded(previous: StoredTokens, metadata: AuthorizationServerMetadata): void {
    const refreshToken = previous.refresh_token;
    if (!refreshToken || !metadata.revocation_endpoint) return;
    const work = (async () => {
      try {
        const client = await this.#revocationClient(previous);
        await revokeToken(
          { metadata, client, fetch: this.#fetch, ...this.#keysFor(client) },
          refreshToken,
          "refresh_token",
        );
      } catch (error) {
        this.#options.onEvent?.({
          type: "revocation_failed",
          resource: previous.resource,
          issuer: previous.issuer,
          reason: error instanceof Error ? error.message : String(error),
        });
      }
    })();
    this.#background.add(work);
    void work.finally(() => this.#background.delete(work));
  }

  // --- bindings and tokens ------------------------------------------------------------------

  async #bindingFor(serverUrl: string): Promise<Binding | undefined> {
    let best: StoredResource | undefined;
    for (const [, record] of await this.#store.list("resource")) {
      if (!resourceMatchesServer(record.metadata.resource, serverUrl)) continue;
      if (!best || record.metadata.resource.length > best.metadata.resource.length) best = record;
    }
    if (!best) return undefined;
    const tokens = await this.#tokensFor(best.metadata.resource, best.issuer);
    return { resource: best, tokens };
  }

  async #tokensFor(resource: string, issuer: string): Promise<StoredTokens | undefined> {
    let found: StoredTokens | undefined;
    for (const [, tokens] of await this.#store.list("tokens")) {
      if (tokens.resource === resource && tokens.issuer === issuer) {
        if (!found || tokens.obtained_at > found.obtained_at) found = tokens;
      }
    }
    return found;
  }

  /** Refreshes ahead of expiry when possible; returns undefined when the token is unusable. */
  async #fresh(tokens: StoredTokens): Promise<StoredTokens | undefined> {
    const skew = (this.#options.refreshSkewSeconds ?? 30) * 1000;
    if (tokens.expires_at === undefined || tokens.expires_at - skew > Date.now()) return tokens;
    if (!tokens.refresh_token) return tokens.expires_at > Date.now() ? tokens : undefined;
    return this.#refresh(tokens, false);
  }

  /**
   * Refresh, single-flight per issuer, client and resource: concurrent callers share one request.
   * The rotated refresh token is persisted before the new access token is used. `invalid_grant`
   * drops the refresh token and returns undefined, so the caller re-authorizes once.
   */
  #refresh(rejected: StoredTokens, afterRejection: boolean): Promise<StoredTokens | undefined> {
    const key = tokensKey(rejected.issuer, rejected.client_id, rejected.resource);
    return this.#refreshFlight.run(key, async () => {
      const current = (await this.#store.get("tokens", key)) ?? rejected;
      // Someone else already replaced the rejected token: use theirs.
      if (afterRejection && current.access_token !== rejected.access_token) return current;
      if (!current.refresh_token) return undefined;
      const metadata = await this.#serverMetadata(current.issuer, false);
      const client = await this.#clientFor(current.issuer, current.client_id);
      if (!client) return undefined;
      // RFC 9449 §5: a refresh token issued with DPoP is bound to the same key.
      const dpop = await this.#dpopFor(current.issuer, current.client_id, false);
      const ctx: TokenRequestContext = {
        metadata,
        client,
        fetch: this.#fetch,
        ...this.#keysFor(client),
        ...(dpop && { dpop }),
      };
      let response: oauth.TokenEndpointResponse;
      try {
        response = await refreshAccessToken(ctx, {
          refreshToken: current.refresh_token,
          resource: current.resource,
        });
      } catch (error) {
        if (error instanceof AuthorizationFlowError && error.kind === "oauth") {
          // invalid_grant (or any refusal): the grant is gone; keep nothing that would loop.
          const { refresh_token: _dropped, ...rest } = current;
          await this.#store.set("tokens", key, { ...rest, expires_at: 0 });
          return undefined;
        }
        throw error;
      }
      const next = await bindTokens(
        toStoredTokens(
          response,
          { issuer: current.issuer, client_id: current.client_id, resource: current.resource },
          current,
        ),
        dpop,
      );
      await this.#store.set("tokens", key, next);
      this.#options.onEvent?.({ type: "refreshed", resource: current.resource, issuer: current.issuer });
      return next;
    });
  }

  /**
   * The request with the token. A DPoP-bound token goes with the DPoP scheme and a fresh proof
   * over method, URL and token (RFC 9449 §7.1); a bound token whose key is gone is not sent.
   */
  async #withToken(
    request: Request,
    tokens: StoredTokens | undefined,
  ): Promise<{ request: Request; signer?: DPoPSigner }> {
    const copy = request.clone();
    if (!tokens) return { request: copy };
    const headers = new Headers(copy.headers);
    if (isDPoPToken(tokens)) {
      const signer = await this.#dpopFor(tokens.issuer, tokens.client_id, false);
      if (!signer || (tokens.dpop_jkt !== undefined && tokens.dpop_jkt !== (await signer.thumbprint()))) {
        return { request: copy };
      }
      headers.set("authorization", `DPoP ${tokens.access_token}`);
      headers.set("dpop", await signer.proof(copy.method, copy.url, tokens.access_token));
      return { request: new Request(copy, { headers }), signer };
    }
    // RFC 6750 §2.1 and spec "Access token usage": the header on every request, never the query.
    headers.set("authorization", `Bearer ${tokens.access_token}`);
    return { request: new Request(copy, { headers }) };
  }

  /**
   * The DPoP signer of a registration (one key per issuer and client id), from memory or the
   * store; with `create`, a new key is made and persisted before it is first used.
   */
  async #dpopFor(issuer: string, clientId: string, create: boolean): Promise<DPoPSigner | undefined> {
    const cached = this.#signers.get(issuer);
    if (cached?.clientId === clientId) return cached;
    let stored = await this.#store.get("dpop", issuer);
    if (stored && (stored.client_id !== clientId || stored.issuer !== issuer)) stored = undefined;
    if (!stored) {
      if (!create) return undefined;
      stored = await createDPoPKey(issuer, clientId);
      await this.#store.set("dpop", issuer, stored);
    }
    const signer = new DPoPSigner(stored, this.#dpopNonces);
    this.#signers.set(issuer, signer);
    return signer;
  }

  async #clientFor(issuer: string, clientId: string): Promise<StoredClient | undefined> {
    const cached = this.#clients.get(issuer);
    if (cached?.client_id === clientId) return cached;
    const pre = this.#options.preregisteredClients?.[issuer];
    if (pre?.client_id === clientId) {
      return {
        issuer,
        client_id: pre.client_id,
        ...(pre.client_secret !== undefined && { client_secret: pre.client_secret }),
        token_endpoint_auth_method:
          pre.token_endpoint_auth_method ?? (pre.client_secret ? "client_secret_basic" : "none"),
        source: "preregistered",
        registered_at: 0,
      };
    }
    const stored = await this.#store.get("client", issuer);
    return stored?.client_id === clientId && stored.issuer === issuer ? stored : undefined;
  }

  #keysFor(client: StoredClient): { keys?: ClientKeyMaterial } {
    const keys = this.#keys.get(client.issuer) ?? this.#options.clientKeys;
    return keys ? { keys } : {};
  }

  async #serverMetadata(issuer: string, fresh: boolean): Promise<AuthorizationServerMetadata> {
    const cached = fresh ? undefined : await this.#store.get("server", issuer);
    if (cached) return cached.metadata;
    const metadata = await discoverAuthorizationServer({ issuer, fetch: this.#fetch });
    await this.#store.set("server", issuer, { metadata, fetched_at: Date.now() });
    return metadata;
  }

  // --- the authorization flow -------------------------------------------------------------

  #authorize(
    serverUrl: string,
    challenge: BearerChallenge,
    options: { previousScopes?: string[]; fresh: boolean },
  ): Promise<StoredTokens> {
    const key = `${options.previousScopes ? "step-up" : "auth"} ${new URL(serverUrl).origin}${new URL(serverUrl).pathname} ${challenge.scope ?? ""}`;
    return this.#authorizeFlight.run(key, () => this.#runAuthorization(serverUrl, challenge, options));
  }

  async #runAuthorization(
    serverUrl: string,
    challenge: BearerChallenge,
    options: { previousScopes?: string[]; fresh: boolean },
  ): Promise<StoredTokens> {
    // Steps 1-2: protected resource metadata, then the authorization server.
    const { resource, metadata } = await this.#discover(serverUrl, challenge, options.fresh);
    const resourceValue = resource.metadata.resource;

    // Step 5: scope by the spec's priority, or the upgrade strategy.
    let scopes = options.previousScopes
      ? selectStepUpScope(this.#strategy, options.previousScopes, splitScope(challenge.scope))
      : selectInitialScope(challenge.scope, resource.metadata.scopes_supported);
    scopes = withOfflineAccess(
      scopes,
      metadata.scopes_supported,
      this.#options.offlineAccess !== false && !this.#options.grant,
    );
    const scope = scopes.length ? scopes.join(" ") : undefined;
    this.#options.onEvent?.({
      type: "authorization_started",
      resource: resourceValue,
      issuer: metadata.issuer,
      scope,
      stepUp: options.previousScopes !== undefined,
    });

    const dpopWanted = wantsDPoP(this.#options.dpop ?? "auto", metadata, {
      offersDPoP: challenge.dpopOffered === true || challenge.scheme.toLowerCase() === "dpop",
      boundTokensRequired: resource.metadata.dpop_bound_access_tokens_required === true,
      ...(resource.metadata.dpop_signing_alg_values_supported && {
        algorithms: resource.metadata.dpop_signing_alg_values_supported,
      }),
    });
    let tokens: StoredTokens;
    if (this.#options.grant) {
      const result = await this.#options.grant({
        metadata,
        resource: resourceValue,
        scope,
        fetch: this.#fetch,
        ...(dpopWanted && {
          dpop: async (clientId: string) => {
            const signer = await this.#dpopFor(metadata.issuer, clientId, true);
            if (!signer) throw new Error("unreachable: a DPoP key is created on demand");
            return signer;
          },
        }),
      });
      this.#clients.set(metadata.issuer, result.client);
      this.#keys.set(metadata.issuer, result.keys);
      tokens = await bindTokens(
        toStoredTokens(result.response, {
          issuer: metadata.issuer,
          client_id: result.client.client_id,
          resource: resourceValue,
          requestedScope: scope,
        }),
        dpopWanted ? await this.#dpopFor(metadata.issuer, result.client.client_id, false) : undefined,
      );
    } else {
      tokens = await this.#authorizationCode(metadata, resourceValue, scope, dpopWanted);
    }
    const key = tokensKey(tokens.issuer, tokens.client_id, tokens.resource);
    const previous = await this.#store.get("tokens", key);
    await this.#store.set("tokens", key, tokens);
    if (
      options.previousScopes !== undefined &&
      this.#options.revokeSupersededRefreshTokens === true &&
      previous?.refresh_token !== undefined &&
      tokens.refresh_token !== undefined &&
      previous.refresh_token !== tokens.refresh_token
    ) {
      // RFC 7009 §1: a token the client no longer needs is revoked, so a step-up does not leave
      // a second live grant behind. Only after the new tokens are stored.
      this.#revokeSuperseded(previous, metadata);
    }
    this.#options.onEvent?.({
      type: "authorized",
      resource: resourceValue,
      issuer: metadata.issuer,
      scope: tokens.scope,
    });
    return tokens;
  }

  async #discover(
    serverUrl: string,
    challenge: BearerChallenge,
    fresh: boolean,
  ): Promise<{ resource: StoredResource; metadata: AuthorizationServerMetadata }> {
    // Warm path: metadata cached for this resource and the challenge points at the same document.
    if (!fresh) {
      const binding = await this.#bindingFor(serverUrl);
      if (binding && (!challenge.resourceMetadata || challenge.resourceMetadata === binding.resource.url)) {
        const server = await this.#store.get("server", binding.resource.issuer);
        if (server) return { resource: binding.resource, metadata: server.metadata };
      }
    }
    let discovered: { metadata: StoredResource["metadata"]; url: string } | undefined;
    try {
      discovered = await discoverProtectedResource({
        serverUrl,
        resourceMetadataUrl: challenge.resourceMetadata,
        fetch: this.#fetch,
      });
    } catch (error) {
      if (
        !(
          this.#options.legacyFallback &&
          error instanceof AuthorizationFlowError &&
          error.code === "prm_not_found"
        )
      ) {
        throw error;
      }
    }
    if (!discovered) {
      // 2025-03-26 fallback: no PRM; the server's origin is the authorization server.
      const metadata = await legacyAuthorizationServer({ serverUrl, fetch: this.#fetch });
      const url = new URL(serverUrl);
      const resource: StoredResource = {
        metadata: {
          resource: `${url.origin}${url.pathname}`.replace(/\/+$/, ""),
          authorization_servers: [metadata.issuer],
        },
        url: "",
        issuer: metadata.issuer,
        fetched_at: Date.now(),
      };
      await this.#store.set("server", metadata.issuer, { metadata, fetched_at: Date.now() });
      await this.#store.set("resource", resource.metadata.resource, resource);
      return { resource, metadata };
    }
    const servers = discovered.metadata.authorization_servers;
    const issuer = await this.#chooseServer(servers);
    const previous = await this.#store.get("resource", discovered.metadata.resource);
    if (previous && previous.issuer !== issuer) {
      // The resource moved to another authorization server: tokens from the old one are useless
      // there (spec "Access token usage" 3), and its client registration stays with it.
      for (const [key, tokens] of await this.#store.list("tokens")) {
        if (tokens.resource === discovered.metadata.resource && tokens.issuer !== issuer) {
          await this.#store.delete("tokens", key);
        }
      }
    }
    const metadata = await this.#serverMetadata(issuer, fresh);
    const resource: StoredResource = {
      metadata: discovered.metadata,
      url: discovered.url,
      issuer,
      fetched_at: Date.now(),
    };
    await this.#store.set("resource", resource.metadata.resource, resource);
    this.#options.onEvent?.({ type: "discovered", resource: resource.metadata.resource, issuer });
    return { resource, metadata };
  }

  async #chooseServer(servers: readonly string[]): Promise<string> {
    const chosen = this.#options.chooseAuthorizationServer
      ? await this.#options.chooseAuthorizationServer(servers)
      : (servers.find((s) => this.#options.preregisteredClients?.[s]) ?? servers[0]);
    if (chosen === undefined || !servers.includes(chosen)) {
      throw new AuthorizationFlowError(
        "invalid_document",
        "the chosen authorization server is not one the resource lists",
        { kind: "refused", step: "authorization server selection (RFC 9728 §7.6)" },
      );
    }
    return chosen;
  }

  async #authorizationCode(
    metadata: AuthorizationServerMetadata,
    resource: string,
    scope: string | undefined,
    dpopWanted: boolean,
  ): Promise<StoredTokens> {
    if (!this.#session) {
      throw new AuthorizationFlowError(
        "no_interactive_authorization",
        "authorization is required but no user agent is configured (pass userAgent + redirectUri, or authorizationSession)",
        { kind: "action", step: "user agent" },
      );
    }
    const session = await this.#session();
    try {
      // Step 4: registration, bound to this issuer.
      const known = await this.#store.get("client", metadata.issuer);
      const client = await resolveClient({
        issuer: metadata.issuer,
        metadata,
        store: this.#store,
        fetch: this.#fetch,
        redirectUri: session.redirectUri,
        ...(this.#options.preregisteredClients && { preregistered: this.#options.preregisteredClients }),
        ...(this.#options.clientMetadataUrl && { clientMetadataUrl: this.#options.clientMetadataUrl }),
        ...(this.#options.clientName && { clientName: this.#options.clientName }),
        ...(this.#options.registrationMetadata && {
          registrationMetadata: this.#options.registrationMetadata,
        }),
      });
      if (known?.client_id !== client.client_id) {
        this.#options.onEvent?.({ type: "registered", issuer: metadata.issuer, source: client.source });
      }
      this.#clients.set(metadata.issuer, client);
      // Step 5: PKCE, resource, state, scope; the issuer is recorded in `pending` before opening.
      const { url, pending } = await createAuthorizationRequest({
        metadata,
        client,
        redirectUri: session.redirectUri,
        resource,
        scope,
      });
      assertOpenableAuthorizationUrl(url);
      // Step 6: the user agent.
      let callback: string | URL;
      try {
        callback = await session.open(url);
      } catch (cause) {
        if (cause instanceof AuthorizationFlowError) throw cause;
        throw new AuthorizationFlowError("user_agent_failed", "the user agent did not return a callback", {
          kind: "action",
          step: "user agent",
          cause,
        });
      }
      // Step 7: state, then iss, then the token request with code_verifier and resource.
      const params = validateAuthorizationResponse(pending, metadata, callback);
      const dpop = dpopWanted ? await this.#dpopFor(metadata.issuer, client.client_id, true) : undefined;
      const response = await exchangeAuthorizationCode(
        { metadata, client, fetch: this.#fetch, ...this.#keysFor(client), ...(dpop && { dpop }) },
        {
          callbackParameters: params,
          redirectUri: pending.redirectUri,
          codeVerifier: pending.codeVerifier,
          resource: pending.resource,
          scope,
        },
      );
      return await bindTokens(
        toStoredTokens(response, {
          issuer: metadata.issuer,
          client_id: client.client_id,
          resource,
          requestedScope: scope,
        }),
        dpop,
      );
    } finally {
      await session.close?.();
    }
  }
}

/**
 * A `fetch` that authorizes itself (see {@link AuthClient}). Options are validated here, so a bad
 * configuration fails at creation, not on the first request.
 */
export function createAuthFetch(options: CreateAuthFetchOptions = {}): typeof fetch {
  const client = new AuthClient(options);
  return client.fetch as typeof fetch;
}
