/**
 * What scopes a request may get: whether the `scope` a client registered limits what it may
 * request ({@link scopeCeiling}), decided here only.
 */

import type { ClientRecord } from "../../storage/contract.js";

/**
 * The scopes a client may request at most, or undefined when only the user's consent limits them.
 *
 * A pre-registered client keeps the ceiling its operator set. A client that registered itself
 * (RFC 7591 dynamic registration, or a Client ID Metadata Document) wrote its `scope` itself,
 * usually the scope of the first challenge it met: treating that as a ceiling would refuse the
 * step-up the spec asks clients to perform ("Client handling (scope upgrade)"), while it protects
 * nothing, since the same caller could register again with a wider `scope`. For those clients the
 * user's consent is the gate (RFC 7591 §2 leaves the use of `scope` to the server's policy).
 */
export function scopeCeiling(client: ClientRecord): string | undefined {
  return client.source === "preregistered" ? client.scope : undefined;
}
