/**
 * An MCP application on the official SDK v1 (`@modelcontextprotocol/sdk` 1.32.x), written the way
 * the SDK's documentation and its OAuth client example do it: an in-memory `OAuthClientProvider`
 * whose `redirectToAuthorization` opens the browser, a `StreamableHTTPClientTransport` with that
 * provider, and on `UnauthorizedError` `transport.finishAuth(code)` followed by a reconnect (or,
 * mid-session, a retry of the call).
 */
import {
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  UnauthorizedError,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { type AuthorizationHandoff, codeFromCallback } from "./browser-user.js";
import {
  InMemoryOAuthProvider,
  type ProviderOptions,
  retryOnceAfterAuthorization,
} from "./sdk-app-support.js";

export class SdkV1Provider
  extends InMemoryOAuthProvider<OAuthClientInformationMixed, OAuthTokens, OAuthDiscoveryState>
  implements OAuthClientProvider
{
  constructor(handoff: AuthorizationHandoff, options: ProviderOptions = {}) {
    super(handoff, "Interop app (SDK v1)", options.clientId ? { client_id: options.clientId } : undefined);
  }

  /** Waits for the browser to come back to the loopback redirect and returns the code. */
  async authorizationCode(): Promise<string> {
    return codeFromCallback(await this.handoff.callback(), this.sentState);
  }
}

type ToolResult = Awaited<ReturnType<Client["callTool"]>>;

export class SdkV1NotesApp {
  #client: Client | undefined;
  #transport: StreamableHTTPClientTransport | undefined;

  constructor(
    readonly serverUrl: URL,
    readonly provider: SdkV1Provider,
  ) {}

  get protocolVersion(): string | undefined {
    return this.#transport?.protocolVersion;
  }

  /** Connects; when the SDK sent the user to the browser, finishes that and connects again. */
  async connect(): Promise<void> {
    await retryOnceAfterAuthorization(
      UnauthorizedError,
      async () => {
        this.#transport = new StreamableHTTPClientTransport(this.serverUrl, { authProvider: this.provider });
        this.#client = new Client({ name: "interop-sdk-v1", version: "1.0.0" });
        await this.#client.connect(this.#transport);
      },
      async () => this.#transport!.finishAuth(await this.provider.authorizationCode()),
    );
  }

  /** Calls a tool; when the SDK sent the user to the browser (step-up), finishes that and retries once. */
  async callTool(name: string, args?: Record<string, unknown>): Promise<ToolResult> {
    const client = this.#client;
    const transport = this.#transport;
    if (!client || !transport) throw new Error("not connected");
    return await retryOnceAfterAuthorization(
      UnauthorizedError,
      () => client.callTool({ name, ...(args && { arguments: args }) }),
      async () => transport.finishAuth(await this.provider.authorizationCode()),
    );
  }

  async listTools(): Promise<string[]> {
    if (!this.#client) throw new Error("not connected");
    return (await this.#client.listTools()).tools.map((t) => t.name);
  }

  async close(): Promise<void> {
    await this.#client?.close();
  }
}
