/**
 * `gatehouse keys rewrap`: re-encrypts every stored signing private key under the current
 * key-encryption key (KEK), so an old KEK can be dropped and rows written before encryption stop
 * holding a plain private key.
 *
 * It uses the storage contract alone, so it works on every backend (memory included): each key is
 * rewritten with `replaceSigningKeyPrivateJwk`, a compare-and-swap that writes only if the key
 * still holds what was read, so a change made meanwhile by another process is never overwritten.
 */
import {
  privateKeyProtection,
  rewrappedPrivateJwk,
} from "../authorization-server/keys/signing-key-envelope.js";
import type { KeyEncryptionKeyring } from "../shared/secret-envelope.js";
import type { AuthorizationStore } from "../storage/contract.js";

export interface RewrapResult {
  /** Keys re-encrypted under the current KEK (their previous protection in `from`). */
  rewrapped: { kid: string; from: string }[];
  /** Keys already sealed under the current KEK. */
  unchanged: string[];
  /** Keys another process changed while this ran (run the command again). */
  changedMeanwhile: string[];
}

/**
 * Re-encrypts every stored private key under `keyring.currentId`. Every key is opened first:
 * when one cannot be read (a KEK missing from the keyring, an altered envelope) nothing at all is
 * written and the error names its `kid`.
 */
export async function rewrapSigningKeys(
  store: AuthorizationStore,
  keyring: KeyEncryptionKeyring,
): Promise<RewrapResult> {
  const records = await store.listSigningKeys();
  const planned: {
    kid: string;
    from: string;
    expected: Record<string, unknown>;
    next: Record<string, unknown>;
  }[] = [];
  const result: RewrapResult = { rewrapped: [], unchanged: [], changedMeanwhile: [] };
  for (const record of records) {
    const next = await rewrappedPrivateJwk(record, keyring);
    if (!next) {
      result.unchanged.push(record.kid);
      continue;
    }
    const protection = privateKeyProtection(record);
    planned.push({
      kid: record.kid,
      from: protection.kind === "plaintext" ? "plaintext" : `kek ${protection.kekId}`,
      expected: record.privateJwk,
      next: { ...next },
    });
  }
  for (const { kid, from, expected, next } of planned) {
    if (await store.replaceSigningKeyPrivateJwk(kid, expected, next)) result.rewrapped.push({ kid, from });
    else result.changedMeanwhile.push(kid);
  }
  return result;
}
