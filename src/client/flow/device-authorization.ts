/**
 * The device authorization grant (RFC 8628) as the client's interactive authorization, in place
 * of the browser code flow (authorization flow steps 4-7 for a machine without a browser):
 * registration, the device authorization request, the prompt to the user, polling, and the tokens
 * in the same form the code flow stores them. Internal to the client.
 */

import { isAuthorizationFlowError } from "../errors.js";
import { needsConsentPrompt } from "../protocol/authorization.js";
import {
  DEVICE_CODE_GRANT_TYPE,
  type DeviceAuthorization,
  pollDeviceAuthorization,
  requestDeviceAuthorization,
} from "../protocol/device-authorization.js";
import { deviceAuthorizationEndpoint } from "../protocol/discovery.js";
import { assertTenant, resourceParameter } from "../protocol/issuer-compat.js";
import { type ResolveClientOptions, registerDynamically, resolveClient } from "../protocol/registration.js";
import { clientKey, type StoredServer, type StoredTokens } from "../stores/types.js";
import type { DeviceAuthorizationOptions } from "./options.js";
import {
  type AuthState,
  compatibilityReporter,
  dpopFor,
  issuedTokens,
  keysFor,
  preregisteredClients,
} from "./state.js";

/**
 * The redirect URI a device-flow registration carries. The device grant needs none, but a client
 * has one registration per issuer (stores/types.ts `clientKey`), so it is registered for the
 * browser flow too: a loopback URI whose port the server lets vary (RFC 8252 §7.3), which the
 * code flow's listener then matches, and the code flow's tokens and the device flow's share one
 * client for their refreshes.
 */
const DEVICE_REGISTRATION_REDIRECT_URI = "http://127.0.0.1/callback";

/**
 * Errors at the device authorization endpoint that mean "this client may not use the device
 * grant": RFC 6749 §5.2 `unauthorized_client`, and `invalid_request`, which oidc-provider answers
 * for a client registered without the grant.
 */
const CLIENT_NOT_ALLOWED = new Set(["unauthorized_client", "invalid_request"]);

/** Tokens for `resource` through the device authorization grant, prompting through `device`. */
export async function deviceAuthorization(
  state: AuthState,
  device: DeviceAuthorizationOptions,
  server: StoredServer,
  resource: string,
  scope: string | undefined,
  dpopWanted: boolean,
): Promise<StoredTokens> {
  const { metadata } = server;
  // A server without the endpoint is refused before anything is registered.
  deviceAuthorizationEndpoint(metadata, `device authorization (RFC 8628 §4, ${metadata.issuer})`);
  device.signal?.throwIfAborted();

  const report = compatibilityReporter(state);
  // The resource parameter as this issuer takes it (issuer-compat.ts), in the request and the polls.
  const wireResource = resourceParameter(
    state.options.issuerCompatibility,
    metadata.issuer,
    resource,
    "device authorization and polling",
    report,
  );
  const request = {
    resource: wireResource,
    scope,
    consentPrompt: needsConsentPrompt(scope, metadata, server.discovered_via),
    signal: device.signal,
  };
  const registration = registrationOptions(state, server);
  const known = await state.store.get("client", metadata.issuer);
  let client = await resolveClient(registration);
  let authorization: DeviceAuthorization;
  try {
    authorization = await requestDeviceAuthorization(
      { metadata, client, fetch: state.fetch, ...keysFor(state, client) },
      request,
    );
  } catch (error) {
    // A registration made for the browser flow alone (before this client knew the device flow,
    // or by the code flow) is refused here (RFC 6749 §5.2 unauthorized_client): register once
    // more, asking for the device grant, and try again. Credentials given by the user are theirs
    // to fix, so they are not replaced.
    const refused = isAuthorizationFlowError(error) && CLIENT_NOT_ALLOWED.has(error.oauthError?.error ?? "");
    const reused = known?.client_id === client.client_id;
    if (!refused || !reused || client.source !== "dynamic" || !metadata.registration_endpoint) throw error;
    client = await registerDynamically(registration);
    await state.store.set("client", clientKey(metadata.issuer), client);
    authorization = await requestDeviceAuthorization(
      { metadata, client, fetch: state.fetch, ...keysFor(state, client) },
      request,
    );
  }
  if (known?.client_id !== client.client_id) {
    state.options.onEvent?.({ type: "registered", issuer: metadata.issuer, source: client.source });
  }
  state.clients.set(metadata.issuer, client);

  // RFC 8628 §3.3: the user is told where to go and what to enter; then the client polls.
  await device.onPrompt({
    issuer: metadata.issuer,
    resource,
    userCode: authorization.userCode,
    verificationUri: authorization.verificationUri,
    ...(authorization.verificationUriComplete !== undefined && {
      verificationUriComplete: authorization.verificationUriComplete,
    }),
    expiresAt: authorization.expiresAt,
  });
  const dpop = dpopWanted ? await dpopFor(state, metadata.issuer, client.client_id, true) : undefined;
  const response = await pollDeviceAuthorization(
    { metadata, client, fetch: state.fetch, ...keysFor(state, client), ...(dpop && { dpop }) },
    authorization,
    { resource: wireResource, ...(device.signal && { signal: device.signal }) },
  );
  assertTenant(state.options.issuerCompatibility, metadata.issuer, response, report);
  return issuedTokens(
    response,
    { issuer: metadata.issuer, client_id: client.client_id, resource, requestedScope: scope },
    dpop,
  );
}

/**
 * Registration for the device flow, in the spec's order like the code flow's: pre-registered
 * credentials, a Client ID Metadata Document, then dynamic registration asking for the device
 * grant beside the code flow's grants (RFC 7591 §2 `grant_types`).
 */
function registrationOptions(state: AuthState, server: StoredServer): ResolveClientOptions {
  const { options } = state;
  const { metadata } = server;
  const offered = metadata.grant_types_supported;
  // RFC 8414 §2: without grant_types_supported the server supports authorization_code.
  const codeFlow = offered === undefined || offered.includes("authorization_code");
  return {
    issuer: metadata.issuer,
    metadata,
    store: state.store,
    fetch: state.fetch,
    redirectUri: DEVICE_REGISTRATION_REDIRECT_URI,
    ...(preregisteredClients(state, metadata.issuer) && {
      preregistered: preregisteredClients(state, metadata.issuer)!,
    }),
    ...(options.clientMetadataUrl && { clientMetadataUrl: options.clientMetadataUrl }),
    ...(options.clientName && { clientName: options.clientName }),
    registrationMetadata: {
      grant_types: [...(codeFlow ? ["authorization_code"] : []), DEVICE_CODE_GRANT_TYPE, "refresh_token"],
      ...(!codeFlow && { response_types: [], redirect_uris: [] }),
      ...options.registrationMetadata,
    },
  };
}
