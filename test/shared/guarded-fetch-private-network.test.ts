/**
 * The private-network opt-in of the guarded fetch (`allowPrivateNetwork`, for destinations an
 * operator configured, never for URLs from a request): RFC 1918 and ULA addresses become
 * reachable, and nothing else does. Link-local (the cloud metadata address 169.254.169.254
 * among it), unspecified, multicast and the other special ranges stay refused, loopback stays
 * behind the tests-only opt-in, and a request under one policy never shares an answer with a
 * request under another.
 *
 * Real connections: HTTPS servers listen on 10.77.0.1, fd00:77::1 and 169.254.77.77, added to the
 * loopback interface for this file (test/support/private-network.ts), with a certificate from a
 * private CA that only the `ca` option makes trusted.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AddressPolicy,
  createGuardedFetch,
  type GuardedFetchError,
  type GuardedFetchOptions,
  isAllowedAddress,
  type LookupFunction,
} from "../../src/shared/guarded-fetch.js";
import {
  addAddressToLoopback,
  type HttpsServerOn,
  type PrivateTls,
  privateCaFor,
  startHttpsServerOn,
} from "../support/private-network.js";
import { startTestHttpsServer, type TestHttpsServer, testTls } from "../support/tls.js";

const PRIVATE_V4 = "10.77.0.1";
const PRIVATE_V6 = "fd00:77::1";
const LINK_LOCAL = "169.254.77.77";

const PUBLIC_ONLY: AddressPolicy = { loopback: false, privateNetwork: false };
const PRIVATE: AddressPolicy = { loopback: false, privateNetwork: true };

describe("rule: the private-network policy admits RFC 1918 and ULA only (address check)", () => {
  it("admits RFC 1918 and fc00::/7 (also IPv4-mapped and NAT64), and only under the policy", () => {
    for (const ip of [
      "10.0.0.1",
      "10.255.255.255",
      "172.16.0.1",
      "172.31.255.255",
      "192.168.0.1",
      "192.168.255.254",
      "fc00::1",
      "fd12:3456:789a::1",
      "::ffff:10.1.2.3",
      "::ffff:192.168.1.1",
      "64:ff9b::10.1.2.3",
    ]) {
      expect(isAllowedAddress(ip, PRIVATE), ip).toBe(true);
      expect(isAllowedAddress(ip, PUBLIC_ONLY), ip).toBe(false);
      expect(isAllowedAddress(ip, { loopback: true, privateNetwork: false }), ip).toBe(false);
    }
  });

  it("still refuses link-local (the metadata address), unspecified, multicast, loopback and the rest", () => {
    for (const ip of [
      "169.254.169.254",
      "169.254.0.1",
      "::ffff:169.254.169.254",
      "64:ff9b::169.254.169.254",
      "fe80::1",
      "fe80::a9fe:a9fe",
      "0.0.0.0",
      "0.1.2.3",
      "::",
      "224.0.0.1",
      "239.255.255.250",
      "ff02::1",
      "255.255.255.255",
      "240.0.0.1",
      "100.64.0.1",
      "192.0.2.1",
      "198.18.0.1",
      "fec0::1",
      "127.0.0.1",
      "::1",
      "::ffff:127.0.0.1",
      "fe80::1%lo",
      "not an address",
    ]) {
      expect(isAllowedAddress(ip, PRIVATE), ip).toBe(false);
    }
    // Loopback needs the tests-only opt-in, private network or not.
    expect(isAllowedAddress("127.0.0.1", { loopback: true, privateNetwork: true })).toBe(true);
    expect(isAllowedAddress("169.254.169.254", { loopback: true, privateNetwork: true })).toBe(false);
  });

  it("property: outside RFC 1918, fc00::/7 and public unicast, no IPv4 address is admitted", () => {
    const rfc1918 = (n: number) =>
      n >>> 24 === 10 || n >>> 20 === (172 << 4) + 1 || n >>> 16 === (192 << 8) + 168;
    const special = fc.oneof(
      fc.integer({ min: 0, max: 2 ** 24 - 1 }), // 0.0.0.0/8
      fc.integer({ min: 0, max: 2 ** 16 - 1 }).map((o) => 169 * 2 ** 24 + 254 * 2 ** 16 + o), // link-local
      fc.integer({ min: 0, max: 2 ** 28 - 1 }).map((o) => 224 * 2 ** 24 + o), // multicast
      fc.integer({ min: 0, max: 2 ** 28 - 1 }).map((o) => 240 * 2 ** 24 + o), // reserved, broadcast
      fc.integer({ min: 0, max: 2 ** 24 - 1 }).map((o) => 127 * 2 ** 24 + o), // loopback
      fc.integer({ min: 0, max: 2 ** 22 - 1 }).map((o) => 100 * 2 ** 24 + 64 * 2 ** 16 + o), // CGNAT
    );
    fc.assert(
      fc.property(special, (n) => {
        const dotted = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
        return (
          !rfc1918(n) && !isAllowedAddress(dotted, PRIVATE) && !isAllowedAddress(`::ffff:${dotted}`, PRIVATE)
        );
      }),
      { numRuns: 2000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Real connections to private and link-local addresses
// ---------------------------------------------------------------------------------------------

let tls: PrivateTls;
let v4: HttpsServerOn;
let v6: HttpsServerOn;
let linkLocal: HttpsServerOn;
let loopback: TestHttpsServer;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  for (const address of [PRIVATE_V4, PRIVATE_V6, LINK_LOCAL]) cleanups.push(addAddressToLoopback(address));
  tls = privateCaFor([PRIVATE_V4, PRIVATE_V6, LINK_LOCAL], ["*.corp.test"]);
  const handler = (_req: unknown, res: import("node:http").ServerResponse) => {
    res.writeHead(200, { "content-type": "application/json" }).end('{"internal":true}');
  };
  v4 = await startHttpsServerOn(PRIVATE_V4, tls, handler);
  v6 = await startHttpsServerOn(PRIVATE_V6, tls, handler);
  linkLocal = await startHttpsServerOn(LINK_LOCAL, tls, handler);
  loopback = await startTestHttpsServer(handler);
});
afterAll(async () => {
  await Promise.all([v4?.close(), v6?.close(), linkLocal?.close(), loopback?.close()]);
  for (const cleanup of cleanups) cleanup();
});

const base = (extra: Partial<GuardedFetchOptions> = {}): GuardedFetchOptions => ({
  maxBytes: 4096,
  timeoutMs: 3000,
  ...extra,
});

async function failure(promise: Promise<unknown>): Promise<GuardedFetchError> {
  try {
    await promise;
  } catch (e) {
    return e as GuardedFetchError;
  }
  throw new Error("expected the fetch to fail");
}

/** A resolver that answers every name with `addresses` (a DNS the test controls). */
const resolvingTo =
  (...addresses: string[]) =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

