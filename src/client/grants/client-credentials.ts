/**
 * Clients acting for themselves (OAuth 2.1 §4.2, the MCP client-credentials extension): the
 * `client_credentials` grant with `client_secret_basic`, `client_secret_post` or `private_key_jwt`
 * (RFC 7523 §2.2), sent with `resource` like every other token request.
 */
import { importPKCS8 } from "jose";
import { GatehouseTypeError } from "../../shared/errors.js";
import { type ClientKeyMaterial, grantRequest } from "../protocol/tokens.js";
import type { StoredClient } from "../stores/types.js";
import type { GrantProvider } from "./types.js";

export type ClientCredentialsOptions =
  | {
      clientId: string;
      clientSecret: string;
      /** Default: `client_secret_basic` unless the server only lists `client_secret_post`. */
      method?: "client_secret_basic" | "client_secret_post";
    }
  | {
      clientId: string;
      /** PKCS#8 PEM private key, or an imported CryptoKey. */
      privateKey: string | CryptoKey;
      /** JWS algorithm of the key (default ES256). */
      algorithm?: string;
      keyId?: string;
    };

/**
 * A {@link GrantProvider} for `createAuthFetch({ grant })`. The credentials are bound to `issuer`
 * when given: the grant refuses to send them to any other authorization server.
 */
export function clientCredentialsGrant(
  options: ClientCredentialsOptions & { issuer?: string },
): GrantProvider {
  if (!options.clientId)
    throw new GatehouseTypeError("ERR_INVALID_OPTION", "clientCredentials.clientId is required");
  let keyPromise: Promise<CryptoKey> | undefined;
  return async ({ metadata, resource, scope, fetch, dpop }) => {
    if (options.issuer !== undefined && options.issuer !== metadata.issuer) {
      throw new GatehouseTypeError(
        "ERR_INVALID_OPTION",
        `client credentials are bound to ${options.issuer}, not ${metadata.issuer}; not sending them`,
      );
    }
    let client: StoredClient;
    let keys: ClientKeyMaterial | undefined;
    if ("clientSecret" in options) {
      const supported = metadata.token_endpoint_auth_methods_supported ?? ["client_secret_basic"];
      const method =
        options.method ??
        (supported.includes("client_secret_basic") || !supported.includes("client_secret_post")
          ? "client_secret_basic"
          : "client_secret_post");
      client = {
        issuer: metadata.issuer,
        client_id: options.clientId,
        client_secret: options.clientSecret,
        token_endpoint_auth_method: method,
        source: "preregistered",
        registered_at: 0,
      };
    } else {
      const { privateKey } = options;
      keyPromise ??=
        typeof privateKey === "string"
          ? importPKCS8(privateKey, options.algorithm ?? "ES256")
          : Promise.resolve(privateKey);
      keys = { privateKey: await keyPromise, ...(options.keyId && { keyId: options.keyId }) };
      client = {
        issuer: metadata.issuer,
        client_id: options.clientId,
        token_endpoint_auth_method: "private_key_jwt",
        source: "preregistered",
        registered_at: 0,
      };
    }
    const parameters: Record<string, string> = { resource };
    if (scope) parameters.scope = scope;
    const signer = dpop ? await dpop(client.client_id) : undefined;
    const response = await grantRequest(
      { metadata, client, fetch, ...(keys && { keys }), ...(signer && { dpop: signer }) },
      "client_credentials",
      parameters,
    );
    return { client, ...(keys && { keys }), response };
  };
}
