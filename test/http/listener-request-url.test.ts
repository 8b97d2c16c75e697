/**
 * The node listener takes a plain request target after a canonical origin as the URL without
 * parsing it (node-listener.ts requestUrl): the handler must see exactly the URL `new Request`
 * gives for `origin + target` (the WHATWG parser's serialisation), for plain and hostile targets
 * (dot segments plain and percent-encoded, characters the parser percent-encodes, a backslash,
 * credentials, absolute-form) and for Host values the parser normalises; a target it refuses is 400.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { rawRequest } from "../support/raw-request.js";

let running: ListeningServer | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** What `new Request(url).url` gives, or "refused" where the constructor throws. */
function standardUrl(url: string): string {
  try {
    return new Request(url).url;
  } catch {
    return "refused";
  }
}

describe("the request URL", () => {
  it("is the URL new Request gives for origin + target, plain or hostile, whatever the Host", async () => {
    running = await listen(async (request) => new Response(request.url));
    const port = new URL(running.url).port;
    const targets = [
      "/api/notes",
      "/api/notes?x=1&y=a:b@c",
      "/a/./b",
      "/a/../b",
      "/a/b/..",
      "/a/%2e%2E/b",
      "/a/%2E/b",
      "/.",
      "/a?q=/../x",
      "/a'b?c'd",
      "/a^b",
      "/a|b",
      "/a\\b/../c",
      "/a{b}`c",
      "/a%zz",
      "//double//slash",
      "/a?",
      "/a#frag",
      "/@user:pw",
      "/~user/(x)*+,;=!$&",
      "http://127.0.0.1/absolute",
    ];
    const hosts = [`127.0.0.1:${port}`, `LOCALHOST:${port}`, `127.1:${port}`, "127.0.0.1:80", "Example.COM"];
    for (const host of hosts) {
      for (const target of targets) {
        const out = await rawRequest(
          running.url,
          `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
        );
        const status = out.slice(0, out.indexOf("\r\n"));
        const body = out.slice(out.indexOf("\r\n\r\n") + 4);
        const expected = standardUrl(`http://${host}${target}`);
        const seen =
          status === "HTTP/1.1 200 OK" ? body : status === "HTTP/1.1 400 Bad Request" ? "refused" : status;
        expect({ host, target, url: seen }).toEqual({ host, target, url: expected });
      }
    }
  });
});
