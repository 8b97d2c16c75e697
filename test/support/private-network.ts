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
 * The servers' certificates come from a throw-away "private CA" made here with `openssl` (apart
 * from test/support/tls.ts's), so a test shows that the provider's own `ca` option, not the
 * loopback test opt-in, is what makes TLS succeed.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { isIPv6 } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

function run(command: string, args: string[], cwd?: string): void {
  execFileSync(command, args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
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
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-private-ca-"));
  try {
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(
      "openssl",
      [
        "req",
        "-x509",
        ...ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "1",
        "-subj",
        "/CN=Gatehouse throw-away private-network CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ],
      dir,
    );
    run("openssl", ["req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=idp"], dir);
    writeFileSync(
      join(dir, "server.ext"),
      [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        "extendedKeyUsage=serverAuth",
        `subjectAltName=${[...addresses.map((a) => `IP:${a}`), ...dnsNames.map((n) => `DNS:${n}`)].join(",")}`,
        "",
      ].join("\n"),
    );
    run(
      "openssl",
      [
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "1",
        "-extfile",
        "server.ext",
      ],
      dir,
    );
    return {
      ca: readFileSync(join(dir, "ca.crt"), "utf8"),
      cert: readFileSync(join(dir, "server.crt"), "utf8"),
      key: readFileSync(join(dir, "server.key"), "utf8"),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
export async function startHttpsServerOn(
  address: string,
  tls: PrivateTls,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<HttpsServerOn> {
  let requests = 0;
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    requests++;
    handler(req, res);
  });
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, address, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://${isIPv6(address) ? `[${address}]` : address}:${port}`,
    requests: () => requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
