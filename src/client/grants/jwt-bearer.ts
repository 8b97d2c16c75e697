/**
 * Grants for the authorization extensions that use RFC 7523 JWT bearer assertions:
 *
 * - workload identity federation (`io.modelcontextprotocol/auth/wif`): the workload's own JWT is
 *   the assertion; errors are surfaced, never retried and never answered by switching grants;
 * - enterprise-managed authorization (`io.modelcontextprotocol/enterprise-managed-authorization`):
 *   an RFC 8693 token exchange at the enterprise identity provider turns an ID token into an
 *   identity assertion grant (ID-JAG), which is then presented to the authorization server.
 */
import { GatehouseTypeError } from "../../shared/errors.js";
import { AuthorizationFlowError } from "../errors.js";
import { assertSecureUrl, readJsonObject, send } from "../protocol/http.js";
import { grantRequest } from "../protocol/tokens.js";
import type { StoredClient } from "../stores/types.js";
import type { GrantProvider } from "./types.js";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";

type Source = string | (() => string | Promise<string>);
const read = async (source: Source) => (typeof source === "string" ? source : await source());

/** RFC 7523 §2.1 JWT bearer grant with a workload identity assertion (public client). */
export function jwtBearerGrant(options: { clientId: string; assertion: Source }): GrantProvider {
  if (!options.clientId) throw new GatehouseTypeError("ERR_INVALID_OPTION", "clientId is required");
  return async ({ metadata, resource, scope, fetch, dpop }) => {
    const client: StoredClient = {
      issuer: metadata.issuer,
      client_id: options.clientId,
      token_endpoint_auth_method: "none",
      source: "preregistered",
      registered_at: 0,
    };
    const parameters: Record<string, string> = { assertion: await read(options.assertion), resource };
    if (scope) parameters.scope = scope;
    const signer = dpop ? await dpop(client.client_id) : undefined;
    const response = await grantRequest(
      { metadata, client, fetch, ...(signer && { dpop: signer }) },
      JWT_BEARER,
      parameters,
    );
    return { client, response };
  };
}

export interface EnterpriseManagedOptions {
  /** Token endpoint of the enterprise identity provider. */
  idpTokenEndpoint: string;
  /** This client's id at the identity provider. */
  idpClientId: string;
  idpClientSecret?: string;
  /** The user's ID token from the identity provider (the RFC 8693 subject token). */
  idToken: Source;
  /** This client's credentials at the MCP authorization server (`client_secret_basic`). */
  clientId: string;
  clientSecret: string;
}

/** Enterprise-managed authorization: token exchange for an ID-JAG, then the JWT bearer grant. */
export function enterpriseManagedGrant(options: EnterpriseManagedOptions): GrantProvider {
  return async ({ metadata, resource, scope, fetch, dpop }) => {
    const step = `identity assertion token exchange (RFC 8693, ${options.idpTokenEndpoint})`;
    assertSecureUrl(options.idpTokenEndpoint, step);
    const form = new URLSearchParams({
      grant_type: TOKEN_EXCHANGE,
      requested_token_type: "urn:ietf:params:oauth:token-type:id-jag",
      subject_token: await read(options.idToken),
      subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
      audience: metadata.issuer,
      resource,
      client_id: options.idpClientId,
    });
    if (scope) form.set("scope", scope);
    if (options.idpClientSecret) form.set("client_secret", options.idpClientSecret);
    const response = await send(
      fetch,
      options.idpTokenEndpoint,
      {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: form,
      },
      step,
    );
    const body = await readJsonObject(response, step, "token exchange response", options.idpTokenEndpoint);
    if (response.status !== 200 || typeof body.access_token !== "string") {
      const error = typeof body.error === "string" ? body.error : "invalid_response";
      throw new AuthorizationFlowError("token_request_failed", `identity provider answered ${error}`, {
        kind: response.status === 200 ? "nonconforming" : "oauth",
        step,
        status: response.status,
        oauthError: { error },
      });
    }
    const client: StoredClient = {
      issuer: metadata.issuer,
      client_id: options.clientId,
      client_secret: options.clientSecret,
      token_endpoint_auth_method: "client_secret_basic",
      source: "preregistered",
      registered_at: 0,
    };
    const parameters: Record<string, string> = { assertion: body.access_token, resource };
    if (scope) parameters.scope = scope;
    // RFC 9449 §5: only the authorization server's token request is bound; the identity
    // provider's exchange above yields an assertion, not a token for the resource.
    const signer = dpop ? await dpop(client.client_id) : undefined;
    const tokens = await grantRequest(
      { metadata, client, fetch, ...(signer && { dpop: signer }) },
      JWT_BEARER,
      parameters,
    );
    return { client, response: tokens };
  };
}
