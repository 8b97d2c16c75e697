/**
 * One public entry per concept (issue 23 item 9): walking every package.json export of the build,
 * no value is public from two entries, the shared vocabulary is the package root only (there is
 * no `gatehouse-auth/shared`), and the helpers the roles share inside `src/` are exported by no
 * entry. What each entry exports name by name is api/*.api.md, checked by `npm run api:check`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../cli/helpers.js";
import { type Entry, importEntries } from "./exports.js";

let loaded: Array<{ entry: Entry; values: Record<string, unknown> }>;

beforeAll(async () => {
  loaded = await importEntries();
}, 120_000);

describe("the package's entries", () => {
  it("no value is public from two entries", () => {
    const first = new Map<unknown, string>();
    const twice: string[] = [];
    for (const { entry, values } of loaded) {
      for (const [name, value] of Object.entries(values)) {
        // Primitive constants may be equal by chance; only objects and functions are one thing.
        if (value === null || (typeof value !== "object" && typeof value !== "function")) continue;
        const where = first.get(value);
        if (where === undefined) first.set(value, `${entry.subpath} ${name}`);
        else twice.push(`${entry.subpath} ${name}`);
      }
    }
    expect(twice).toEqual([]);
  });

  it("the shared vocabulary is the root only: there is no gatehouse-auth/shared", () => {
    const exports = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: object })
      .exports;
    expect(Object.keys(exports)).not.toContain("./shared");
    const root = loaded.find(({ entry }) => entry.subpath === "gatehouse-auth")!.values;
    for (const name of [
      "OAuthError",
      "GatehouseError",
      "ScopeHierarchy",
      "dpopProofVerifier",
      "jsonLogger",
    ]) {
      expect(root, name).toHaveProperty(name);
    }
  });

  it("the helpers the roles share inside src/ are exported by no entry", () => {
    // These were public before (the root, check or storage) without anyone outside src/ using them.
    const inside = [
      "completeResponse",
      "completeResponseBody",
      "deferCompleteBodies",
      "NO_STORE",
      "jsonResponse",
      "randomToken",
      "sha256Base64url",
      "union",
      "intersection",
      "difference",
      "redact",
      "normalizedHtu",
      "isLoopbackHost",
      "sanitizeErrorDescription",
      "classifyTransport",
      "compareResource",
      "isPostgresUrl",
      "SQLITE_FILE_NAME",
    ];
    const exported = loaded.flatMap(({ entry, values }) =>
      inside.filter((name) => name in values).map((name) => `${entry.subpath} ${name}`),
    );
    expect(exported).toEqual([]);
  });
});
