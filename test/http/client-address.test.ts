/**
 * The client address behind trusted proxies (it keys the authorization server's rate limits).
 * Proxies append to X-Forwarded-For by default, so everything left of what the trusted proxies
 * wrote is the client's own text: the address is the Nth entry from the right, N = the number of
 * trusted hops. A spoofed leftmost entry must not change it; a malformed entry falls back to the
 * socket address.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  clientAddress,
  type ListeningServer,
  listen,
  nodeRequireBearer,
  toNodeListener,
} from "../../src/http/node.js";
import { webRequestHead } from "../../src/http/node-listener.js";
import { createResourceServer } from "../../src/resource-server/index.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** A server recording the client address of each request; `trustProxy` as given. */
async function recording(trustProxy: boolean | number | undefined) {
  const seen: (string | undefined)[] = [];
  running = await listen(
    async (request) => {
      seen.push(clientAddress(request));
      return new Response(null, { status: 204 });
    },
    trustProxy === undefined ? {} : { trustProxy },
  );
  const url = running.url;
  const addressFor = async (xff: string | string[] | undefined): Promise<string | undefined> => {
    const fields = xff === undefined ? [] : Array.isArray(xff) ? xff : [xff];
    const head = fields.map((v) => `X-Forwarded-For: ${v}\r\n`).join("");
    const out = await rawRequest(
      url,
      `GET / HTTP/1.1\r\nHost: ${new URL(url).host}\r\n${head}Connection: close\r\n\r\n`,
    );
    expect(out.startsWith("HTTP/1.1 204")).toBe(true);
    return seen.at(-1);
  };
  return addressFor;
}

describe("client address with trustProxy (X-Forwarded-For)", () => {
  it("rule: a spoofed leftmost entry does not change the address (one trusted hop)", async () => {
    const addressFor = await recording(true);
    // The proxy appended 203.0.113.9; whatever the client wrote before it is ignored.
    expect(await addressFor("203.0.113.9")).toBe("203.0.113.9");
    expect(await addressFor("6.6.6.6, 203.0.113.9")).toBe("203.0.113.9");
    expect(await addressFor("1.1.1.1,2.2.2.2 , 203.0.113.9")).toBe("203.0.113.9");
    // Several header fields are one list (RFC 9110 §5.3): the last field's last entry is the proxy's.
    expect(await addressFor(["6.6.6.6", "203.0.113.9"])).toBe("203.0.113.9");
  });

  it("trustProxy: 2 takes the second entry from the right (the first proxy's view of the client)", async () => {
    const addressFor = await recording(2);
    expect(await addressFor("6.6.6.6, 198.51.100.7, 10.0.0.2")).toBe("198.51.100.7");
    expect(await addressFor("198.51.100.7, 10.0.0.2")).toBe("198.51.100.7");
  });

  it("rule: fewer entries than trusted hops → the socket address", async () => {
    const addressFor = await recording(2);
    expect(await addressFor("198.51.100.7")).toBe("127.0.0.1");
    expect(await addressFor(undefined)).toBe("127.0.0.1");
  });

  it("rule: a malformed entry (not an IP) → the socket address", async () => {
    const addressFor = await recording(true);
    for (const bad of [
      "unknown",
      "203.0.113.9 6.6.6.6",
      "1.2.3.4.5",
      "999.1.1.1",
      "_hidden",
      "",
      "a.example",
    ]) {
      expect(await addressFor(`6.6.6.6, ${bad}`), bad).toBe("127.0.0.1");
    }
  });

  it("whitespace is stripped; IPv6, and an address with a port as some proxies write it, are accepted", async () => {
    const addressFor = await recording(true);
    expect(await addressFor("6.6.6.6,   203.0.113.9   ")).toBe("203.0.113.9");
    expect(await addressFor("2001:db8::1")).toBe("2001:db8::1");
    expect(await addressFor("203.0.113.9:54321")).toBe("203.0.113.9");
    expect(await addressFor("[2001:db8::1]:443")).toBe("2001:db8::1");
  });

  it("without trustProxy (or with 0 hops) X-Forwarded-For is never believed", async () => {
    for (const trustProxy of [undefined, false, 0]) {
      const addressFor = await recording(trustProxy);
      expect(await addressFor("203.0.113.9")).toBe("127.0.0.1");
      await running?.close();
      running = undefined;
    }
  });

  it.each([[-1], [1.5], [Number.NaN], ["2"], [null]])(
    "rule: trustProxy %s is a misconfiguration, refused at set-up",
    (bad) => {
      expect(() =>
        toNodeListener(async () => new Response(), { trustProxy: bad as unknown as number }),
      ).toThrow(/trustProxy/);
    },
  );

  it("nodeRequireBearer takes the same option and refuses the same misconfigurations", () => {
    const gate = createResourceServer({
      resource: "https://mcp.example.com",
      authorizationServers: ["https://as.example"],
      verifier: { verify: async () => Promise.reject(new Error("not used")) },
    });
    expect(() => nodeRequireBearer(gate, { trustProxy: 2 }, () => {})).not.toThrow();
    expect(() => nodeRequireBearer(gate, { trustProxy: -1 }, () => {})).toThrow(/trustProxy/);
  });

  it("webRequestHead (the Express adapter's path) takes the same hop count", async () => {
    const seen: Record<string, string | undefined> = {};
    const server = createServer((req, res) => {
      for (const trustProxy of [2, true, false] as const) {
        seen[String(trustProxy)] = clientAddress(webRequestHead(req, { trustProxy }));
      }
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await rawRequest(
        url,
        `GET / HTTP/1.1\r\nHost: api.example\r\nX-Forwarded-For: 6.6.6.6, 198.51.100.7, 10.0.0.2\r\n` +
          "Connection: close\r\n\r\n",
      );
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    expect(seen).toEqual({ "2": "198.51.100.7", true: "10.0.0.2", false: "127.0.0.1" });
  });
});
