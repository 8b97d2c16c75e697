/**
 * Issue 26: on a machine without a browser, a `fetch` that needs more scope than the stored login
 * holds (a step-up) failed suggesting `gatehouse login --device <url>`, which only reports the
 * stored token and changes nothing. The refusal now names the scope missing and the command that
 * works: the same command again with --device. Against `gatehouse demo` (real server, real
 * resource): a first login through its forms, then a headless POST that needs notes:write.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FormUserAgent } from "../examples/form-user-agent.js";
import {
  type DemoReady,
  ensureBuilt,
  type RunningCli,
  startDemo,
  startHeadless,
  tempDir,
} from "./helpers.js";

let dir: ReturnType<typeof tempDir>;
let demo: RunningCli<DemoReady>;

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-headless-step-up-");
  demo = await startDemo(join(dir.path, "data"), ["--no-request-log"]);
}, 60_000);
afterAll(async () => {
  await demo?.stop();
  dir?.remove();
});

describe("a headless step-up", () => {
  it("names the missing scope and says to run the same command with --device", async () => {
    const { notes, username, password } = demo.ready;
    const config = join(dir.path, "config");
    // First login (notes:read) through the printed URL, followed by a form-filling user agent.
    const login = startHeadless(["login", "--print-url", notes], config);
    let url: string | undefined;
    for (let i = 0; i < 300 && !url; i++) {
      url = /Open this URL in a browser to authorize:\n\s+(\S+)/.exec(login.stderr())?.[1];
      if (!url) await new Promise((r) => setTimeout(r, 100));
    }
    expect(url, login.stderr()).toBeDefined();
    const callback = await new FormUserAgent(username, password).open(new URL(url!));
    expect((await fetch(callback)).status).toBe(200);
    expect((await login.done).code).toBe(0);

    const write = await startHeadless(
      ["fetch", "-X", "POST", "-H", "content-type: application/json", "-d", '{"text":"x"}', notes],
      config,
    ).done;
    expect(write.code, write.stderr).toBe(1);
    const refusal = write.stderr.split("\n").find((l) => l.startsWith("gatehouse fetch:")) ?? "";
    expect(refusal).toContain("needs scope notes:write");
    expect(write.stderr).toContain("--device");
    expect(write.stderr).toContain("run this command again with --device");
    expect(write.stderr).not.toContain(`gatehouse login --device ${notes}`);
  }, 90_000);
});
