/**
 * How the contract suite reads an issued access token under both contract versions
 * (StorageContractVersion): version 1 writes a row per access token; version 2 writes none, and
 * a token is as its grant is (revoked with it), unless it is on the revoked list (a row written by
 * `revokeAccessToken`). The cases assert the same outcome through {@link accessView}.
 */
import type { AccessTokenRecord, AuthorizationStore } from "../contract.js";

/** True for a store of contract version 2 (no access-token row per issuance). */
export function writesNoAccessRows(store: AuthorizationStore): boolean {
  return store.contractVersion === 2;
}

/**
 * The access token `jti` of grant `grantId` as a reader judges it: version 1 its row; version 2
 * its row on the revoked list, else its grant's revocation (undefined when the grant is gone).
 */
export async function accessView(
  store: AuthorizationStore,
  jti: string,
  grantId: string,
): Promise<Pick<AccessTokenRecord, "grantId" | "revokedAt"> | undefined> {
  const row = await store.getAccessToken(jti);
  if (row || !writesNoAccessRows(store)) return row;
  const grant = await store.getGrant(grantId);
  if (!grant) return undefined;
  return grant.revokedAt === undefined ? { grantId } : { grantId, revokedAt: grant.revokedAt };
}
