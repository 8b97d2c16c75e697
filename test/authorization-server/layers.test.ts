/**
 * The authorization server's floors (docs/architecture.md, "The tree"): every module imports only
 * modules of its own folder or of the floors below it, so the ground (core/) never reaches up into
 * what it serves, and no two folders import each other. A new top-level folder or file under
 * src/authorization-server/ must be given its floor here, on purpose.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../src/authorization-server");

/** Lowest first. A module may import its own folder and anything with a lower number. */
const FLOORS: Record<string, number> = {
  core: 0,
  policy: 1,
  keys: 2,
  clients: 3,
  upstream: 4,
  vault: 5,
  grants: 6,
  browser: 7,
  pages: 8,
  endpoints: 9,
  config: 10,
  "server.ts": 11,
  // The server's context, kept off the public face (a WeakMap from server to context).
  "context-of.ts": 11,
  "index.ts": 12,
};

function modules(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));
}

/** The top-level folder (or file) of the authorization server a path belongs to. */
function place(path: string): string {
  return relative(ROOT, path).split("/")[0]!;
}

/** Every relative import (static, re-export, type-only) inside the authorization server, as [from, to]. */
function edges(): [string, string][] {
  const found: [string, string][] = [];
  for (const file of modules(ROOT)) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/\bfrom\s+"(\.[^"]+)"|\bimport\(\s*"(\.[^"]+)"\s*\)/g)) {
      const target = resolve(dirname(file), (match[1] ?? match[2])!).replace(/\.js$/, ".ts");
      if (relative(ROOT, target).startsWith("..")) continue;
      found.push([file, target]);
    }
  }
  return found;
}

describe("authorization-server floors", () => {
  it("every top-level folder and file has a floor", () => {
    const places = new Set(modules(ROOT).map(place));
    expect([...places].filter((p) => FLOORS[p] === undefined)).toEqual([]);
  });

  it("finds the imports it judges (a check that reads nothing cannot fail)", () => {
    const all = edges();
    expect(all.length).toBeGreaterThan(300);
    expect(all.some(([from, to]) => place(from) === "endpoints" && place(to) === "core")).toBe(true);
  });

  it("no module imports a floor above its own", () => {
    const upward = edges()
      .filter(([from, to]) => FLOORS[place(to)]! > FLOORS[place(from)]!)
      .map(([from, to]) => `${relative(ROOT, from)} -> ${relative(ROOT, to)}`);
    expect(upward).toEqual([]);
  });
});
