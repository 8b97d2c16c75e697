/**
 * Token revocation (RFC 7009) through oauth4webapi: telling the authorization server that a
 * refresh or access token is no longer wanted, with the client authentication of the registration
 * (RFC 7009 §2.1). Used by `logout` and after a step-up that replaced a refresh token.
 */
import * as oauth from "oauth4webapi";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import { AuthorizationFlowError } from "../errors.js";
import type { StoredClient } from "../stores/types.js";
import { type FetchLike, wireOptions } from "./http.js";
import { explainNetworkError } from "./network-errors.js";
import {
  type ClientKeyMaterial,
  clientAuthentication,
  clientEndpoint,
  endpointOAuthError,
} from "./tokens.js";

export interface RevocationContext {
  metadata: AuthorizationServerMetadata;
  client: StoredClient;
  fetch: FetchLike;
  keys?: ClientKeyMaterial;
  /** Gives up after this long (a logout must not hang on a server that does not answer). Default 10 s. */
  timeoutMs?: number;
}

/**
 * The outcome of a revocation the server accepted (RFC 7009 §2.2: 200, whatever the token was),
 * or `unsupported_token_type` when the server said it cannot revoke that kind (§2.2.1).
 */
export type RevocationResult = "revoked" | "unsupported_token_type";

/**
 * Revokes one token at `revocation_endpoint` (RFC 7009 §2.1). Throws `AuthorizationFlowError`:
 * `revocation_failed` (kind `oauth`) for an error response, `transport_failed` when the server
 * could not be reached, `invalid_document` when there is no endpoint, `response_too_large` when
 * the response passes its cap (see response-limits.ts). The token is never part of a message.
 */
export async function revokeToken(
  ctx: RevocationContext,
  token: string,
  tokenTypeHint: "refresh_token" | "access_token",
): Promise<RevocationResult> {
  const step = `token revocation, ${tokenTypeHint} (RFC 7009 §2.1, ${ctx.metadata.revocation_endpoint ?? ctx.metadata.issuer})`;
  const endpoint = clientEndpoint(ctx, "revocation_endpoint", step);
  const as = ctx.metadata as oauth.AuthorizationServer;
  const client: oauth.Client = { client_id: ctx.client.client_id };
  try {
    const response = await oauth.revocationRequest(
      as,
      client,
      clientAuthentication(ctx.client, ctx.keys),
      token,
      {
        additionalParameters: { token_type_hint: tokenTypeHint },
        signal: AbortSignal.timeout(ctx.timeoutMs ?? 10_000),
        ...wireOptions(ctx.fetch, [endpoint], "revocation response", step),
      },
    );
    await oauth.processRevocationResponse(response);
    return "revoked";
  } catch (error) {
    if (error instanceof AuthorizationFlowError) throw error;
    // RFC 7009 §2.2.1: the server does not revoke this kind of token; nothing more to do.
    if (error instanceof oauth.ResponseBodyError && error.error === "unsupported_token_type") {
      return "unsupported_token_type";
    }
    const answered = endpointOAuthError(error, "revocation_failed", "revocation", step);
    if (answered) throw answered;
    if (
      explainNetworkError(error) !== undefined ||
      (error instanceof TypeError && error.cause !== undefined)
    ) {
      throw new AuthorizationFlowError("transport_failed", "could not reach the revocation endpoint", {
        kind: "transport",
        step,
        cause: error,
        url: endpoint,
      });
    }
    const cause = (error as { cause?: unknown }).cause;
    const status = cause instanceof Response ? cause.status : undefined;
    throw new AuthorizationFlowError(
      "revocation_failed",
      `revocation response does not conform${status !== undefined ? ` (HTTP ${status})` : ""}`,
      { kind: "nonconforming", step, cause: error, ...(status !== undefined && { status }) },
    );
  }
}
