/**
 * The user agent is pluggable: a session knows its redirect URI before the authorization request
 * is built, opens the authorization URL, and resolves with the full callback URL.
 */
import type { ExpectedResponseIssuer } from "./loopback-listener.js";

export interface AuthorizationSession {
  /** The redirect URI registered and sent in the request (spec "Redirect URIs and state" 1-3). */
  redirectUri: string;
  /**
   * The redirect URI's port was pinned (`callbackPort`) for a server that matches ports exactly:
   * a saved registration is reused only for this very URI, not one that differs by its port.
   */
  exactRedirectUri?: boolean;
  /**
   * Shows the user the (already validated) authorization URL; resolves with the callback URL.
   * `expectedIssuer` is the issuer recorded with the request, for a page that tells the user what
   * happened only once the response's `iss` checked out (RFC 9207 §2.4); the flow validates the
   * response itself either way.
   */
  open(authorizationUrl: URL, expectedIssuer?: ExpectedResponseIssuer): Promise<string | URL>;
  /** Releases resources (a loopback listener, for instance). Called after every attempt. */
  close?(): Promise<void>;
}

/** What the flow is about to ask for, given to the factory (one that cannot open a browser names it). */
export interface AuthorizationSessionRequest {
  /** The resource (its PRM `resource` value). */
  resource: string;
  /** The scope about to be requested. */
  scope: string | undefined;
  /** Scopes the resource asked for that the stored tokens lack: set for a step-up, else absent. */
  missingScopes?: string[];
}

export type AuthorizationSessionFactory = (
  request?: AuthorizationSessionRequest,
) => Promise<AuthorizationSession>;

/** A session around a fixed redirect URI and a function that follows the authorization URL. */
export function fixedSession(
  redirectUri: string,
  userAgent: (authorizationUrl: URL) => Promise<string | URL>,
): AuthorizationSessionFactory {
  return async () => ({ redirectUri, open: userAgent });
}
