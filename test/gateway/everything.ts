/**
 * @modelcontextprotocol/server-everything in Streamable HTTP mode, its own process on a free
 * loopback port (not a test file): the real MCP server the gateway and check tests stand in front of.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { freePort } from "../support/free-port.js";

export { freePort };

/** server-everything in Streamable HTTP mode, as `npx @modelcontextprotocol/server-everything streamableHttp` runs it. */
export async function startEverything(): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const entry = createRequire(import.meta.url).resolve(
    "@modelcontextprotocol/server-everything/dist/index.js",
  );
  const child = spawn(process.execPath, [entry, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let text = "";
    const timer = setTimeout(() => reject(new Error(`server-everything did not start: ${text}`)), 20_000);
    child.stderr!.on("data", (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("listening on port")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => reject(new Error(`server-everything exited ${code}: ${text}`)));
  });
  child.stdout!.resume();
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}
