import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  createGuardedFetch,
  type GuardedFetchError,
  type GuardedFetchOptions,
  type LookupFunction,
} from "../../src/shared/guarded-fetch.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../support/tls.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const json = (body: string, headers: Record<string, string> = {}): Handler => {
  return (_req, res) => {
    res.writeHead(200, { "content-type": "application/json", ...headers });
    res.end(body);
  };
};

/** Writes a raw HTTP/1.1 response on the TLS socket, so framing can lie. */
const raw = (text: string, then?: (socket: NodeJS.WritableStream) => void): Handler => {
  return (req) => {
    req.socket.write(text);
    if (then) then(req.socket);
    else req.socket.end();
  };
};

let server: TestHttpsServer;
const hits = new Map<string, number>();
let inFlight = 0;
let maxInFlight = 0;
const routes: Record<string, Handler> = {
  "/ok": json('{"ok":true}'),
  "/ok-charset": json('{"ok":true}', { "content-type": "Application/JSON; charset=utf-8" }),
  "/redirect": (_req, res) => {
    res.writeHead(302, { location: "/ok" });
    res.end();
  },
  "/html": (_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<p>hi</p>");
  },
  "/no-type": (_req, res) => {
    res.writeHead(200);
    res.end("{}");
  },
  "/gzip": json("{}", { "content-encoding": "gzip" }),
  "/not-found": (_req, res) => {
    res.writeHead(404, { "content-type": "application/json" });
    res.end('{"error":"secret-body-marker"}');
  },
  "/big-declared": json(JSON.stringify({ pad: "x".repeat(5000) })),
  "/big-chunked": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }); // no length: chunked
    for (let i = 0; i < 50; i++) res.write(`${"x".repeat(1000)}`);
    res.end();
  },
  "/big-until-close": raw(
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${"x".repeat(20_000)}`,
  ),
  "/lying-length": raw(
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}${"x".repeat(50_000)}`,
  ),
  "/invalid-utf8": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(Buffer.from([0x22, 0xff, 0xfe, 0x22]));
  },
  "/slow-body": (_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write("[");
    const timer = setInterval(() => res.write("1,"), 50);
    res.on("close", () => clearInterval(timer));
  },
  "/no-headers": () => {
    /* never answers */
  },
  "/slow-ok": (_req, res) => {
    setTimeout(() => json('{"slow":true}')(_req, res), 200);
  },
  "/hold": (req, res) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    setTimeout(() => {
      inFlight--;
      json(JSON.stringify({ path: req.url }))(req, res);
    }, 100);
  },
};

beforeAll(async () => {
  server = await startTestHttpsServer((req, res) => {
    const path = (req.url ?? "").split("?")[0] ?? "";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const handler = routes[path];
    if (handler) handler(req, res);
    else {
      res.writeHead(404);
      res.end();
    }
  });
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  hits.clear();
});

const optIn = (): GuardedFetchOptions => ({
  maxBytes: 4096,
  timeoutMs: 3000,
  allowLoopback: { ca: [testTls().ca] },
});

async function failure(promise: Promise<unknown>): Promise<GuardedFetchError> {
  try {
    await promise;
  } catch (e) {
    return e as GuardedFetchError;
  }
  throw new Error("expected the fetch to fail");
}

