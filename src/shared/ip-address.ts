/**
 * Special-use IP address classification for the server-side request forgery guard in
 * `guarded-fetch.ts` (draft-ietf-oauth-client-id-metadata-document §6; RFC 6890 special-purpose
 * registries). Pure functions on address text: no DNS, no sockets.
 *
 * IPv4-mapped (`::ffff:0:0/96`) and NAT64 (`64:ff9b::/96`) IPv6 addresses are judged by the IPv4
 * address they embed, since that is where a connection to them ends up.
 *
 * Which classes a connection may reach is decided in one place, {@link isAllowedAddress}, from an
 * {@link AddressPolicy}: public unicast always, loopback under the tests-only opt-in, and the
 * private ranges (RFC 1918, RFC 4193 unique local) under the private-network opt-in an operator
 * gives for a destination they configured. Nothing admits link-local (169.254.169.254, the cloud
 * metadata service, lives there), unspecified, multicast or the other special-purpose ranges.
 */

/**
 * Where an address points. `loopback` and `private` are separate from `special` only so their
 * opt-ins can allow them; all three are refused by default.
 */
export type AddressClass = { kind: "public" } | { kind: "loopback" | "private" | "special"; range: string };

type NonPublicKind = "loopback" | "private" | "special";
type V4Range = readonly [base: string, prefix: number, name: string, kind: NonPublicKind];

/**
 * IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates), plus multicast and class E.
 * `private` is RFC 1918 §3 only; shared address space (RFC 6598, CGNAT) stays `special`.
 */
const SPECIAL_V4: readonly V4Range[] = [
  ["0.0.0.0", 8, "this network 0.0.0.0/8", "special"],
  ["10.0.0.0", 8, "private 10.0.0.0/8", "private"],
  ["100.64.0.0", 10, "shared address space (CGNAT) 100.64.0.0/10", "special"],
  ["127.0.0.0", 8, "loopback 127.0.0.0/8", "loopback"],
  ["169.254.0.0", 16, "link-local 169.254.0.0/16", "special"],
  ["172.16.0.0", 12, "private 172.16.0.0/12", "private"],
  ["192.0.0.0", 24, "IETF protocol assignments 192.0.0.0/24", "special"],
  ["192.0.2.0", 24, "documentation 192.0.2.0/24", "special"],
  ["192.31.196.0", 24, "AS112 192.31.196.0/24", "special"],
  ["192.52.193.0", 24, "AMT 192.52.193.0/24", "special"],
  ["192.88.99.0", 24, "6to4 relay anycast 192.88.99.0/24", "special"],
  ["192.168.0.0", 16, "private 192.168.0.0/16", "private"],
  ["192.175.48.0", 24, "AS112 192.175.48.0/24", "special"],
  ["198.18.0.0", 15, "benchmarking 198.18.0.0/15", "special"],
  ["198.51.100.0", 24, "documentation 198.51.100.0/24", "special"],
  ["203.0.113.0", 24, "documentation 203.0.113.0/24", "special"],
  ["224.0.0.0", 4, "multicast 224.0.0.0/4", "special"],
  ["240.0.0.0", 4, "reserved and broadcast 240.0.0.0/4", "special"],
];

function parseIPv4(text: string): number | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    value = value * 256 + n;
  }
  return value;
}

const SPECIAL_V4_PARSED = SPECIAL_V4.map(([base, prefix, name, kind]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { network: (parseIPv4(base) ?? 0) & mask, mask, name, kind };
});

function classifyV4(value: number): AddressClass {
  for (const range of SPECIAL_V4_PARSED) {
    if ((value & range.mask) >>> 0 === range.network >>> 0) return { kind: range.kind, range: range.name };
  }
  return { kind: "public" };
}

