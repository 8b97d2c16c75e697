/**
 * Issue 26 (low): `serve`'s `!!!` banners shared stderr with its JSON log lines, so
 * `jq -c 'select(.audit)'` over the log broke. Off a terminal (a pipe, journald, a file) every
 * stderr line is now JSON, the banners included (event `banner`, their text kept whole); on a
 * terminal they stay plain text for the person reading.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, startCli, tempDir } from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
beforeAll(() => ensureBuilt());
afterEach(() => dir?.remove());

describe("serve's stderr off a terminal", () => {
  it("is JSON lines only, the generated-KEK and insecure banners as events with their text", async () => {
    dir = tempDir("gatehouse-stderr-json-");
    const server = await startCli(
      [
        "serve",
        "--json",
        "--insecure-loopback",
        "--port",
        "0",
        "--resource",
        "http://localhost:9876",
        "--data",
        dir.path,
      ],
      { env: { GATEHOUSE_KEY_ENCRYPTION_KEY: "" } },
    );
    await fetch(`${server.ready.issuer}/health`);
    await server.stop();
    const lines = server
      .stderr()
      .split("\n")
      .filter((l) => l !== "");
    const notJson = lines.filter((l) => {
      try {
        JSON.parse(l);
        return false;
      } catch {
        return true;
      }
    });
    expect(notJson).toEqual([]);
    const banners = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.event === "banner");
    expect(banners.map((b) => String(b.text).split("\n")[0])).toEqual([
      "!!! GENERATED A KEY-ENCRYPTION KEY: none was configured",
      "!!! INSECURE DEVELOPMENT MODE: plain http on loopback (--insecure-loopback).",
    ]);
    expect(banners.every((b) => b.level === "warn")).toBe(true);
  });
});
