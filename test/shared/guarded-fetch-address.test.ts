import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  classifyAddress,
  createGuardedFetch,
  fetchUrlProblem,
  GuardedFetchError,
  isAllowedAddress,
} from "../../src/shared/guarded-fetch.js";

// The special-use IPv4 ranges SECURITY.md names, written out independently of the implementation.
const SPECIAL_V4_CIDRS = [
  "0.0.0.0/8",
  "10.0.0.0/8",
  "100.64.0.0/10",
  "127.0.0.0/8",
  "169.254.0.0/16",
  "172.16.0.0/12",
  "192.0.0.0/24",
  "192.0.2.0/24",
  "192.168.0.0/16",
  "198.18.0.0/15",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "224.0.0.0/4",
  "240.0.0.0/4",
];

function v4ToString(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}
function cidrV4(cidr: string): { base: number; size: number } {
  const [ip = "", bits = "32"] = cidr.split("/");
  const base = ip.split(".").reduce((acc, p) => acc * 256 + Number(p), 0);
  return { base, size: 2 ** (32 - Number(bits)) };
}
/** An arbitrary address inside the range. */
function inV4Range(cidr: string): fc.Arbitrary<number> {
  const { base, size } = cidrV4(cidr);
  return fc.integer({ min: 0, max: size - 1 }).map((off) => base + off);
}
const PUBLIC_ONLY = { loopback: false, privateNetwork: false };
const LOOPBACK_OPT_IN = { loopback: true, privateNetwork: false };
const anySpecialV4 = fc.oneof(...SPECIAL_V4_CIDRS.map(inV4Range));
const hex = (n: number) => n.toString(16);