/** Eight 16-bit groups, or undefined when `text` is not a plain IPv6 address (zones are refused). */
function parseIPv6(text: string): number[] | undefined {
  if (text.includes("%")) return undefined;
  let rest = text;
  // A dotted IPv4 tail (::ffff:127.0.0.1) becomes two hex groups before the groups are read.
  const lastColon = rest.lastIndexOf(":");
  if (lastColon >= 0 && rest.slice(lastColon + 1).includes(".")) {
    const v4 = parseIPv4(rest.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    rest = `${rest.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = rest.split("::");
  if (halves.length > 2) return undefined;
  const toGroups = (s: string): number[] | undefined => {
    if (s === "") return [];
    const groups: number[] = [];
    for (const g of s.split(":")) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      groups.push(Number.parseInt(g, 16));
    }
    return groups;
  };
  const head = toGroups(halves[0] ?? "");
  const back = halves.length === 2 ? toGroups(halves[1] ?? "") : [];
  if (!head || !back) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const missing = 8 - head.length - back.length;
    if (missing < 1) return undefined;
    groups = [...head, ...new Array<number>(missing).fill(0), ...back];
  } else {
    groups = head;
  }
  return groups.length === 8 ? groups : undefined;
}

function v6Prefix(groups: number[], prefix: readonly number[], bits: number): boolean {
  for (let i = 0; bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if (((groups[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function embeddedV4(groups: number[]): number {
  return ((groups[6] ?? 0) * 0x10000 + (groups[7] ?? 0)) >>> 0;
}

function classifyV6(groups: number[]): AddressClass {
  const allZeroUpTo = (n: number) => groups.slice(0, n).every((g) => g === 0);
  if (allZeroUpTo(8)) return { kind: "special", range: "unspecified ::/128" };
  if (allZeroUpTo(7) && groups[7] === 1) return { kind: "loopback", range: "loopback ::1/128" };
  // IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 reach the embedded IPv4 address: judge that.
  if (allZeroUpTo(5) && groups[5] === 0xffff) {
    const inner = classifyV4(embeddedV4(groups));
    return inner.kind === "public" ? inner : { kind: inner.kind, range: `IPv4-mapped ${inner.range}` };
  }
  if (v6Prefix(groups, [0x64, 0xff9b, 0, 0, 0, 0], 96)) {
    const inner = classifyV4(embeddedV4(groups));
    return inner.kind === "public" ? inner : { kind: inner.kind, range: `NAT64 ${inner.range}` };
  }
  const named: readonly [readonly number[], number, string][] = [
    [[0, 0, 0, 0, 0xffff, 0], 96, "IPv4-translated ::ffff:0:0:0/96"],
    [[0, 0, 0, 0, 0, 0], 96, "IPv4-compatible ::/96"],
    [[0x64, 0xff9b, 1], 48, "local-use NAT64 64:ff9b:1::/48"],
    [[0x100, 0, 0, 0], 64, "discard-only 100::/64"],
    [[0x2001, 0xdb8], 32, "documentation 2001:db8::/32"],
    [[0x2001, 0], 23, "IETF protocol assignments 2001::/23"],
    [[0x2002], 16, "6to4 2002::/16"],
    [[0x3fff, 0], 20, "documentation 3fff::/20"],
    [[0xfe80], 10, "link-local fe80::/10"],
    [[0xfec0], 10, "site-local fec0::/10"],
    [[0xff00], 8, "multicast ff00::/8"],
  ];
  for (const [prefix, bits, name] of named) {
    if (v6Prefix(groups, prefix, bits)) return { kind: "special", range: name };
  }
  // RFC 4193 unique local addresses: IPv6's private ranges.
  if (v6Prefix(groups, [0xfc00], 7)) return { kind: "private", range: "unique local fc00::/7" };
  // Only global unicast 2000::/3 is routable on the internet; everything else is reserved.
  if (!v6Prefix(groups, [0x2000], 3)) return { kind: "special", range: "outside global unicast 2000::/3" };
  return { kind: "public" };
}

/**
 * Classifies an IP address (v4 dotted-decimal or v6, brackets allowed). Anything that does not
 * parse as a plain address is `special` (fail closed).
 */
export function classifyAddress(address: string): AddressClass {
  const text = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address;
  const v4 = parseIPv4(text);
  if (v4 !== undefined) return classifyV4(v4);
  const v6 = text.includes(":") ? parseIPv6(text) : undefined;
  if (v6) return classifyV6(v6);
  return { kind: "special", range: "not a plain IP address" };
}

/** The address classes a connection may reach besides public unicast. */
export interface AddressPolicy {
  /** DANGEROUS, tests only: 127.0.0.0/8 and ::1 (re-opens server-side request forgery to this machine). */
  loopback: boolean;
  /**
   * RFC 1918 and fc00::/7: only for a destination an operator configured (an upstream provider on
   * their own network), never for a URL taken from a request.
   */
  privateNetwork: boolean;
}

/** The one decision of which addresses a connection may reach (DNS answers and connected sockets alike). */
export function isAllowedAddress(address: string, policy: AddressPolicy): boolean {
  const c = classifyAddress(address);
  if (c.kind === "public") return true;
  if (c.kind === "loopback") return policy.loopback;
  if (c.kind === "private") return policy.privateNetwork;
  return false;
}

/** The range an address falls in, for error messages (`public` when it is in none). */
export function classDescription(address: string): string {
  const c = classifyAddress(address);
  return c.kind === "public" ? "public" : c.range;
}
