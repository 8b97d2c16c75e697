/**
 * The state an {@link AuthClient} shares between its parts (refresh, resource requests, the
 * authorization flow, logout), and the look-ups they all make: registrations, client keys,
 * authorization server metadata, DPoP signers and the stored binding of a resource.
 * Internal to the client; not exported from `src/client/index.ts`.
 */
import type { TokenEndpointResponse } from "oauth4webapi";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import type { SingleFlight } from "../../shared/single-flight.js";
import { discoverAuthorizationServerVia, resourceMatchesServer } from "../protocol/discovery.js";
import { createDPoPKey, DPoPSigner } from "../protocol/dpop.js";
import type { FetchLike } from "../protocol/http.js";
import {
  type CompatibilityReporter,
  type CompatibilitySettingName,
  compatibilityFor,
} from "../protocol/issuer-compat.js";
import { type PreregisteredClient, preregisteredClient } from "../protocol/registration.js";
import type { ScopeStrategy } from "../protocol/step-up.js";
import { type ClientKeyMaterial, toStoredTokens } from "../protocol/tokens.js";
import type {
  StoredClient,
  StoredResource,
  StoredServer,
  StoredTokens,
  TokenStore,
} from "../stores/types.js";
import type { AuthorizationSessionFactory } from "../user-agent/session.js";
import type { CreateAuthFetchOptions } from "./options.js";

/** One client instance's configuration, caches and in-flight work. */
export interface AuthState {
  readonly fetch: FetchLike;
  readonly store: TokenStore;
  readonly options: CreateAuthFetchOptions;
  readonly strategy: ScopeStrategy;
  readonly session: AuthorizationSessionFactory | undefined;
  readonly refreshFlight: SingleFlight<StoredTokens | undefined>;
  readonly authorizeFlight: SingleFlight<StoredTokens>;
  readonly clients: Map<string, StoredClient>;
  readonly keys: Map<string, ClientKeyMaterial | undefined>;
  /** DPoP signers by issuer, and the nonces servers sent, by origin (RFC 9449 §8, §9). */
  readonly signers: Map<string, DPoPSigner>;
  readonly dpopNonces: Map<string, string>;
  /** Best-effort work that no request waits for (see `AuthClient.idle`). */
  readonly background: Set<Promise<void>>;
}

/** A stored resource that matches a server URL, with its newest tokens. */
export interface Binding {
  resource: StoredResource;
  tokens: StoredTokens | undefined;
}

export function isDPoPToken(tokens: StoredTokens): boolean {
  return tokens.token_type.toLowerCase() === "dpop";
}

/** Records the key a DPoP-bound token is bound to (a `Bearer` answer means the server did not bind it). */
export async function bindTokens(
  tokens: StoredTokens,
  signer: DPoPSigner | undefined,
): Promise<StoredTokens> {
  if (!signer || !isDPoPToken(tokens)) return tokens;
  return { ...tokens, dpop_jkt: await signer.thumbprint() };
}

/**
 * The tokens a new authorization (any grant) issued, as stored: for this issuer, client and
 * resource, with the requested scope when the response names none (RFC 6749 §5.1), and the DPoP
 * key they are bound to.
 */
export function issuedTokens(
  response: TokenEndpointResponse,
  base: { issuer: string; client_id: string; resource: string; requestedScope: string | undefined },
  signer: DPoPSigner | undefined,
): Promise<StoredTokens> {
  return bindTokens(toStoredTokens(response, base), signer);
}

/** The stored resource whose `resource` value matches `serverUrl` most specifically, and its tokens. */
export async function bindingFor(state: AuthState, serverUrl: string): Promise<Binding | undefined> {
  let best: StoredResource | undefined;
  for (const [, record] of await state.store.list("resource")) {
    if (!resourceMatchesServer(record.metadata.resource, serverUrl)) continue;
    if (!best || record.metadata.resource.length > best.metadata.resource.length) best = record;
  }
  if (!best) return undefined;
  const tokens = await tokensFor(state, best.metadata.resource, best.issuer);
  return { resource: best, tokens };
}

async function tokensFor(
  state: AuthState,
  resource: string,
  issuer: string,
): Promise<StoredTokens | undefined> {
  let found: StoredTokens | undefined;
  for (const [, tokens] of await state.store.list("tokens")) {
    if (tokens.resource === resource && tokens.issuer === issuer) {
      if (!found || tokens.obtained_at > found.obtained_at) found = tokens;
    }
  }
  return found;
}

