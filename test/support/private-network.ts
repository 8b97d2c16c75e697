/**
 * Real HTTPS servers on private and link-local addresses, for the tests of the private-network
 * opt-in of the guarded fetch (`allowPrivateNetwork`).
 *
 * The address (10.x.y.z, fd00::/8, 169.254.x.y) is added to the loopback interface with
 * `ip addr add` for the test file's lifetime and removed afterwards, so a connection to it is a
 * real TCP and TLS connection that the connect-time address check sees as private, not loopback.
 * That needs root and iproute2 (`apt-get install -y iproute2`); without them the helper throws
 * with that message rather than letting the tests pass without a connection.
 *
 * The servers' certificates come from a throw-away "private CA" of their own (made by
 * test/support/tls.ts's `throwAwayCa`, but not the loopback test CA), so a test shows that the
 * provider's own `ca` option, not the loopback test opt-in, is what makes TLS succeed.
 */
import { execFileSync } from "node:child_process";
import type { IncomingMessage, ServerResponse } from "node:http";
import { isIPv6 } from "node:net";
import { startCountingHttpsServer, throwAwayCa } from "./tls.js";

function run(command: string, args: string[]): void {
  execFileSync(command, args, { stdio: ["ignore", "ignore", "pipe"] });
}

/**
 * Adds `address` to the loopback interface (a /32 or /128, so nothing else is routed there) and
 * returns the function that removes it again.
 */
export function addAddressToLoopback(address: string): () => void {
  const family = isIPv6(address) ? "-6" : "-4";
  const cidr = `${address}/${isIPv6(address) ? 128 : 32}`;
  // A run that crashed may have left it behind: start from a clean slate.
  try {
    run("ip", [family, "addr", "del", cidr, "dev", "lo"]);
  } catch {
    /* not there: the usual case */
  }
  try {
    run("ip", [family, "addr", "add", cidr, "dev", "lo", ...(isIPv6(address) ? ["nodad"] : [])]);
  } catch (cause) {
    throw new Error(
      `private-network tests: could not add ${cidr} to the loopback interface (they need root and iproute2: apt-get install -y iproute2)`,
      { cause },
    );
  }
  return () => {
    try {
      run("ip", [family, "addr", "del", cidr, "dev", "lo"]);
    } catch {
      /* already gone */
    }
  };
}

export interface PrivateTls {
  /** PEM of the private CA (what an operator gives as the provider's `ca`). */
  ca: string;
  cert: string;
  key: string;
}

/** A throw-away private CA and a server certificate for `addresses` and `dnsNames` (subjectAltNames). */
export function privateCaFor(addresses: string[], dnsNames: string[] = []): PrivateTls {
  return throwAwayCa(
    "Gatehouse throw-away private-network CA",
    "idp",
    [...addresses.map((a) => `IP:${a}`), ...dnsNames.map((n) => `DNS:${n}`)].join(","),
  );
}

export interface HttpsServerOn {
  /** `https://10.x.y.z:<port>` or `https://[fd00::..]:<port>` */
  origin: string;
  /** HTTP requests received so far. */
  requests(): number;
  /** TCP connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** An HTTPS server listening on `address` (port 0) with `tls`'s certificate. */
export function startHttpsServerOn(
  address: string,
  tls: PrivateTls,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<HttpsServerOn> {
  return startCountingHttpsServer(address, tls, handler);
}
