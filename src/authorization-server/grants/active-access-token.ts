/**
 * Whether an access token this server signed is still active: the one judgement introspection
 * (RFC 7662 §2.2), token exchange (RFC 8693 subject token) and the upstream-token endpoint share.
 *
 * No row is written per access token (storage contract version 2, docs/storage.md). A token whose
 * signature, `typ`, `iss` and `exp` verified (KeyManager.verifyAccessToken, done by the caller) is
 * active when its grant, named in its `jti` (storage/access-token-id.ts), exists, is not revoked
 * and has not expired, and its `jti` is not on the revoked list (a row written on revocation,
 * RFC 7009 §2.1). A token issued before the change has a `jti` without a grant id: it is judged by
 * its row, as before, and is inactive without one. A store of contract version 1 still writes a
 * row per token; a row, when there is one, must then be live too.
 */
import { grantIdOfAccessTokenId } from "../../storage/access-token-id.js";
import type { AccessTokenRecord, GrantRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";

/** The live grant of the token `jti`, and its row if one exists; undefined when inactive. */
export async function activeAccessToken(
  ctx: ServerContext,
  jti: string,
): Promise<{ grant: GrantRecord; row?: AccessTokenRecord } | undefined> {
  const named = grantIdOfAccessTokenId(jti);
  // Both reads at once: they are independent when the jti names its grant.
  const [row, namedGrant] = await Promise.all([
    ctx.store.getAccessToken(jti),
    named === undefined ? undefined : ctx.store.getGrant(named),
  ]);
  const now = ctx.now();
  if (row !== undefined) {
    if (row.revokedAt !== undefined || row.expiresAt <= now) return undefined;
    // A row of another grant than the one the jti names is no token this server issued.
    if (named !== undefined && row.grantId !== named) return undefined;
  } else if (named === undefined) {
    return undefined;
  }
  const grant = namedGrant ?? (row === undefined ? undefined : await ctx.store.getGrant(row.grantId));
  if (!grant || grant.revokedAt !== undefined || grant.expiresAt <= now) return undefined;
  return row === undefined ? { grant } : { grant, row };
}
