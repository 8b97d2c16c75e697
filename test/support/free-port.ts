/**
 * A loopback TCP port free at the moment of asking, for a server whose URL must be known before it
 * starts (a resource URI in the authorization server's configuration, a README command's port).
 * Another process can take it before the server binds; tests that can listen on port 0 should.
 */
import { createServer } from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}
