/**
 * Client registration in the spec's order ("Client registration"): pre-registered information for
 * this server, then a Client ID Metadata Document URL when the authorization server supports it,
 * then dynamic client registration (RFC 7591), then an error asking for client information.
 *
 * Registrations are bound to the issuer that issued them: the store key is the issuer, and the
 * client id and secret of one issuer are never offered to another (mix-up defence).
 */
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import { ClientRegistrationResponseSchema } from "../../shared/metadata.js";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import { AuthorizationFlowError } from "../errors.js";
import { clientKey, type StoredClient, type TokenStore } from "../stores/types.js";
import { assertSecureUrl, type FetchLike, readJsonObject, send } from "./http.js";

/** Static credentials for one authorization server (spec "Pre-registration"). */
export interface PreregisteredClient {
  client_id: string;
  client_secret?: string;
  /** Defaults to `client_secret_basic` with a secret (RFC 7591 §2 default), `none` without. */
  token_endpoint_auth_method?: "client_secret_basic" | "client_secret_post" | "none";
}

/** The stored form of pre-registered credentials for `issuer` (spec "Pre-registration"). */
export function preregisteredClient(issuer: string, pre: PreregisteredClient): StoredClient {
  return {
    issuer,
    client_id: pre.client_id,
    ...(pre.client_secret !== undefined && { client_secret: pre.client_secret }),
    // RFC 7591 §2: client_secret_basic is the default method for a client with a secret.
    token_endpoint_auth_method:
      pre.token_endpoint_auth_method ?? (pre.client_secret ? "client_secret_basic" : "none"),
    source: "preregistered",
    registered_at: 0,
  };
}

export interface ResolveClientOptions {
  issuer: string;
  metadata: AuthorizationServerMetadata;
  store: TokenStore;
  fetch: FetchLike;
  redirectUri: string;
  /**
   * The redirect URI's port was chosen by the user for a server that registers exact ports: a
   * saved registration is reused only for this very URI (else the client registers again).
   */
  exactRedirectUri?: boolean;
  /** Pre-registered credentials, by exact issuer. */
  preregistered?: Readonly<Record<string, PreregisteredClient>>;
  /** The HTTPS URL of this client's Client ID Metadata Document. */
  clientMetadataUrl?: string;
  /** Sent as `client_name` in dynamic registration. */
  clientName?: string;
  /** Extra RFC 7591 metadata for dynamic registration (e.g. `client_uri`, `software_id`). */
  registrationMetadata?: Record<string, unknown>;
}

function sameRedirect(registered: string, wanted: string, exactPort: boolean): boolean {
  if (registered === wanted) return true;
  // A port the user pinned (`--callback-port`) is pinned because the server matches it exactly:
  // a registration for another port would be refused there at the authorization request.
  if (exactPort) return false;
  // RFC 8252 §7.3: for loopback IP redirect URIs the port may vary; everything else must match.
  try {
    const a = new URL(registered);
    const b = new URL(wanted);
    return (
      a.protocol === "http:" &&
      isLoopbackHost(a.hostname) &&
      a.hostname === b.hostname &&
      a.protocol === b.protocol &&
      a.pathname === b.pathname &&
      a.search === b.search
    );
  } catch {
    return false;
  }
}

/**
 * Client ID Metadata Document rule: the client id is an https URL with a path component (and no
 * fragment), since it must equal the URL the document is served from.
 */
export function assertClientMetadataUrl(value: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch (cause) {
    throw new AuthorizationFlowError("client_information_required", "clientMetadataUrl is not a URL", {
      kind: "action",
      step: "client registration (Client ID Metadata Document)",
      cause,
    });
  }
  if (url.protocol !== "https:" || url.pathname === "/" || url.hash || value.includes("#")) {
    throw new AuthorizationFlowError(
      "client_information_required",
      "clientMetadataUrl must be an https URL with a path and no fragment",
      { kind: "action", step: "client registration (Client ID Metadata Document)" },
    );
  }
}

/** Picks the token endpoint authentication method to ask for in dynamic registration. */
function chooseAuthMethod(metadata: AuthorizationServerMetadata): string {
  // RFC 8414 §2: when the list is omitted the default is client_secret_basic.
  const supported = metadata.token_endpoint_auth_methods_supported ?? ["client_secret_basic"];
  for (const method of ["none", "client_secret_basic", "client_secret_post"]) {
    if (supported.includes(method)) return method;
  }
  return "none";
}

