/**
 * The two published revisions of the authorization specification. Where they differ, behaviour
 * follows a `revision` option (DESIGN.md principle 7); this is the one declaration every role uses.
 */
export type Revision = "2025-11-25" | "2026-07-28";

/** Every revision, oldest first (tests run the matrix over both). */
export const REVISIONS: readonly Revision[] = ["2025-11-25", "2026-07-28"];

/** The revision that applies when none is configured. */
export const DEFAULT_REVISION: Revision = "2026-07-28";

export function isRevision(value: unknown): value is Revision {
  return value === "2025-11-25" || value === "2026-07-28";
}