describe("rule: every special-use address is refused (address classifier)", () => {
  it("refuses examples from each special-use IPv4 range, and allows their neighbours", () => {
    for (const ip of [
      "0.0.0.0",
      "10.1.2.3",
      "100.64.0.1",
      "100.127.255.255",
      "127.0.0.1",
      "127.255.255.254",
      "169.254.169.254",
      "172.16.0.1",
      "172.31.255.255",
      "192.0.0.8",
      "192.0.2.1",
      "192.88.99.1",
      "192.168.1.1",
      "198.18.0.1",
      "198.19.255.255",
      "198.51.100.7",
      "203.0.113.9",
      "224.0.0.1",
      "239.255.255.250",
      "240.0.0.1",
      "255.255.255.255",
    ]) {
      expect(classifyAddress(ip).kind, ip).not.toBe("public");
    }
    for (const ip of [
      "1.1.1.1",
      "8.8.8.8",
      "9.255.255.255",
      "11.0.0.0",
      "100.63.255.255",
      "100.128.0.0",
      "126.255.255.255",
      "128.0.0.0",
      "169.253.255.255",
      "172.15.255.255",
      "172.32.0.0",
      "192.167.255.255",
      "192.169.0.0",
      "198.17.255.255",
      "198.20.0.0",
      "223.255.255.255",
    ]) {
      expect(classifyAddress(ip), ip).toEqual({ kind: "public" });
    }
  });

  it("refuses special-use IPv6 addresses and IPv4 reached through IPv6", () => {
    for (const ip of [
      "::",
      "::1",
      "0:0:0:0:0:0:0:1",
      "0000:0000::0001",
      "[::1]",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "::FFFF:7F00:0001",
      "::ffff:10.0.0.1",
      "::ffff:169.254.169.254",
      "64:ff9b::7f00:1",
      "64:ff9b::10.0.0.1",
      "64:ff9b:1::1",
      "::127.0.0.1",
      "::ffff:0:7f00:1",
      "100::1",
      "2001:db8::1",
      "2001::1",
      "2002:7f00:1::1",
      "3fff::1",
      "fc00::1",
      "fd12:3456::1",
      "fe80::1",
      "febf::1",
      "fec0::1",
      "ff02::1",
      "fe80::1%eth0",
      "not an address",
      "",
      "1.2.3",
      "1::2::3",
    ]) {
      expect(classifyAddress(ip).kind, ip).not.toBe("public");
    }
    for (const ip of ["2606:4700:4700::1111", "2a00:1450:4001::1", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8"]) {
      expect(classifyAddress(ip), ip).toEqual({ kind: "public" });
    }
  });

  it("the loopback opt-in admits loopback only, never other special ranges", () => {
    expect(isAllowedAddress("127.0.0.1", LOOPBACK_OPT_IN)).toBe(true);
    expect(isAllowedAddress("::1", LOOPBACK_OPT_IN)).toBe(true);
    expect(isAllowedAddress("::ffff:127.0.0.1", LOOPBACK_OPT_IN)).toBe(true);
    for (const ip of ["10.0.0.1", "0.0.0.0", "169.254.169.254", "192.168.0.1", "fc00::1", "::"]) {
      expect(isAllowedAddress(ip, LOOPBACK_OPT_IN), ip).toBe(false);
    }
    expect(isAllowedAddress("127.0.0.1", PUBLIC_ONLY)).toBe(false);
  });

  it("property: any address in a special-use IPv4 range is refused, in every spelling", () => {
    fc.assert(
      fc.property(anySpecialV4, fc.boolean(), (n, upper) => {
        const dotted = v4ToString(n);
        const high = hex(n >>> 16);
        const low = hex(n & 0xffff);
        const spellings = [
          dotted,
          `::ffff:${dotted}`,
          `::ffff:${high}:${low}`,
          `0:0:0:0:0:ffff:${high}:${low}`,
          `64:ff9b::${dotted}`,
          `64:ff9b::${high}:${low}`,
          `[::ffff:${dotted}]`,
        ].map((s) => (upper ? s.toUpperCase() : s));
        for (const s of spellings) {
          if (classifyAddress(s).kind === "public") return false;
          if (isAllowedAddress(s, PUBLIC_ONLY)) return false;
        }
        return true;
      }),
      { numRuns: 2000 },
    );
  });

  it("property: any address in a special-use IPv6 range is refused", () => {
    const ranges: [number[], number][] = [
      [[0xfc00], 7],
      [[0xfe80], 10],
      [[0xfec0], 10],
      [[0xff00], 8],
      [[0x2001, 0xdb8], 32],
      [[0x100, 0, 0, 0], 64],
    ];
    const group = fc.integer({ min: 0, max: 0xffff });
    const arb = fc
      .tuple(fc.constantFrom(...ranges), fc.array(group, { minLength: 8, maxLength: 8 }))
      .map(([[prefix, bits], random]) =>
        random.map((g, i) => {
          const keep = Math.max(0, Math.min(16, bits - i * 16));
          const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
          return ((prefix[i] ?? 0) & mask) | (g & ~mask & 0xffff);
        }),
      );
    fc.assert(
      fc.property(arb, (groups) => {
        const full = groups.map(hex).join(":");
        // The WHATWG serialiser gives the compressed form, a second spelling of the same address.
        const compressed = new URL(`https://[${full}]/`).hostname;
        return classifyAddress(full).kind !== "public" && classifyAddress(compressed).kind !== "public";
      }),
      { numRuns: 2000 },
    );
  });

  it("property: addresses in ordinary public blocks are allowed (the classifier does not over-block)", () => {
    const publicV4 = fc.oneof(inV4Range("8.0.0.0/8"), inV4Range("45.0.0.0/8"), inV4Range("151.101.0.0/16"));
    fc.assert(fc.property(publicV4, (n) => isAllowedAddress(v4ToString(n), PUBLIC_ONLY)));
    const group = fc.integer({ min: 0, max: 0xffff });
    const publicV6 = fc.tuple(
      fc.constantFrom(0x2600, 0x2a00, 0x2400),
      fc.array(group, { minLength: 7, maxLength: 7 }),
    );
    fc.assert(
      fc.property(publicV6, ([first, rest]) =>
        isAllowedAddress([first, ...rest].map(hex).join(":"), PUBLIC_ONLY),
      ),
    );
  });
});

describe("rule: only plain https URLs are fetched (URL checks)", () => {
  it("accepts ordinary https URLs", () => {
    for (const url of [
      "https://example.com/client.json",
      "https://example.com:8443/a/b?x=1",
      "https://EXAMPLE.com/a",
      "https://[2606:4700:4700::1111]/x",
    ]) {
      expect(fetchUrlProblem(url), url).toBeUndefined();
    }
  });

  it("refuses other schemes, userinfo, fragments, dot segments and odd host spellings", () => {
    for (const url of [
      "http://example.com/a",
      "ftp://example.com/a",
      "file:///etc/passwd",
      "https:/example.com/a",
      "https://user:pass@example.com/a",
      "https://user@example.com/a",
      "https://example.com/a#frag",
      "https://example.com/a/./b",
      "https://example.com/a/../b",
      "https://example.com/a/%2e/b",
      "https://example.com/a/%2E%2e/b",
      "https://example.com/a/.%2E",
      "https://example.com\\@evil.test/a",
      "https://example.com/a b",
      "https://example.com/\u0000",
      "https://2130706433/a",
      "https://0x7f.1/a",
      "https://0x7f000001/a",
      "https://017700000001/a",
      "https://127.1/a",
      "https://127.0.0.1./a",
      "https://%31%32%37.0.0.1/a",
      "https://[0:0:0:0:0:0:0:1]/a",
      "https://bücher.example/a",
      "https:///a",
      `https://example.com/${"a".repeat(2100)}`,
    ]) {
      expect(fetchUrlProblem(url), url).toBeTypeOf("string");
    }
  });

  it("refuses an IP-literal host in a special-use range before connecting, whatever its spelling", async () => {
    // None of these can send traffic: the refusal happens before any socket exists.
    const fetch = createGuardedFetch({
      resolveHost: () => {
        throw new Error("DNS must not be consulted for IP literals");
      },
    });
    const cases: [string, boolean][] = [
      ["https://10.0.0.1/doc", false],
      ["https://10.0.0.1/doc", true],
      ["https://169.254.169.254/latest/meta-data", true],
      ["https://0.0.0.0/doc", true],
      ["https://[fc00::1]/doc", true],
      ["https://[::ffff:10.0.0.1]/doc", true],
      ["https://127.0.0.1/doc", false],
      ["https://[::1]/doc", false],
      ["https://2130706433/doc", false],
      ["https://0x7f000001/doc", false],
      ["https://[::ffff:127.0.0.1]/doc", false],
      ["https://0177.0.0.1/doc", false],
    ];
    for (const [url, optIn] of cases) {
      const error = await fetch(url, {
        maxBytes: 100,
        timeoutMs: 1000,
        allowLoopback: optIn ? {} : false,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, url).toBeInstanceOf(GuardedFetchError);
      expect((error as GuardedFetchError).code, url).toBe("blocked_address");
    }
  });

  it("refuses a public IP literal written in a numeric spelling as bad_url", async () => {
    const fetch = createGuardedFetch();
    await expect(fetch("https://0x08080808/doc", { maxBytes: 100, timeoutMs: 1000 })).rejects.toMatchObject({
      code: "bad_url",
    });
    await expect(fetch("http://example.com/doc", { maxBytes: 100, timeoutMs: 1000 })).rejects.toMatchObject({
      code: "bad_url",
    });
  });
});

describe("guardedFetch options", () => {
  it("misuse (a non-positive cap or deadline) is a GatehouseTypeError, not a fetch failure", async () => {
    const fetch = createGuardedFetch();
    await expect(fetch("https://example.com/a", { maxBytes: 0, timeoutMs: 1000 })).rejects.toMatchObject({
      name: "GatehouseTypeError",
      code: "ERR_INVALID_OPTION",
    });
    await expect(fetch("https://example.com/a", { maxBytes: 10, timeoutMs: 0 })).rejects.toMatchObject({
      code: "ERR_INVALID_OPTION",
    });
  });
});
