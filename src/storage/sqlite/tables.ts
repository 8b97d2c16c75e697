/**
 * Which tables of the database a statement can read or change, as a bit mask: a read settles only
 * once every commit that changed a table it read is durable (./wal-sync.ts), not every commit made
 * before it. Under load an fsync is nearly always under way, and a read of a table no recent commit
 * touched (a client, a session, a user, a consent) no longer waits for it: each code flow made five
 * such reads, each waiting for the fsync of writes that had nothing to do with it.
 *
 * Conservative on purpose, since a mask too small would release data a power cut can take back:
 * - a statement covers every table whose name appears in its text as a word (an SQL statement
 *   can only read or change tables it names: the schema has no views and no triggers, which the
 *   store checks when it learns the tables), and every table a foreign-key action of one of them
 *   can change (`ON DELETE CASCADE` from grants changes refresh_tokens and access_tokens);
 * - a statement that names no table it knows, and every statement when the schema has a view or a
 *   trigger or more tables than bits, covers {@link ALL_TABLES}.
 */
import type Database from "better-sqlite3";

/** Every table (a commit of another connection, a migration, a statement not understood). */
export const ALL_TABLES = -1;

export interface TableMasks {
  /** The tables `sql` may read or change (with what their foreign-key actions change). */
  of(sql: string): number;
  /** The schema may have changed (a migration ran): learn the tables again. */
  reset(): void;
}

/** One bit per table, up to 31 tables plus the sign bit. */
const MAX_TABLES = 32;

interface Schema {
  /** Matches a table name as a word. */
  names: RegExp;
  /** Bit per table name (lower case). */
  bit: Map<string, number>;
  /** Per bit: the tables a foreign-key action from that table can change (closed transitively). */
  reach: number[];
}

/** The tables of `db` and their foreign keys, or undefined when masks cannot be exact. */
function learn(db: Database.Database): Schema | undefined {
  const objects = db
    .prepare("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger')")
    .all() as {
    type: string;
    name: string;
  }[];
  if (objects.some((o) => o.type !== "table")) return undefined;
  const tables = objects.map((o) => o.name.toLowerCase());
  if (tables.length === 0 || tables.length > MAX_TABLES) return undefined;
  const bit = new Map(tables.map((name, i) => [name, 1 << i]));
  const escaped = tables.map((name) => name.replace(/[^A-Za-z0-9_]/g, (c) => `\\${c}`));
  const reach = tables.map((name) => bit.get(name)!);
  // A child's rows change when its parent's do (SQLite "Foreign Key Actions"); whatever the action,
  // counted as a change.
  const children = tables.map(() => 0);
  for (const child of tables) {
    const keys = db.prepare('SELECT "table" AS parent FROM pragma_foreign_key_list(?)').all(child) as {
      parent: string;
    }[];
    for (const { parent } of keys) {
      const parentIndex = tables.indexOf(parent.toLowerCase());
      if (parentIndex === -1) return undefined;
      children[parentIndex]! |= bit.get(child)!;
    }
  }
  for (let changed = true; changed; ) {
    changed = false;
    for (let i = 0; i < tables.length; i++) {
      let next = reach[i]!;
      for (let j = 0; j < tables.length; j++) if (next & (1 << j)) next |= children[j]!;
      if (next !== reach[i]) {
        reach[i] = next;
        changed = true;
      }
    }
  }
  return { names: new RegExp(`\\b(?:${escaped.join("|")})\\b`, "gi"), bit, reach };
}

export function createTableMasks(db: Database.Database): TableMasks {
  let schema: Schema | undefined | null = null;
  const cache = new Map<string, number>();
  return {
    of(sql) {
      const cached = cache.get(sql);
      if (cached !== undefined) return cached;
      if (schema === null) schema = learn(db);
      let mask = 0;
      if (schema) {
        for (const [name] of sql.matchAll(schema.names)) {
          const bit = schema.bit.get(name.toLowerCase())!;
          mask |= schema.reach[31 - Math.clz32(bit)]!;
        }
      }
      if (mask === 0) mask = ALL_TABLES;
      cache.set(sql, mask);
      return mask;
    },
    reset() {
      schema = null;
      cache.clear();
    },
  };
}
