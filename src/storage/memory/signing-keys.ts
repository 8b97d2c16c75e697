/**
 * The memory store's token signing keys (storage contract "Signing keys"), apart from index.ts as
 * upstream.ts holds the upstream state: the store passes its signing key map, which these methods
 * read and write.
 */
import type { AuthorizationStore, SigningKeyRecord } from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { compareBy, sameJsonValue } from "../rules.js";
import { copy } from "./copy.js";

type SigningKeyMethods = Pick<
  AuthorizationStore,
  "listSigningKeys" | "addSigningKey" | "replaceSigningKeyPrivateJwk"
>;

export function createMemorySigningKeyMethods(signingKeys: Map<string, SigningKeyRecord>): SigningKeyMethods {
  return {
    async listSigningKeys() {
      return [...signingKeys.values()].sort(compareBy((k) => [k.createdAt, k.kid])).map(copy);
    },
    async addSigningKey(key, retireOthersAt) {
      if (signingKeys.has(key.kid)) throw new StorageConflictError("signing key id already exists");
      if (retireOthersAt) {
        for (const other of signingKeys.values()) {
          if (other.retiredAt !== undefined) continue;
          other.retiredAt = retireOthersAt.retiredAt;
          other.expiresAt = retireOthersAt.expiresAt;
        }
      }
      signingKeys.set(key.kid, copy(key));
    },
    async replaceSigningKeyPrivateJwk(kid, expected, next) {
      const key = signingKeys.get(kid);
      if (!key || !sameJsonValue(key.privateJwk, expected)) return false;
      key.privateJwk = copy(next);
      return true;
    },
  };
}
