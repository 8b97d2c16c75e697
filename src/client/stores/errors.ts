/**
 * The token stores' errors: one family, `TokenStoreError`, with a code from the closed set
 * (`TokenStoreErrorCode`, shared/errors.ts) a caller branches on — the keychain cannot be used,
 * the lock was not had in time, a link where a store file should be, the key is missing, the file
 * cannot be read. Messages name the file, never a key or token.
 */
import { GatehouseError, type TokenStoreErrorCode } from "../../shared/errors.js";

export type { TokenStoreErrorCode };

export class TokenStoreError<C extends TokenStoreErrorCode = TokenStoreErrorCode> extends GatehouseError<C> {
  constructor(code: C, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = "TokenStoreError";
  }
}
