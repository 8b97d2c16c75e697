/**
 * What a non-interactive grant is: the contract between `AuthClient` (its `grant` option) and the
 * grants in this folder, or any a caller writes. A grant runs the token request itself.
 */
import type * as oauth from "oauth4webapi";
import type { AuthorizationServerMetadata } from "../../shared/metadata.js";
import type { DPoPSigner } from "../protocol/dpop.js";
import type { FetchLike } from "../protocol/http.js";
import type { ClientKeyMaterial } from "../protocol/tokens.js";
import type { StoredClient } from "../stores/types.js";

/** A non-interactive way to obtain tokens (client credentials, JWT bearer, ...). */
export type GrantProvider = (context: {
  metadata: AuthorizationServerMetadata;
  resource: string;
  scope: string | undefined;
  fetch: FetchLike;
  /**
   * Present when tokens should be DPoP-bound (see `wantsDPoP`): the signer for the client id the
   * grant uses, to pass as `dpop` in its token request context (RFC 9449 §5).
   */
  dpop?: (clientId: string) => Promise<DPoPSigner>;
}) => Promise<{ client: StoredClient; keys?: ClientKeyMaterial; response: oauth.TokenEndpointResponse }>;
