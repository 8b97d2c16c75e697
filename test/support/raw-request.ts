import { connect } from "node:net";

/** Sends raw bytes to a loopback server and resolves with the raw response text (for Host and framing tests). */
export function rawRequest(url: string, text: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(text));
    let out = "";
    socket.on("data", (d) => {
      out += d.toString();
    });
    socket.on("end", () => resolve(out));
    socket.on("error", reject);
  });
}
