/**
 * The errors a storage backend raises (./contract.ts): the database cannot be reached, or a create
 * would overwrite an existing record. Moved out of contract.ts to keep the contract's runtime
 * values apart from its types.
 */

import { GatehouseError } from "../shared/errors.js";

/**
 * Raised by a backend when the database cannot be reached or written (down, locked past the busy
 * timeout, read-only, disk full). Endpoints turn it into a 503 `temporarily_unavailable`.
 */
export class StorageUnavailableError extends GatehouseError<"ERR_STORAGE_UNAVAILABLE"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORAGE_UNAVAILABLE", message, options);
    this.name = "StorageUnavailableError";
  }
}

/**
 * Raised when a create would overwrite an existing record (same client id, username, code hash,
 * session, interaction id or key id). `upsertClient` never raises it.
 */
export class StorageConflictError extends GatehouseError<"ERR_STORAGE_CONFLICT"> {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORAGE_CONFLICT", message, options);
    this.name = "StorageConflictError";
  }
}