/**
 * The DPoP signer of a registration (one key per issuer and client id), from memory or the
 * store; with `create`, a new key is made and persisted before it is first used.
 */
export async function dpopFor(
  state: AuthState,
  issuer: string,
  clientId: string,
  create: boolean,
): Promise<DPoPSigner | undefined> {
  const cached = state.signers.get(issuer);
  if (cached?.clientId === clientId) return cached;
  let stored = await state.store.get("dpop", issuer);
  if (stored && (stored.client_id !== clientId || stored.issuer !== issuer)) stored = undefined;
  if (!stored) {
    if (!create) return undefined;
    stored = await createDPoPKey(issuer, clientId);
    await state.store.set("dpop", issuer, stored);
  }
  const signer = new DPoPSigner(stored, state.dpopNonces);
  state.signers.set(issuer, signer);
  return signer;
}

/**
 * The pre-registered clients, with the one configured for an issuer also found under the issuer
 * its server really uses when a compatibility setting (an alias, a pinned tenant) made them differ:
 * the operator names the issuer the resource names, and the credentials follow it.
 */
export function preregisteredClients(
  state: AuthState,
  issuer: string,
): Readonly<Record<string, PreregisteredClient>> | undefined {
  const configured = state.options.preregisteredClients;
  if (!configured || Object.hasOwn(configured, issuer)) return configured;
  const named = compatibilityFor(state.options.issuerCompatibility, issuer)?.configured;
  const pre = named === undefined ? undefined : configured[named];
  return pre ? { ...configured, [issuer]: pre } : configured;
}

export async function clientFor(
  state: AuthState,
  issuer: string,
  clientId: string,
): Promise<StoredClient | undefined> {
  const cached = state.clients.get(issuer);
  if (cached?.client_id === clientId) return cached;
  const pre = preregisteredClients(state, issuer)?.[issuer];
  if (pre?.client_id === clientId) return preregisteredClient(issuer, pre);
  const stored = await state.store.get("client", issuer);
  return stored?.client_id === clientId && stored.issuer === issuer ? stored : undefined;
}

export function keysFor(state: AuthState, client: StoredClient): { keys?: ClientKeyMaterial } {
  const keys = state.keys.get(client.issuer) ?? state.options.clientKeys;
  return keys ? { keys } : {};
}

export async function serverMetadata(
  state: AuthState,
  issuer: string,
  fresh: boolean,
): Promise<AuthorizationServerMetadata> {
  return (await serverRecord(state, issuer, fresh)).metadata;
}

/** Reports each use of an issuer compatibility setting as a `compatibility` event. */
export function compatibilityReporter(state: AuthState): CompatibilityReporter {
  return (use) => state.options.onEvent?.({ type: "compatibility", ...use });
}

/**
 * The stored metadata of `issuer` and how it was discovered, discovering it unless cached. Under
 * the operator's compatibility settings for this issuer (issuer-compat.ts) the document may name
 * another issuer (an alias, a tenant template): the record then carries that issuer, which every
 * later check uses, is stored under both names (a refresh looks it up by the tokens' issuer), and
 * lists the settings applied to it.
 */
export async function serverRecord(state: AuthState, issuer: string, fresh: boolean): Promise<StoredServer> {
  const cached = fresh ? undefined : await state.store.get("server", issuer);
  if (cached) return cached;
  const compatibility = compatibilityFor(state.options.issuerCompatibility, issuer);
  const report = compatibilityReporter(state);
  const applied = new Set<CompatibilitySettingName>();
  const { metadata, discoveredVia } = await discoverAuthorizationServerVia({
    issuer,
    fetch: state.fetch,
    ...(compatibility && {
      compatibility: compatibility.settings,
      onCompatibility: (use) => {
        applied.add(use.setting);
        report(use);
      },
    }),
  });
  const record: StoredServer = {
    metadata,
    discovered_via: discoveredVia,
    fetched_at: Date.now(),
    ...(applied.size > 0 && { compatibility: [...applied] }),
  };
  await state.store.set("server", issuer, record);
  if (metadata.issuer !== issuer) await state.store.set("server", metadata.issuer, record);
  return record;
}
