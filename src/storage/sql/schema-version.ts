/**
 * An older Gatehouse on a schema a newer one migrated: its statements would misread columns and
 * rows it does not know (a rolling upgrade runs the previous version only on the schema the next
 * migration leaves readable to it, never on a later one), so `migrate()` refuses to start instead.
 * The one place both SQL stores ask (docs/deployment.md "Upgrading").
 */
import { GatehouseError } from "../../shared/errors.js";

/** Throws when `applied` (the highest version in `schema_migrations`) is past the last of `migrations`. */
export function refuseNewerSchema(applied: number, migrations: readonly { version: number }[]): void {
  const known = migrations.at(-1)?.version ?? 0;
  if (applied <= known) return;
  throw new GatehouseError(
    "ERR_STORAGE_SCHEMA_TOO_NEW",
    `the database has schema version ${applied}, and this version of Gatehouse knows up to ${known}: ` +
      "a newer Gatehouse upgraded it. Run that version (or a newer one), or restore the backup taken " +
      'before the upgrade; see docs/deployment.md "Upgrading"',
  );
}
