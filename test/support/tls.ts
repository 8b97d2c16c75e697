/**
 * A throw-away certificate authority and a server certificate for `localhost`, `127.0.0.1` and
 * `::1`, made with the `openssl` command in a temporary directory (removed afterwards), plus a
 * small HTTPS server on 127.0.0.1 for tests that need a real TLS peer.
 *
 * Tests trust the CA only through the loudly named loopback opt-in of the guarded fetch.
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import { type AddressInfo, isIPv6, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestTls {
  /** PEM of the CA certificate (pass to `dangerouslyAllowLoopbackForTesting.ca`). */
  ca: string;
  /** PEM of the server certificate and its private key. */
  cert: string;
  key: string;
}

let cached: TestTls | undefined;

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
  } catch (cause) {
    throw new Error(
      `test TLS: could not run the openssl command (install it with apt-get install -y openssl): openssl ${args[0]}`,
      { cause },
    );
  }
}

/**
 * A throw-away CA named `caName` and a server certificate (`CN=serverName`) it signed for the
 * `subjectAltName` list (e.g. `DNS:localhost,IP:127.0.0.1`), both valid for one day, made in a
 * temporary directory that is removed afterwards.
 */
export function throwAwayCa(caName: string, serverName: string, subjectAltName: string): TestTls {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-tls-"));
  try {
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
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
        `/CN=${caName}`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ],
      dir,
    );
    openssl(["req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", `/CN=${serverName}`], dir);
    writeFileSync(
      join(dir, "server.ext"),
      [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        "extendedKeyUsage=serverAuth",
        `subjectAltName=${subjectAltName}`,
        "",
      ].join("\n"),
    );
    openssl(
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

/** Creates (once per test file) a CA and a server certificate valid for one day. */
export function testTls(): TestTls {
  cached ??= throwAwayCa("Gatehouse throw-away test CA", "localhost", "DNS:localhost,IP:127.0.0.1,IP:::1");
  return cached;
}

export interface TestHttpsServer {
  /** `https://<address>:<port>` (the address in brackets when IPv6) */
  origin: string;
  port: number;
  server: Server;
  /** HTTP requests received so far (TLS handshakes that never sent a request do not count). */
  requests(): number;
  /** TCP connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** Starts an HTTPS server on 127.0.0.1, port 0, with the test certificate. */
export function startTestHttpsServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestHttpsServer> {
  return startCountingHttpsServer("127.0.0.1", testTls(), handler);
}

/**
 * An HTTPS server on `address` (port 0) with `tls`'s certificate, counting requests and
 * connections; `close` also destroys the open sockets.
 */
export async function startCountingHttpsServer(
  address: string,
  tls: Pick<TestTls, "cert" | "key">,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestHttpsServer> {
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
  // A client that hangs up mid-handshake (by design, in the guard tests) is not a test failure.
  server.on("tlsClientError", () => {});
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, address, resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://${isIPv6(address) ? `[${address}]` : address}:${port}`,
    port,
    server,
    requests: () => requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
