/**
 * The listen errors of `serveHttp` (what `gatehouse serve` and `gatehouse demo` print when they
 * cannot bind): a message saying what to do, never Node's bare error code; and the client address it
 * hands the handler (rate limits key on it).
 */
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { listenErrorMessage, serveHttp } from "../../src/cli/server-runtime.js";
import { silentLogger } from "../../src/shared/log.js";

function errno(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`listen ${code}`), { code });
}

describe("listenErrorMessage", () => {
  it("EADDRINUSE names the port, the host and the flag that picks any free port", () => {
    expect(listenErrorMessage(errno("EADDRINUSE"), 4001, "127.0.0.1", "--resource-port")).toBe(
      "port 4001 on 127.0.0.1 is already in use: stop the other process or pass --resource-port 0 (any free port)",
    );
  });

  it("EACCES says the port needs privileges and what to use instead", () => {
    expect(listenErrorMessage(errno("EACCES"), 443, "0.0.0.0")).toBe(
      "port 443 needs privileges: use a port above 1023",
    );
  });

  it("other errors keep their own message, with the address", () => {
    expect(listenErrorMessage(errno("EMFILE"), 80, "::1")).toBe("cannot listen on ::1:80: listen EMFILE");
  });
});

describe("serveHttp", () => {
  it("rejects a port in use with the readable message (and names --port by default)", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      await expect(serveHttp({ name: "test", host: "127.0.0.1", port, log: silentLogger })).rejects.toThrow(
        `port ${port} on 127.0.0.1 is already in use: stop the other process or pass --port 0`,
      );
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });

  it.each([true, false])("hands the client address to the handler (request log %s)", async (requestLog) => {
    const server = await serveHttp({
      name: "test",
      host: "127.0.0.1",
      port: 0,
      log: silentLogger,
      requestLog,
    });
    try {
      server.setHandler(async (_request, info) => new Response(info?.clientAddress ?? "none"));
      const response = await fetch(`http://127.0.0.1:${server.port}/`);
      expect(await response.text()).toBe("127.0.0.1");
    } finally {
      await server.close();
    }
  });
});
