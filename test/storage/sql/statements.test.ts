/**
 * src/storage/sql/statements.ts: one text of each shared statement, rendered for better-sqlite3
 * (`?` per occurrence) and `pg` (`$n` per name). Run against real SQLite here; the contract suite
 * runs them against SQLite and PostgreSQL through the stores.
 */

import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { PurgeResult } from "../../../src/storage/contract.js";
import { purgeStatements, render, revokeGrantStatements } from "../../../src/storage/sql/statements.js";

describe("render", () => {
  const sql = "SELECT :a AS a, :b AS b, :a AS again, '2'::text AS cast";

  it("'?' gives one mark and one value per occurrence, in order", () => {
    expect(render(sql, { a: 1, b: "x" }, "?")).toEqual({
      text: "SELECT ? AS a, ? AS b, ? AS again, '2'::text AS cast",
      values: [1, "x", 1],
    });
  });

  it("'$n' numbers each name once, in order of first use", () => {
    expect(render(sql, { a: 1, b: "x" }, "$n")).toEqual({
      text: "SELECT $1 AS a, $2 AS b, $1 AS again, '2'::text AS cast",
      values: [1, "x"],
    });
  });

  it("a parameter without a value is an error, never a NULL", () => {
    expect(() => render(sql, { a: 1 }, "?")).toThrow("no value for SQL parameter :b");
    // An inherited property is not a value either.
    expect(() => render("SELECT :constructor", {}, "$n")).toThrow(":constructor");
  });

  it("the '?' rendering binds in better-sqlite3 as the names say", () => {
    const db = new Database(":memory:");
    try {
      const { text, values } = render("SELECT :a AS a, :b AS b, :a + 1 AS next", { a: 41, b: "x" }, "?");
      expect(db.prepare(text).get(...values)).toEqual({ a: 41, b: "x", next: 42 });
    } finally {
      db.close();
    }
  });
});

describe("shared statements", () => {
  it("revocation touches the grant first, then the grants exchanged from it, then their refresh and access tokens, then deletes their upstream tokens", () => {
    const statements = revokeGrantStatements("$n", "grant-1", 5);
    const tables = statements.map((s) => /(?:UPDATE|DELETE FROM) (\w+)/.exec(s.text)?.[1]);
    expect(tables).toEqual(["grants", "grants", "refresh_tokens", "access_tokens", "upstream_token_sets"]);
    expect(statements[0]?.values).toEqual([5, "grant-1"]);
    // The chain's statements name the grant once ($1 in the CTE and the filter), then the time.
    for (const s of statements.slice(1, 4)) expect(new Set(s.values)).toEqual(new Set([5, "grant-1"]));
    expect(statements.slice(1).every((s) => s.text.startsWith("WITH RECURSIVE chain"))).toBe(true);
    expect(statements[4]?.values).toEqual(["grant-1"]);
  });

  it("the purge reports every PurgeResult count exactly once, tokens before their grants", () => {
    const order = purgeStatements("?", 7).map((p) => p.counts);
    const reported = order.filter((c): c is keyof PurgeResult => c !== undefined);
    const every: (keyof PurgeResult)[] = [
      "codes",
      "refreshTokens",
      "accessTokens",
      "grants",
      "interactions",
      "sessions",
      "clients",
      "markers",
      "deviceAuthorizations",
    ];
    expect([...reported].sort()).toEqual([...every].sort());
    expect(reported.indexOf("refreshTokens")).toBeLessThan(reported.indexOf("grants"));
    expect(reported.indexOf("accessTokens")).toBeLessThan(reported.indexOf("grants"));
    for (const { statement } of purgeStatements("$n", 7)) expect(statement.values).toEqual([7]);
  });
});
