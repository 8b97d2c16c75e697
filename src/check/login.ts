/**
 * `--login`: the auditor runs the whole flow as a client would, with this package's client role
 * (src/client: discovery, registration, PKCE, `iss`, step-up, refresh), then uses the token and a
 * forced refresh. Credentials go where the client role sends them and nowhere else: the access token
 * to the resource, the code, verifier and refresh token to the authorization server's token
 * endpoint. The report records that they were sent, never their values.
 */

import { isAuthorizationFlowError } from "../client/errors.js";
import { AuthClient } from "../client/flow/auth-client.js";
import type { FetchLike } from "../client/protocol/http.js";
import { MemoryTokenStore } from "../client/stores/memory.js";
import type { AuthorizationSessionFactory } from "../client/user-agent/session.js";
import { type RequestForm, requestInit } from "./probes.js";
import type { CredentialKind, Exchange, LoginObservation, Revision } from "./types.js";

export interface LoginOptions {
  /** The user agent: the CLI uses a loopback listener and the system browser (or prints the URL). */
  authorizationSession: AuthorizationSessionFactory;
  /** An HTTPS Client ID Metadata Document URL to identify as; default: dynamic registration. */
  clientMetadataUrl?: string;
}

function describe(error: unknown): string {
  if (isAuthorizationFlowError(error)) {
    const oauth = error.oauthError ? ` [${error.oauthError.error}]` : "";
    return `${error.message}${oauth} (${error.code} at ${error.step})`;
  }
  return error instanceof Error ? error.message : String(error);
}

/** A fetch that logs each exchange (origin and path only) with the kind of credential it carries. */
function recordingFetch(fetchImpl: FetchLike, resourceUrl: string, exchanges: Exchange[]): FetchLike {
  const resourceOrigin = new URL(resourceUrl).origin;
  return async (input, init) => {
    const request = new Request(input, init);
    const url = new URL(request.url);
    const toResource = url.origin === resourceOrigin;
    let credential: CredentialKind = "none";
    if (request.headers.has("authorization")) credential = toResource ? "access-token" : "client";
    else if (request.method === "POST" && !toResource) credential = "client";
    const exchange: Exchange = { method: request.method, url: `${url.origin}${url.pathname}`, credential };
    exchanges.push(exchange);
    try {
      const response = await fetchImpl(request);
      exchange.status = response.status;
      return response;
    } catch (error) {
      exchange.error = describe(error);
      throw error;
    }
  };
}

/**
 * Spec "Authorization flow" 1-9: log in, call the resource with the token (a 403 there makes the
 * client step up, spec "Client handling (scope upgrade)"), then force one refresh and check rotation
 * (spec "Token theft and communication security" 2).
 */
export async function probeLogin(options: {
  resourceUrl: string;
  form: RequestForm;
  revision: Revision;
  fetch: FetchLike;
  exchanges: Exchange[];
  login: LoginOptions;
}): Promise<LoginObservation> {
  const observation: LoginObservation = { attempted: true, stepUps: 0 };
  const store = new MemoryTokenStore();
  const fetchImpl = recordingFetch(options.fetch, options.resourceUrl, options.exchanges);
  const common = {
    fetch: fetchImpl,
    store,
    revision: options.revision,
    dpop: "never" as const,
    clientName: "gatehouse check",
    ...(options.login.clientMetadataUrl && { clientMetadataUrl: options.login.clientMetadataUrl }),
  };
  const client = new AuthClient({
    ...common,
    authorizationSession: options.login.authorizationSession,
    onEvent(event) {
      if (event.type === "authorization_started" && event.stepUp) observation.stepUps! += 1;
    },
  });

  let first: Awaited<ReturnType<AuthClient["login"]>>;
  try {
    first = await client.login(options.resourceUrl, { force: true });
  } catch (error) {
    observation.error = describe(error);
    return observation;
  }
  observation.tokenObtained = true;
  observation.issuer = first.issuer;
  if (first.scope !== undefined) observation.scope = first.scope;
  if (first.expires_at !== undefined) {
    observation.accessTokenLifetimeSeconds = Math.round((first.expires_at - first.obtained_at) / 1000);
  }
  observation.refreshTokenIssued = first.refresh_token !== undefined;
  const registration = (await store.list("client")).find(([, c]) => c.issuer === first.issuer)?.[1];
  if (registration) {
    observation.clientSource = registration.source;
    observation.publicClient = registration.token_endpoint_auth_method === "none";
  }

  try {
    const response = await client.fetch(options.resourceUrl, requestInit(options.form));
    observation.resourceStatus = response.status;
    await response.body?.cancel().catch(() => undefined);
  } catch (error) {
    observation.resourceError = describe(error);
  }

  if (first.refresh_token) {
    // A second client on the same store refreshes once the stored token set is marked expired (the
    // auditor's own in-memory copy; a refresh lead alone cannot force it, the client caps the lead
    // at a third of the lifetime). It must never open the browser again, so its user agent refuses.
    for (const [key, tokens] of await store.list("tokens")) {
      if (tokens.issuer === first.issuer)
        await store.set("tokens", key, { ...tokens, expires_at: Date.now() - 1 });
    }
    let refreshed = false;
    const refresher = new AuthClient({
      ...common,
      authorizationSession: async () => {
        throw new Error("the refresh did not yield a token");
      },
      onEvent(event) {
        if (event.type === "refreshed") refreshed = true;
      },
    });
    try {
      const before = (await store.list("tokens")).find(([, t]) => t.issuer === first.issuer)?.[1] ?? first;
      const after = await refresher.login(options.resourceUrl);
      observation.refreshWorked = refreshed && after.access_token !== before.access_token;
      observation.refreshRotated =
        after.refresh_token !== undefined && after.refresh_token !== before.refresh_token;
    } catch (error) {
      observation.refreshWorked = false;
      observation.refreshError = describe(error);
    }
  }
  return observation;
}
