/**
 * `AuthClient` and `createAuthFetch`: a `fetch` that turns a 401 (or a 403 `insufficient_scope`)
 * from a protected resource into a correct authorization, following the spec's ordered flow
 * ("Authorization flow" 1-9), then retries the request with `Authorization: Bearer` (spec "Access
 * token usage"). The rest of flow/ is its private machinery around one `AuthState` (state.ts).
 */

import { GatehouseTypeError } from "../../shared/errors.js";
import { DEFAULT_REVISION } from "../../shared/revision.js";
import { SingleFlight } from "../../shared/single-flight.js";
import { AuthorizationFlowError } from "../errors.js";
import { discard, type FetchLike } from "../protocol/http.js";
import { validateIssuerCompatibility } from "../protocol/issuer-compat.js";
import { asksForMore, defaultScopeStrategy, readChallenge, splitScope } from "../protocol/step-up.js";
import { MemoryTokenStore } from "../stores/memory.js";
import type { StoredTokens, TokenStore } from "../stores/types.js";
import { type AuthorizationSessionFactory, fixedSession } from "../user-agent/session.js";
import { authorize } from "./authorize.js";
import { logout } from "./logout.js";
import type { CreateAuthFetchOptions, LogoutResult } from "./options.js";
import { freshTokens, refreshTokens } from "./refresh.js";
import { isNonceChallenge, withToken } from "./resource-request.js";
import { type AuthState, bindingFor } from "./state.js";

export type {
  AuthEvent,
  CreateAuthFetchOptions,
  DeviceAuthorizationOptions,
  DeviceAuthorizationPrompt,
  LogoutOutcome,
  LogoutResult,
} from "./options.js";

/** Everything the wrapper does, also usable directly (the CLI's login, status and logout). */
export class AuthClient {
  readonly #state: AuthState;
  readonly #maxStepUps: number;

  constructor(options: CreateAuthFetchOptions = {}) {
    const fetch: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    const store = options.store ?? new MemoryTokenStore();
    const strategy = options.scopeStrategy ?? defaultScopeStrategy(options.revision ?? DEFAULT_REVISION);
    const maxStepUps = options.maxStepUps ?? 2;
    if (!Number.isInteger(maxStepUps) || maxStepUps < 0) {
      throw new GatehouseTypeError("ERR_INVALID_OPTION", "maxStepUps must be a non-negative integer");
    }
    if (
      options.deviceAuthorization &&
      (options.authorizationSession || options.userAgent || options.redirectUri)
    ) {
      throw new GatehouseTypeError(
        "ERR_INVALID_OPTION",
        "deviceAuthorization replaces the browser flow: do not also pass userAgent, redirectUri or authorizationSession",
      );
    }
    // Refused at construction, not at the first login: a mistyped setting never half-applies.
    if (options.issuerCompatibility) validateIssuerCompatibility(options.issuerCompatibility, true);
    let session: AuthorizationSessionFactory | undefined;
    if (options.authorizationSession) session = options.authorizationSession;
    else if (options.userAgent && options.redirectUri)
      session = fixedSession(options.redirectUri, options.userAgent);
    else if (options.userAgent || options.redirectUri) {
      throw new GatehouseTypeError("ERR_INVALID_OPTION", "userAgent and redirectUri must be given together");
    }
    this.#maxStepUps = maxStepUps;
    this.#state = {
      options,
      fetch,
      store,
      strategy,
      session,
      refreshFlight: new SingleFlight<StoredTokens | undefined>(),
      authorizeFlight: new SingleFlight<StoredTokens>(),
      clients: new Map(),
      keys: new Map(),
      signers: new Map(),
      dpopNonces: new Map(),
      background: new Set(),
    };
  }

  get store(): TokenStore {
    return this.#state.store;
  }

  /** The wrapped fetch. */
  readonly fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const serverUrl = request.url;
    let binding = await bindingFor(this.#state, serverUrl);
    let tokens = binding?.tokens ? await freshTokens(this.#state, binding.tokens) : undefined;
    let stepUps = 0;
    let reauthorized = false;
    let refreshed = false;
    let nonceRetried = false;
    for (;;) {
      const { request: outgoing, signer } = await withToken(this.#state, request, tokens);
      if (tokens && !outgoing.headers.has("authorization")) tokens = undefined;
      const response = await this.#state.fetch(outgoing);
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
      const challenge = readChallenge(response, signer ? "DPoP" : "Bearer");
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
        tokens = await authorize(this.#state, serverUrl, challenge, {
          previousScopes: granted,
          fresh: false,
        });
        continue;
      }
      if (tokens && !refreshed && tokens.refresh_token) {
        refreshed = true;
        const renewed = await refreshTokens(this.#state, tokens, true);
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
      tokens = await authorize(this.#state, serverUrl, challenge, { fresh: tokens !== undefined });
      binding = undefined;
    }
  };

  /**
   * Logs in to a resource ahead of use (the CLI's `login`). With `scope` (space-separated), the
   * login asks for those scopes: while stored tokens hold them all they are kept (unless `force`);
   * otherwise, over stored tokens, it is a scope upgrade ahead of the resource's own 403 (spec
   * "Client handling (scope upgrade)": under 2026-07-28 the union of the stored and the asked
   * scopes, so nothing held is lost), and without any, the asked scopes alone.
   */
  async login(resourceUrl: string, options: { force?: boolean; scope?: string } = {}): Promise<StoredTokens> {
    const asked = splitScope(options.scope);
    const binding = await bindingFor(this.#state, resourceUrl);
    const held = binding?.tokens
      ? splitScope(binding.tokens.scope).filter((s) => s !== "offline_access")
      : undefined;
    if (binding?.tokens && !options.force && !asksForMore(held ?? [], asked)) {
      const fresh = await freshTokens(this.#state, binding.tokens);
      if (fresh) return fresh;
    }
    const probe = await this.#state.fetch(resourceUrl, { method: "GET", redirect: "manual" });
    const probed = probe.status === 401 || probe.status === 403 ? readChallenge(probe) : undefined;
    await discard(probe);
    const challenge = probed ?? { scheme: "Bearer" };
    if (!asked.length) return authorize(this.#state, resourceUrl, challenge, { fresh: true });
    return authorize(
      this.#state,
      resourceUrl,
      { ...challenge, scope: asked.join(" ") },
      { fresh: true, ...(held && { previousScopes: held }) },
    );
  }

  /**
   * Logs out of one resource (its PRM `resource` value) or of all: revokes each stored refresh
   * token and live access token at the authorization server's `revocation_endpoint` when it has
   * one (RFC 7009 §2.1, authenticated as registered), then forgets the tokens locally — also when
   * revocation failed, which the outcome reports. `revoke: false` only forgets.
   */
  logout(resource?: string, options: { revoke?: boolean } = {}): Promise<LogoutResult> {
    return logout(this.#state, resource, options);
  }

  /** Resolves once background work (revoking superseded refresh tokens) has settled. */
  async idle(): Promise<void> {
    while (this.#state.background.size) await Promise.allSettled([...this.#state.background]);
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
