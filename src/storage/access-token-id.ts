/**
 * Access-token ids (`jti`, RFC 7519 §4.1.7) that name their grant: `<grantId>.<unique id>`
 * (issue 25, docs/storage.md "Access tokens without a row per issuance").
 *
 * Why: a store of contract version 2 writes no row per access token, so whatever must find the
 * grant of a token (introspection, RFC 7662; revocation, RFC 7009; `requestStepUp`) reads it out
 * of the `jti`. Only the issuer does so, and only from a token whose signature, `typ`, `iss` and
 * `exp` it verified: the id grants nothing by itself. A `jti` without the separator is one issued
 * before the change (its grant is found through its row).
 */

/** Between the grant id and the unique part; neither a grant id nor the unique part holds one. */
const SEPARATOR = ".";

/** The `jti` of a new access token of grant `grantId`; `unique` is drawn per token. */
export function accessTokenId(grantId: string, unique: string): string {
  return `${grantId}${SEPARATOR}${unique}`;
}

/** The grant id an access-token `jti` carries, or undefined for one issued without it. */
export function grantIdOfAccessTokenId(jti: string): string | undefined {
  const at = jti.lastIndexOf(SEPARATOR);
  return at > 0 && at < jti.length - 1 ? jti.slice(0, at) : undefined;
}
