/**
 * A runtime where the lazy request cannot pass for a real one (lazy-request.ts's probe fails: Bun,
 * Deno, an undici keeping its state in private fields) gets a `Request` built eagerly. The same
 * hostile cases as listener-lazy-request.test.ts, on that path.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { overrideLazyRequestsForTests } from "../../src/http/lazy-request.js";
import { clientAddress, type ListeningServer, listen } from "../../src/http/node.js";

let running: ListeningServer | undefined;
beforeAll(() => overrideLazyRequestsForTests(false));
afterAll(() => overrideLazyRequestsForTests(undefined));
afterEach(async () => {
  await running?.close();
  running = undefined;
});

async function serve(handler: (request: Request) => Promise<unknown>) {
  const seen: { value?: unknown } = {};
  running = await listen(async (request) => {
    seen.value = await handler(request);
    return new Response("done");
  });
  return seen;
}

const refusal = async (attempt: () => unknown) => {
  try {
    await attempt();
    return "accepted";
  } catch (error) {
    return (error as Error).name;
  }
};

describe("the eagerly built request (a runtime without lazy requests)", () => {
  it("is built by the Request constructor (the runtime's slots are its own, not forwarded)", async () => {
    const seen = await serve(async (request) => ({
      instance: request instanceof Request,
      ownSlots: Object.getOwnPropertySymbols(request).length > 0,
    }));
    await fetch(running!.url);
    expect(seen.value).toEqual({ instance: true, ownSlots: true });
  });

  it("a body read twice is refused the second time; clone() after it too", async () => {
    const seen = await serve(async (request) => ({
      first: await request.text(),
      used: request.bodyUsed,
      second: await refusal(() => request.text()),
      clone: await refusal(() => request.clone()),
    }));
    await fetch(running!.url, { method: "POST", body: "once" });
    expect(seen.value).toEqual({ first: "once", used: true, second: "TypeError", clone: "TypeError" });
  });

  it("clone() keeps the body and the client address; fields read after the body", async () => {
    const seen = await serve(async (request) => {
      const copy = request.clone();
      return {
        address: clientAddress(copy),
        copy: await copy.text(),
        body: await request.text(),
        field: request.headers.get("X-NOTE"),
      };
    });
    await fetch(running!.url, { method: "POST", headers: { "x-note": "n" }, body: "b" });
    expect(seen.value).toEqual({ address: "127.0.0.1", copy: "b", body: "b", field: "n" });
  });

  it("repeated fields joined, fetch(request) carries a field set by the handler and the body", async () => {
    running = await listen(async (request) => {
      if (request.headers.get("x-hop") === "1") {
        return Response.json({ repeat: request.headers.get("x-repeat"), body: await request.text() });
      }
      request.headers.set("x-hop", "1");
      return new Response(await (await fetch(request)).text());
    });
    const res = await fetch(running.url, {
      method: "POST",
      headers: [
        ["x-repeat", "a"],
        ["x-repeat", "b"],
      ],
      body: "payload",
    });
    expect(await res.json()).toEqual({ repeat: "a, b", body: "payload" });
  });

  it("signal: aborted when the client leaves", async () => {
    const aborted = new Promise<boolean>((resolve) => {
      void listen(async (request) => {
        request.signal.addEventListener("abort", () => resolve(request.signal.aborted));
        await new Promise((r) => setTimeout(r, 2_000));
        return new Response("late");
      }).then((server) => {
        running = server;
        const controller = new AbortController();
        fetch(server.url, { signal: controller.signal }).catch(() => {});
        setTimeout(() => controller.abort(), 100);
      });
    });
    expect(await aborted).toBe(true);
  });
});