/** Dynamic client registration (RFC 7591 §3), asking for refresh tokens (spec "Refresh tokens"). */
export async function registerDynamically(options: ResolveClientOptions): Promise<StoredClient> {
  const endpoint = options.metadata.registration_endpoint;
  const step = `dynamic client registration (RFC 7591, ${endpoint ?? "no registration_endpoint"})`;
  if (!endpoint) {
    throw new AuthorizationFlowError(
      "client_information_required",
      `${options.issuer} publishes no registration_endpoint; register a client there and pass its client_id`,
      { kind: "action", step, issuer: options.issuer },
    );
  }
  assertSecureUrl(endpoint, step);
  const method = chooseAuthMethod(options.metadata);
  const redirect = new URL(options.redirectUri);
  const body = {
    client_name: options.clientName ?? "Gatehouse client",
    redirect_uris: [options.redirectUri],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: method,
    // OpenID Connect Dynamic Client Registration §2: loopback and custom-scheme redirects are native.
    application_type: redirect.protocol === "https:" && !isLoopbackHost(redirect.hostname) ? "web" : "native",
    ...options.registrationMetadata,
  };
  const response = await send(
    options.fetch,
    endpoint,
    {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(body),
    },
    step,
  );
  const json = await readJsonObject(response, step, "registration response", endpoint);
  if (response.status !== 201 && response.status !== 200) {
    const error = typeof json.error === "string" ? json.error : "unknown_error";
    throw new AuthorizationFlowError("registration_failed", `registration refused with ${error}`, {
      kind: "oauth",
      step,
      status: response.status,
      oauthError: {
        error,
        ...(typeof json.error_description === "string" && { error_description: json.error_description }),
      },
    });
  }
  const parsed = ClientRegistrationResponseSchema.safeParse(json);
  if (!parsed.success) {
    throw new AuthorizationFlowError("invalid_document", "registration response lacks a client_id", {
      kind: "nonconforming",
      step,
      status: response.status,
    });
  }
  const info = parsed.data;
  return {
    issuer: options.issuer,
    client_id: info.client_id,
    ...(info.client_secret !== undefined && { client_secret: info.client_secret }),
    token_endpoint_auth_method:
      info.token_endpoint_auth_method ??
      (info.client_secret ? (method === "none" ? "client_secret_basic" : method) : "none"),
    source: "dynamic",
    redirect_uris: info.redirect_uris ?? [options.redirectUri],
    registered_at: Date.now(),
  };
}

/**
 * Finds or obtains the client identity to use with `issuer`, in the spec's order. A registration
 * obtained here is saved under the issuer; one saved under another issuer is never consulted.
 */
export async function resolveClient(options: ResolveClientOptions): Promise<StoredClient> {
  const { issuer, metadata } = options;
  // 1. Pre-registered information for this server (exact issuer). It is saved like any other
  // registration: the tokens it obtains name its client id, and a later refresh or logout (a
  // `gatehouse fetch` after `gatehouse login --client-id --issuer`, which names no client) finds
  // the client there, instead of registering anew and asking the user to log in again.
  const stored = await options.store.get("client", clientKey(issuer));
  const pre = options.preregistered?.[issuer];
  if (pre) {
    const client = preregisteredClient(issuer, pre);
    if (
      stored?.issuer !== issuer ||
      stored.source !== "preregistered" ||
      stored.client_id !== client.client_id ||
      stored.client_secret !== client.client_secret ||
      stored.token_endpoint_auth_method !== client.token_endpoint_auth_method
    ) {
      await options.store.set("client", clientKey(issuer), client);
    }
    return client;
  }
  const cimdSupported = metadata.client_id_metadata_document_supported === true;
  if (stored && stored.issuer === issuer) {
    // A saved pre-registered client stays this issuer's client: its redirect URIs are the
    // operator's registration, not something a new registration could improve on.
    const stillValid =
      stored.source === "preregistered" ||
      (stored.source === "metadata-document"
        ? cimdSupported && stored.client_id === options.clientMetadataUrl
        : (stored.redirect_uris ?? []).some((r) =>
            sameRedirect(r, options.redirectUri, options.exactRedirectUri === true),
          ));
    if (stillValid) return stored;
  }
  // 2. Client ID Metadata Document, when the server says it supports them.
  if (cimdSupported && options.clientMetadataUrl) {
    assertClientMetadataUrl(options.clientMetadataUrl);
    const client: StoredClient = {
      issuer,
      client_id: options.clientMetadataUrl,
      token_endpoint_auth_method: "none",
      source: "metadata-document",
      registered_at: Date.now(),
    };
    await options.store.set("client", clientKey(issuer), client);
    return client;
  }
  // 3. Dynamic client registration (deprecated in 2026-07-28, kept for older servers).
  if (metadata.registration_endpoint) {
    const client = await registerDynamically(options);
    await options.store.set("client", clientKey(issuer), client);
    return client;
  }
  // 4. Ask the user for client information.
  throw new AuthorizationFlowError(
    "client_information_required",
    `no way to obtain a client id at ${issuer}: no pre-registered client for this issuer, ${
      cimdSupported ? "no clientMetadataUrl configured" : "no Client ID Metadata Document support"
    }, and no registration_endpoint. Register a client with this authorization server and pass its client_id (and secret)`,
    {
      kind: "action",
      step: "client registration (spec order: pre-registered, metadata document, dynamic)",
      issuer,
    },
  );
}
