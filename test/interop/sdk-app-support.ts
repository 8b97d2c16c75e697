/**
 * What the SDK v1 and SDK v2 apps share. Each SDK declares its own `OAuthClientProvider` and its
 * own token, client-information and discovery-state types (from different packages), so the
 * in-memory provider is generic over them and each app's subclass names its SDK's types and
 * `implements` its SDK's interface; the compiler checks each against its own SDK.
 */
import { randomBytes } from "node:crypto";
import type { AuthorizationHandoff } from "./browser-user.js";

export interface ProviderOptions {
  /** A pre-registered public client id; without it the SDK registers dynamically. */
  clientId?: string;
}

/** The `invalidateCredentials` scopes both SDKs use. */
export type CredentialScope = "all" | "client" | "tokens" | "verifier" | "discovery";

/**
 * An in-memory `OAuthClientProvider` as the SDKs' examples write one: it keeps what the SDK hands
 * it, opens the browser through `handoff`, and forgets what `invalidateCredentials` names.
 */
export abstract class InMemoryOAuthProvider<ClientInformation, Tokens, DiscoveryState> {
  #clientInformation: ClientInformation | undefined;
  #tokens: Tokens | undefined;
  #codeVerifier: string | undefined;
  #discovery: DiscoveryState | undefined;
  #state: string | undefined;
  /** Every `invalidateCredentials` call the SDK made, in order. */
  readonly invalidated: string[] = [];

  /**
   * @param preregistered the client information of a pre-registered client (`{ client_id }`), in
   *   the subclass's SDK's type; undefined to let the SDK register dynamically (RFC 7591).
   */
  constructor(
    readonly handoff: AuthorizationHandoff,
    readonly clientName: string,
    readonly preregistered: ClientInformation | undefined,
  ) {
    this.#clientInformation = preregistered;
  }

  get redirectUrl(): string {
    return this.handoff.redirect.uri;
  }

  /** What a native app registers (RFC 7591), refresh included, as real MCP clients do. */
  get clientMetadata() {
    return {
      client_name: this.clientName,
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  state(): string {
    this.#state = randomBytes(16).toString("base64url");
    return this.#state;
  }

  /** The `state` of the last authorization request, which the callback must carry back. */
  protected get sentState(): string | undefined {
    return this.#state;
  }

  clientInformation(): ClientInformation | undefined {
    return this.#clientInformation;
  }

  saveClientInformation(clientInformation: ClientInformation): void {
    this.#clientInformation = clientInformation;
  }

  tokens(): Tokens | undefined {
    return this.#tokens;
  }

  saveTokens(tokens: Tokens): void {
    this.#tokens = tokens;
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.handoff.open(authorizationUrl);
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.#codeVerifier = codeVerifier;
  }

  codeVerifier(): string {
    if (!this.#codeVerifier) throw new Error("no code verifier saved");
    return this.#codeVerifier;
  }

  saveDiscoveryState(state: DiscoveryState): void {
    this.#discovery = state;
  }

  discoveryState(): DiscoveryState | undefined {
    return this.#discovery;
  }

  invalidateCredentials(scope: CredentialScope): void {
    this.invalidated.push(scope);
    if (scope === "all" || scope === "tokens") this.#tokens = undefined;
    if (scope === "all" || scope === "verifier") this.#codeVerifier = undefined;
    if (scope === "all" || scope === "discovery") this.#discovery = undefined;
    if (scope === "all" || scope === "client") {
      // A pre-registered id is configuration: it stays; a registration is forgotten.
      this.#clientInformation = this.preregistered;
    }
  }
}

/**
 * Runs `attempt`; when it fails with the SDK's `UnauthorizedError` (the SDK sent the user to the
 * browser), runs `finishAuth` and `attempt` once more, as the SDKs' OAuth examples do. A second
 * failure is thrown.
 */
export async function retryOnceAfterAuthorization<T>(
  unauthorizedError: abstract new (...args: never[]) => Error,
  attempt: () => Promise<T>,
  finishAuth: () => Promise<void>,
): Promise<T> {
  try {
    return await attempt();
  } catch (error) {
    if (!(error instanceof unauthorizedError)) throw error;
    await finishAuth();
    return await attempt();
  }
}
