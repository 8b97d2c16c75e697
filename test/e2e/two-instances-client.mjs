// One instance of a client for two-instances.test.ts: Gatehouse's own client (the built package,
// gatehouse/client) in a process of its own, with its own token store and the shared pre-registered
// client id. It opens "the browser" by writing the URL to stdout for the test to open in Chromium,
// and takes commands on stdin, one a line: "get" or "post <text>" (the notes resource), answering
// each with its events and one result line, all as JSON lines.
import { createInterface } from "node:readline";
import { AuthClient, browserSession, MemoryTokenStore } from "../../dist/client/index.js";

const [notes, issuer, clientId] = process.argv.slice(2);
const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const client = new AuthClient({
  store: new MemoryTokenStore(),
  clientName: "Shared CLI",
  preregisteredClients: { [issuer]: { client_id: clientId } },
  authorizationSession: browserSession({
    print: () => {},
    timeoutMs: 60_000,
    open: async (url) => {
      send({ type: "open", url: url.href });
      return true;
    },
  }),
  onEvent: (event) => send({ type: "event", event: event.type }),
});

for await (const line of createInterface({ input: process.stdin })) {
  const [command, ...rest] = line.split(" ");
  try {
    const response =
      command === "post"
        ? await client.fetch(notes, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ text: rest.join(" ") }),
          })
        : await client.fetch(notes);
    send({ type: "result", status: response.status, body: await response.text() });
  } catch (error) {
    send({
      type: "result",
      status: 0,
      body: error instanceof Error ? `${error.name}: ${error.message}` : "error",
    });
  }
}
