import { describe, expect, it } from "vitest";
import { startLoopbackListener } from "../../../src/client/index.js";

describe("loopback redirect listener", () => {
  it("binds 127.0.0.1, ignores a wrong state, accepts the right one once, then closes", async () => {
    const listener = await startLoopbackListener({ timeoutMs: 10_000 });
    expect(listener.redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    const wait = listener.waitForCallback("good-state");
    const wrong = await fetch(`${listener.redirectUri}?code=x&state=bad-state`);
    expect(wrong.status).toBe(400);
    const right = await fetch(`${listener.redirectUri}?code=y&state=good-state`);
    expect(right.status).toBe(200);
    const callback = new URL(await wait);
    expect(callback.searchParams.get("code")).toBe("y");
    await expect(fetch(`${listener.redirectUri}?code=z&state=good-state`)).rejects.toThrow();
  });

  it("times out when no callback arrives", async () => {
    const listener = await startLoopbackListener({ timeoutMs: 50 });
    await expect(listener.waitForCallback("s")).rejects.toThrow(/no authorization callback/);
  });
});
