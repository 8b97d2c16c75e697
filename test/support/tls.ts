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
import type { AddressInfo, Socket } from "node:net";
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

/** Creates (once per test file) a CA and a server certificate valid for one day. */
export function testTls(): TestTls {
  if (cached) return cached;
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
        "/CN=Gatehouse throw-away test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
      ],
      dir,
    );
    openssl(["req", ...ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"], dir);
    writeFileSync(
      join(dir, "server.ext"),
      [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature",
        "extendedKeyUsage=serverAuth",
        "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1",
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
    cached = {
      ca: readFileSync(join(dir, "ca.crt"), "utf8"),
      cert: readFileSync(join(dir, "server.crt"), "utf8"),
      key: readFileSync(join(dir, "server.key"), "utf8"),
    };
    return cached;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface TestHttpsServer {
  /** `https://127.0.0.1:<port>` */
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
export async function startTestHttpsServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TestHttpsServer> {
  const tls = testTls();
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
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://127.0.0.1:${port}`,
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
