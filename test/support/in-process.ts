/**
 * In-process authorization servers for the scale and fault tests that need to reach inside the
 * server (its clock, its options) where a CLI process cannot: the shared test settings, served on
 * 127.0.0.1 port 0, and the flow options for the test client.
 */
import {
  type AuthorizationServer,
  type AuthorizationServerOptions,
  createAuthorizationServer,
} from "../../src/authorization-server/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import type { FlowOptions } from "./flow.js";
import { CLIENT_ID, PASSWORD, REDIRECT_URI, RESOURCE, SCOPES, SHARED_ISSUER } from "./instances.js";

export interface InProcessServer {
  server: AuthorizationServer;
  http: ListeningServer;
  close(): Promise<void>;
}

/**
 * Serves an authorization server over `store` with the shared settings (SHARED_ISSUER, RESOURCE
 * with SCOPES, plain http on loopback, no background maintenance, silent log); `options` adds to or
 * overrides them.
 */
export async function serveInProcess(
  store: AuthorizationStore,
  options: Partial<AuthorizationServerOptions> = {},
): Promise<InProcessServer> {
  const server = await createAuthorizationServer({
    issuer: SHARED_ISSUER,
    store,
    resources: [{ uri: RESOURCE, scopes: SCOPES.split(" ") }],
    allowInsecureLoopback: true,
    maintenanceIntervalMs: 0,
    logger: { info() {}, warn() {}, error() {} },
    ...options,
  });
  const http = await listen(server.fetch);
  return {
    server,
    http,
    async close() {
      await http.close();
      await server.close();
    },
  };
}

/** Flow options for the test client asking for SCOPES and offline_access, as `username`. */
export function testFlow(instanceFor: FlowOptions["instanceFor"], username: string): FlowOptions {
  return {
    instanceFor,
    clientId: CLIENT_ID,
    redirectUri: REDIRECT_URI,
    resource: RESOURCE,
    scope: `${SCOPES} offline_access`,
    user: { username, password: PASSWORD },
  };
}