describe("guarded fetch against a local HTTPS server (loopback opt-in)", () => {
  it("returns a JSON body, with content-type parameters and any case allowed", async () => {
    const fetch = createGuardedFetch();
    const r = await fetch(`${server.origin}/ok`, optIn());
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toEqual({ ok: true });
    const r2 = await fetch(`https://localhost:${server.port}/ok-charset`, optIn());
    expect(JSON.parse(r2.body)).toEqual({ ok: true });
  });

  it("rule: redirects are never followed", async () => {
    const e = await failure(createGuardedFetch()(`${server.origin}/redirect`, optIn()));
    expect(e.code).toBe("redirect");
    expect(e.status).toBe(302);
    expect(hits.get("/ok")).toBeUndefined();
  });

  it("rule: the content type must be application/json", async () => {
    const fetch = createGuardedFetch();
    expect((await failure(fetch(`${server.origin}/html`, optIn()))).code).toBe("content_type");
    expect((await failure(fetch(`${server.origin}/no-type`, optIn()))).code).toBe("content_type");
  });

  it("rule: compressed bodies are refused (the size cap is on decoded bytes)", async () => {
    const e = await failure(createGuardedFetch()(`${server.origin}/gzip`, optIn()));
    expect(e.code).toBe("content_encoding");
  });

  it("an error status fails with http_status and never carries the response body", async () => {
    const e = await failure(createGuardedFetch()(`${server.origin}/not-found`, optIn()));
    expect(e.code).toBe("http_status");
    expect(e.status).toBe(404);
    expect(`${e.message} ${String(e.stack)}`).not.toContain("secret-body-marker");
  });

  it("rule: the body size is capped, whatever the framing says", async () => {
    const fetch = createGuardedFetch();
    const small = { ...optIn(), maxBytes: 1000 };
    expect((await failure(fetch(`${server.origin}/big-declared`, small))).code).toBe("too_large");
    expect((await failure(fetch(`${server.origin}/big-chunked`, small))).code).toBe("too_large");
    expect((await failure(fetch(`${server.origin}/big-until-close`, small))).code).toBe("too_large");
    // A Content-Length smaller than what the peer sends: the parser stops at the declared length
    // and treats the rest as a broken next message, so either the declared body comes back (and
    // nothing past it) or the fetch fails; the 50 kB behind it are never taken as the body.
    const lying = await fetch(`${server.origin}/lying-length`, small).then(
      (r) => r.body,
      (e: GuardedFetchError) => e.code,
    );
    expect(['{"ok":true}', "network"]).toContain(lying);
  });

  it("rule: one deadline covers the body, not only the headers", async () => {
    const fetch = createGuardedFetch();
    const opts = { ...optIn(), timeoutMs: 400, maxBytes: 1_000_000 };
    expect((await failure(fetch(`${server.origin}/slow-body`, opts))).code).toBe("timeout");
    expect((await failure(fetch(`${server.origin}/no-headers`, opts))).code).toBe("timeout");
  });

  it("refuses a body that is not UTF-8", async () => {
    expect((await failure(createGuardedFetch()(`${server.origin}/invalid-utf8`, optIn()))).code).toBe(
      "bad_body",
    );
  });

  it("rule: a certificate from an untrusted CA is refused", async () => {
    const e = await failure(
      createGuardedFetch()(`${server.origin}/ok`, { maxBytes: 1000, timeoutMs: 3000, allowLoopback: {} }),
    );
    expect(e.code).toBe("tls");
    expect(hits.get("/ok")).toBeUndefined();
  });

  it("rule: concurrent fetches of one URL share one request", async () => {
    const fetch = createGuardedFetch();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => fetch(`${server.origin}/slow-ok`, optIn())),
    );
    expect(hits.get("/slow-ok")).toBe(1);
    for (const r of results) expect(JSON.parse(r.body)).toEqual({ slow: true });
    // Once settled, the next fetch is a new request (failures and results are not remembered).
    await fetch(`${server.origin}/slow-ok`, optIn());
    expect(hits.get("/slow-ok")).toBe(2);
  });

  it("a caller's abort signal detaches that caller only", async () => {
    const fetch = createGuardedFetch();
    const controller = new AbortController();
    const first = fetch(`${server.origin}/slow-ok`, { ...optIn(), signal: controller.signal });
    const second = fetch(`${server.origin}/slow-ok`, optIn());
    controller.abort();
    expect((await failure(first)).code).toBe("aborted");
    expect(JSON.parse((await second).body)).toEqual({ slow: true });
  });

  it("rule: concurrency per host is limited", async () => {
    const fetch = createGuardedFetch({ maxConcurrentPerHost: 2 });
    maxInFlight = 0;
    const results = await Promise.all(
      Array.from({ length: 7 }, (_, i) =>
        fetch(`${server.origin}/hold?i=${i}`, { ...optIn(), timeoutMs: 10_000 }),
      ),
    );
    expect(results).toHaveLength(7);
    expect(hits.get("/hold")).toBe(7);
    expect(maxInFlight).toBeGreaterThanOrEqual(1);
    expect(maxInFlight).toBeLessThanOrEqual(2);
  });
});

describe("rule: loopback and private destinations are refused without the opt-in", () => {
  const plain: GuardedFetchOptions = { maxBytes: 4096, timeoutMs: 3000 };

  it("refuses loopback by IP literal, by name and in numeric or mapped spellings, sending nothing", async () => {
    const fetch = createGuardedFetch();
    const before = server.connections();
    for (const host of [
      "127.0.0.1",
      "localhost",
      "[::1]",
      "2130706433",
      "0x7f000001",
      "[::ffff:127.0.0.1]",
      "127.0.0.2",
    ]) {
      const e = await failure(fetch(`https://${host}:${server.port}/ok`, plain));
      expect(e.code, host).toBe("blocked_address");
    }
    expect(server.connections()).toBe(before);
    expect(hits.size).toBe(0);
  });

  it("refuses a host name that resolves to a loopback or private address (DNS check)", async () => {
    for (const answer of [
      [{ address: "127.0.0.1", family: 4 }],
      [{ address: "10.0.0.7", family: 4 }],
      [{ address: "::ffff:169.254.169.254", family: 6 }],
      // A mixed answer is refused as a whole (this one is never connected to).
      [
        { address: "93.184.215.14", family: 4 },
        { address: "127.0.0.1", family: 4 },
      ],
    ]) {
      const fetch = createGuardedFetch({ resolveHost: async () => answer });
      const e = await failure(fetch(`https://client.example.test:${server.port}/ok`, plain));
      expect(e.code, JSON.stringify(answer)).toBe("blocked_address");
    }
    expect(hits.size).toBe(0);
  });

  it("with the opt-in, a name resolving to a private address is still refused", async () => {
    const fetch = createGuardedFetch({ resolveHost: async () => [{ address: "192.168.1.20", family: 4 }] });
    const e = await failure(fetch(`https://client.example.test:${server.port}/ok`, optIn()));
    expect(e.code).toBe("blocked_address");
  });

  it("rule: the connected address is checked on the socket (DNS rebinding between lookup and connect)", async () => {
    // A lookup that skips every check, standing in for a resolver that answered differently the
    // second time: only the check on the connected socket is left to catch it.
    const rebinding: LookupFunction = (_host, options, callback) => {
      if (options.all) callback(null, [{ address: "127.0.0.1", family: 4 }]);
      else callback(null, "127.0.0.1", 4);
    };
    const fetch = createGuardedFetch({ uncheckedLookupForTesting: rebinding });
    const e = await failure(fetch(`https://localhost:${server.port}/ok`, plain));
    expect(e.code).toBe("blocked_address");
    expect(hits.get("/ok")).toBeUndefined();
    // The same set-up with the loopback opt-in connects: the refusal above came from the guard.
    const ok = await fetch(`https://localhost:${server.port}/ok`, optIn());
    expect(JSON.parse(ok.body)).toEqual({ ok: true });
  });
});
