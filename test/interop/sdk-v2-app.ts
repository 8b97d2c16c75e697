/**
 * An MCP application on the official SDK v2 (`@modelcontextprotocol/client` 2.x), written the way
 * its client guide does it: an in-memory `OAuthClientProvider` (with the discovery state the v2
 * callback leg checks the issuer against), a `StreamableHTTPClientTransport` with that provider,
 * and on `UnauthorizedError` `transport.finishAuth(callbackParams)` (the SDK then checks `iss`,
 * RFC 9207) followed by a reconnect, or mid-session a retry of the call.
 *
 * Revision 2026-07-28 pins the modern protocol era (`server/discover`); 2025-11-25 uses the
 * SDK's default legacy `initialize` handshake.
 */
import {
  Client,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  StreamableHTTPClientTransport,
  UnauthorizedError,
} from "@modelcontextprotocol/client";
import type { Revision } from "../../src/authorization-server/index.js";
import { type AuthorizationHandoff, codeFromCallback } from "./browser-user.js";
import {
  InMemoryOAuthProvider,
  type ProviderOptions,
  retryOnceAfterAuthorization,
} from "./sdk-app-support.js";

export class SdkV2Provider
  extends InMemoryOAuthProvider<StoredOAuthClientInformation, StoredOAuthTokens, OAuthDiscoveryState>
  implements OAuthClientProvider
{
  constructor(handoff: AuthorizationHandoff, options: ProviderOptions = {}) {
    super(handoff, "Interop app (SDK v2)", options.clientId ? { client_id: options.clientId } : undefined);
  }

  /** Waits for the browser to come back; the callback's parameters once `state` matched. */
  async callbackParams(): Promise<URLSearchParams> {
    const callback = await this.handoff.callback();
    codeFromCallback(callback, this.sentState);
    return callback.searchParams;
  }
}

type ToolResult = Awaited<ReturnType<Client["callTool"]>>;

export class SdkV2NotesApp {
  #client: Client | undefined;
  #transport: StreamableHTTPClientTransport | undefined;

  constructor(
    readonly serverUrl: URL,
    readonly provider: SdkV2Provider,
    readonly revision: Revision,
  ) {}

  /** The protocol version the connection runs at. */
  get protocolVersion(): string | undefined {
    return this.#client?.getNegotiatedProtocolVersion();
  }

  /** Connects; when the SDK sent the user to the browser, finishes that and connects again. */
  async connect(): Promise<void> {
    await retryOnceAfterAuthorization(
      UnauthorizedError,
      async () => {
        this.#transport = new StreamableHTTPClientTransport(this.serverUrl, { authProvider: this.provider });
        this.#client = new Client(
          { name: "interop-sdk-v2", version: "1.0.0" },
          this.revision === "2026-07-28" ? { versionNegotiation: { mode: { pin: "2026-07-28" } } } : {},
        );
        await this.#client.connect(this.#transport);
      },
      async () => this.#transport!.finishAuth(await this.provider.callbackParams()),
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
      async () => transport.finishAuth(await this.provider.callbackParams()),
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