describe("guarded fetch to a private address", () => {
  it("without the opt-in, a private destination is refused before any connection", async () => {
    const fetch = createGuardedFetch({ resolveHost: resolvingTo(PRIVATE_V4) });
    const port = new URL(v4.origin).port;
    for (const url of [`${v4.origin}/doc`, `${v6.origin}/doc`, `https://idp.corp.test:${port}/doc`]) {
      expect((await failure(fetch(url, base({ ca: [tls.ca] })))).code, url).toBe("blocked_address");
    }
    expect(v4.connections() + v6.connections()).toBe(0);
  });

  it("with the opt-in and the private CA, an RFC 1918 and a ULA server answer (a real TLS connection)", async () => {
    const fetch = createGuardedFetch({ resolveHost: resolvingTo(PRIVATE_V4) });
    const options = base({ allowPrivateNetwork: true, ca: [tls.ca] });
    for (const url of [`${v4.origin}/doc`, `${v6.origin}/doc`]) {
      const r = await fetch(url, options);
      expect(JSON.parse(r.body), url).toEqual({ internal: true });
    }
    // Through a DNS name as well: the name's private answer is admitted under the policy.
    const named = await fetch(`https://idp.corp.test:${new URL(v4.origin).port}/doc`, options);
    expect(named.status).toBe(200);
  });

  it("the private CA is trusted only when given: without `ca` the handshake fails", async () => {
    const error = await failure(
      createGuardedFetch()(`${v4.origin}/doc`, base({ allowPrivateNetwork: true })),
    );
    expect(error.code).toBe("tls");
  });

  it("with the opt-in, link-local (a real server there), the metadata address and unspecified are refused", async () => {
    const before = linkLocal.connections();
    const fetch = createGuardedFetch();
    const options = base({ allowPrivateNetwork: true, ca: [tls.ca] });
    expect((await failure(fetch(`${linkLocal.origin}/doc`, options))).code).toBe("blocked_address");
    for (const url of [
      "https://169.254.169.254/latest/meta-data/",
      "https://[fe80::1]/doc",
      "https://0.0.0.0/doc",
      "https://[::]/doc",
      "https://224.0.0.1/doc",
      "https://[::ffff:169.254.169.254]/doc",
    ]) {
      expect((await failure(fetch(url, options))).code, url).toBe("blocked_address");
    }
    // A DNS name that answers with them, alone or next to an admitted private address.
    for (const answer of [
      ["169.254.169.254"],
      [LINK_LOCAL],
      ["0.0.0.0"],
      ["::"],
      [PRIVATE_V4, "169.254.169.254"],
      ["fe80::1"],
    ]) {
      const named = createGuardedFetch({ resolveHost: resolvingTo(...answer) });
      const port = new URL(linkLocal.origin).port;
      const error = await failure(named(`https://metadata.corp.test:${port}/doc`, options));
      expect(error.code, answer.join(",")).toBe("blocked_address");
    }
    expect(linkLocal.connections()).toBe(before);
  });

  it("the connect-time check applies the same policy: a raw lookup to link-local is cut before HTTP", async () => {
    const rawTo =
      (address: string): LookupFunction =>
      (_host, options, callback) =>
        options.all ? callback(null, [{ address, family: 4 }]) : callback(null, address, 4);
    const port = new URL(linkLocal.origin).port;
    const options = base({ allowPrivateNetwork: true, ca: [tls.ca] });
    const requestsBefore = linkLocal.requests();
    const cut = await failure(
      createGuardedFetch({ uncheckedLookupForTesting: rawTo(LINK_LOCAL) })(
        `https://rebound.corp.test:${port}/doc`,
        options,
      ),
    );
    expect(cut.code).toBe("blocked_address");
    expect(linkLocal.requests()).toBe(requestsBefore);
    // The same raw lookup to the private server connects: the socket check admits RFC 1918.
    const ok = await createGuardedFetch({ uncheckedLookupForTesting: rawTo(PRIVATE_V4) })(
      `https://rebound.corp.test:${new URL(v4.origin).port}/doc`,
      options,
    );
    expect(ok.status).toBe(200);
  });

  it("loopback stays refused under the private-network opt-in (it is the tests-only opt-in's)", async () => {
    const error = await failure(
      createGuardedFetch()(`${loopback.origin}/doc`, base({ allowPrivateNetwork: true, ca: [testTls().ca] })),
    );
    expect(error.code).toBe("blocked_address");
    expect(loopback.requests()).toBe(0);
  });

  it("concurrent fetches of one URL under different policies or CAs never share an answer", async () => {
    const fetch = createGuardedFetch();
    const url = `${v4.origin}/shared`;
    const [admitted, refused, untrusted] = await Promise.allSettled([
      fetch(url, base({ allowPrivateNetwork: true, ca: [tls.ca] })),
      fetch(url, base({ ca: [tls.ca] })),
      fetch(url, base({ allowPrivateNetwork: true })),
    ]);
    expect(admitted.status).toBe("fulfilled");
    expect(refused.status === "rejected" && (refused.reason as GuardedFetchError).code).toBe(
      "blocked_address",
    );
    expect(untrusted.status === "rejected" && (untrusted.reason as GuardedFetchError).code).toBe("tls");
  });

  it("every other guard still holds under the opt-in (no redirects, byte cap)", async () => {
    const redirecting = await startHttpsServerOn(PRIVATE_V4, tls, (req, res) => {
      if (req.url === "/big") {
        res.writeHead(200, { "content-type": "application/json" }).end(`"${"x".repeat(10_000)}"`);
        return;
      }
      res.writeHead(302, { location: "https://169.254.169.254/latest/meta-data/" }).end();
    });
    try {
      const options = base({ allowPrivateNetwork: true, ca: [tls.ca] });
      const fetch = createGuardedFetch();
      expect((await failure(fetch(`${redirecting.origin}/go`, options))).code).toBe("redirect");
      expect((await failure(fetch(`${redirecting.origin}/big`, options))).code).toBe("too_large");
      expect(
        (await failure(fetch(`http://${PRIVATE_V4}:${new URL(redirecting.origin).port}/`, options))).code,
      ).toBe("bad_url");
    } finally {
      await redirecting.close();
    }
  });
});
