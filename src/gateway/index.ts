/**
 * `gatehouse-auth/gateway`: the gateway as a library, the one place `gatehouse gateway` (the CLI)
 * builds it from too. `createGateway(options)` protects an existing MCP server without touching
 * its code, a Streamable HTTP endpoint (`upstream`) or a stdio program (`stdio`): the protected
 * resource metadata (RFC 9728), the challenges, the operation policy, and the relay
 * (http-gateway.ts), the client's token never passed on (MCP spec, Security "Token passthrough").
 *
 * Tokens are checked as JWTs against the authorization server's keys (RFC 9068; `jwks_uri` from its
 * RFC 8414 metadata, or `jwksUri`) or by token introspection (RFC 7662, `introspection`). With
 * `stepUp`, a 403 `insufficient_scope` marks the token's grant at the authorization server (its
 * `requestStepUp`, in process, or the store it shares with this gateway) so that a client which
 * answers the 403 by refreshing (MCP SDK v1) is sent to authorize again for the added scope.
 *
 * The result is a web-standard `fetch` handler and a node:http `listener` (docs/gateway.md).
 */

import type { KeyObject } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { JWK } from "jose";
import type { AuthorizationServer } from "../authorization-server/index.js";
import { cachedVerifier } from "../resource-server/cache.js";
import { introspectionVerifier } from "../resource-server/introspection-verifier.js";
import { jwtVerifier } from "../resource-server/jwt-verifier.js";
import type { OperationAuditEvent } from "../resource-server/operations/audit.js";
import { createOperationGate, type OperationGate } from "../resource-server/operations/gate.js";
import {
  type CompiledPolicy,
  compileOperationPolicy,
  type OperationPolicy,
} from "../resource-server/operations/policy.js";
import { createResourceServer } from "../resource-server/resource-server.js";
import type { AccessTokenVerifier } from "../resource-server/types.js";
import { upstreamTokenClient } from "../resource-server/upstream-token.js";
import type { Logger } from "../shared/log.js";
import { authorizationServerMetadataUrls } from "../shared/well-known.js";
import type { AuthorizationStore } from "../storage/contract.js";
import { createHttpGateway, type IdentityHeaders } from "./http-gateway.js";
import { identityAssertionSigner } from "./identity-assertion.js";
import { type RevocationStore, watchIntrospection } from "./revocation.js";
import { commandWords } from "./stdio-parts.js";
import { createStdioUpstream } from "./stdio-upstream.js";

export type { IdentityHeaders } from "./http-gateway.js";
export { IDENTITY_ASSERTION_TYP } from "./identity-assertion.js";
export type { RevocationStore } from "./revocation.js";

/** Token introspection (RFC 7662) instead of JWT verification. */
export interface GatewayIntrospectionOptions {
  /** The `introspection_endpoint` (default: the one the issuer's RFC 8414 metadata names). */
  endpoint?: string;
  /** The gateway's client at the authorization server (a configured confidential client). */
  clientId: string;
  /** Its secret (client_secret_basic). Read it from a file or the environment, never argv. */
  clientSecret: string;
  /**
   * How long an active answer is trusted, in seconds (default 300, never beyond the token's
   * `exp`): a revocation reaches the gateway (and its stdio children) within this time.
   */
  cacheSeconds?: number;
}

/** A stdio MCP server behind the gateway: one child process per session, or per user. */
export interface GatewayStdioOptions {
  /** The program and its arguments, or a command line split into words (no shell runs it). */
  command: string | readonly string[];
  /** The child's whole environment (PATH and its credentials; nothing of the gateway's is added). */
  env?: Readonly<Record<string, string>>;
  /** Also put the caller's `sub` in the child's environment under this name. */
  subjectEnv?: string;
  /** One child per MCP session (default) or per user (the token's `sub`). */
  scope?: "session" | "user";
  /** Children at once (default 16). */
  maxChildren?: number;
  /** Stop a child after this long without a request, in seconds (default 600). */
  idleSeconds?: number;
  /**
   * The user's access token at an upstream provider of the authorization server (its
   * `/upstream/token`), in the child's environment: `variables` maps a variable name to a
   * provider id; the gateway asks as its own confidential client.
   */
  upstreamTokens?: {
    variables: Readonly<Record<string, string>>;
    clientId: string;
    clientSecret: string;
  };
  /**
   * The authorization server's store, shared with the gateway (the same SQLite file or PostgreSQL
   * database): every `checkSeconds` (default 30) each child's grant and kept upstream tokens are
   * read, and a child whose access is gone (grant revoked, upstream token revoked or rotated) is
   * stopped; the next `initialize` starts it again with fresh credentials, or is refused.
   */
  revocation?: { store: RevocationStore; checkSeconds?: number };
}

/**
 * Where a 403 `insufficient_scope` marks the grant for step-up: the authorization server in this
 * process (`createAuthorizationServer`'s result), or `{ store }`, the store this gateway shares
 * with the authorization server (the same SQLite file or PostgreSQL database).
 */
export type GatewayStepUp =
  | Pick<AuthorizationServer, "requestStepUp">
  | { store: Pick<AuthorizationStore, "requestStepUp">; now?: () => number };

export interface GatewayOptions {
  /** The MCP server to protect: its Streamable HTTP endpoint. Exactly one of `upstream`, `stdio`. */
  upstream?: string;
  /** A stdio MCP server instead of `upstream`. */
  stdio?: GatewayStdioOptions;
  /** The public URL clients call: the canonical resource URI tokens must name (RFC 8707). */
  resource: string;
  /** The issuer whose access tokens are accepted. */
  authorizationServer: string;
  /** The operation policy: a plain object, or one read from a file by `parseOperationPolicy`. */
  policy: OperationPolicy | CompiledPolicy;
  /** JWT verification: the issuer's keys (default: `jwks_uri` from its RFC 8414 metadata). */
  jwksUri?: string;
  /** Token introspection (RFC 7662) instead of JWTs. Not with `jwksUri`. */
  introspection?: GatewayIntrospectionOptions;
  /** Step-up for clients that refresh on a 403 (MCP SDK v1): see {@link GatewayStepUp}. */
  stepUp?: GatewayStepUp;
  /** Filter `tools/list` and the other listings to what the token may call (SEP-1881; off). */
  filterListings?: boolean;
  /** Largest request body, in bytes (default 4 MiB). */
  maxBodyBytes?: number;
  /**
   * Hosts clients may use (DNS-rebinding defence). Default: the resource's host, or loopback
   * aliases for a loopback resource.
   */
  allowedHosts?: readonly string[];
  /** Plain headers telling the upstream who called (a private link to the upstream only). */
  identityHeaders?: IdentityHeaders;
  /** A signed identity assertion in `header` (HTTP upstream), signed with `privateKey` (P-256 or Ed25519). */
  identityAssertion?: { header: string; privateKey: string | KeyObject };
  /** 32+ bytes binding session ids to callers; share it between gateways (default: random). */
  sessionKey?: Uint8Array;
  /** Wait for the upstream's response headers, in ms (default 30 000). */
  upstreamTimeoutMs?: number;
  /** Trusted proxy hops in front, for `listener` (X-Forwarded-*; default none). */
  trustProxy?: boolean | number;
  /** One event per operation decision (also logged as `mcp.operation` through `logger`). */
  onAuditEvent?: (event: OperationAuditEvent) => void;
  logger?: Logger;
}

export interface Gateway {
  /** Web-standard handler: the metadata, `/health`, and the protected endpoint. */
  fetch(request: Request): Promise<Response>;
  /** The same as a node:http request listener (`http.createServer(gateway.listener)`). */
  readonly listener: (req: IncomingMessage, res: ServerResponse) => void;
  readonly resource: string;
  /** Requests waiting for the upstream's answer. */
  readonly inFlight: number;
  /** The public key the upstream verifies the identity assertion with, when one is configured. */
  identityAssertionJwk(): Promise<JWK | undefined>;
  /** Stops the stdio children (an HTTP upstream has nothing to stop). The listener is yours. */
  close(): Promise<void>;
}

/** How long a 403 waits for the step-up mark to be written before it is sent anyway. */
const STEP_UP_WRITE_WAIT_MS = 2000;

interface IssuerEndpoints {
  jwksUri?: string;
  introspectionEndpoint?: string;
}

/** The issuer's RFC 8414 metadata (bounded read, exact issuer check, §3.3). */
async function discoverIssuer(issuer: string): Promise<IssuerEndpoints> {
  for (const { url } of authorizationServerMetadataUrls(issuer)) {
    let response: Response;
    try {
      response = await fetch(url, { redirect: "error", signal: AbortSignal.timeout(10_000) });
    } catch {
      continue;
    }
    if (!response.ok) {
      await response.body?.cancel();
      continue;
    }
    const text = await response.text();
    if (text.length > 256 * 1024) throw new Error(`the authorization server metadata at ${url} is too large`);
    const metadata = JSON.parse(text) as {
      issuer?: unknown;
      jwks_uri?: unknown;
      introspection_endpoint?: unknown;
    };
    if (metadata.issuer !== issuer) {
      throw new Error(`the metadata at ${url} names another issuer (RFC 8414 §3.3)`);
    }
    return {
      ...(typeof metadata.jwks_uri === "string" && { jwksUri: metadata.jwks_uri }),
      ...(typeof metadata.introspection_endpoint === "string" && {
        introspectionEndpoint: metadata.introspection_endpoint,
      }),
    };
  }
  throw new Error(`no authorization server metadata found for ${issuer}`);
}

async function tokenVerifier(
  options: GatewayOptions,
  onRevoked: (subject: string) => void,
): Promise<AccessTokenVerifier> {
  const issuer = options.authorizationServer;
  const { introspection } = options;
  if (introspection !== undefined) {
    if (options.jwksUri !== undefined) throw new TypeError("give jwksUri or introspection, not both");
    let endpoint = introspection.endpoint;
    if (endpoint === undefined) {
      endpoint = (await discoverIssuer(issuer)).introspectionEndpoint;
      if (endpoint === undefined) {
        throw new Error(`the metadata of ${issuer} names no introspection_endpoint (give the endpoint)`);
      }
    }
    // RFC 7662 §2.2: the answer's `aud` must name this resource and `iss` the configured issuer.
    const inner = introspectionVerifier({
      endpoint,
      clientId: introspection.clientId,
      clientSecret: introspection.clientSecret,
      audience: options.resource,
      issuer,
    });
    // With stdio children, an inactive answer for a token seen active reaches the user's children
    // (revocation.ts); under the cache, so only introspection calls pay for it.
    return cachedVerifier(options.stdio === undefined ? inner : watchIntrospection(inner, onRevoked), {
      maxTtlSeconds: introspection.cacheSeconds ?? 300,
    });
  }
  let jwksUri = options.jwksUri;
  if (jwksUri === undefined) {
    jwksUri = (await discoverIssuer(issuer)).jwksUri;
    if (jwksUri === undefined) throw new Error(`the metadata of ${issuer} has no jwks_uri (give jwksUri)`);
  }
  return cachedVerifier(jwtVerifier({ issuer, audience: options.resource, jwksUri }));
}

/**
 * The hook that marks a refused token's grant, and a gate whose 403 waits for that mark: the
 * gate calls `onInsufficientScope` without awaiting it, which is enough in process (the
 * authorization server's refresh waits for its own pending marks), but a store shared with
 * another process must hold the mark before the client can read the 403 and refresh.
 */
function stepUpHook(stepUp: GatewayStepUp, logger: Logger | undefined) {
  const mark =
    "store" in stepUp
      ? (tokenId: string | undefined) => {
          // As AuthorizationServer.requestStepUp: a token without `jti` has no grant to mark.
          if (typeof tokenId !== "string" || tokenId === "") return Promise.resolve(false);
          return stepUp.store.requestStepUp(tokenId, (stepUp.now ?? Date.now)());
        }
      : (tokenId: string | undefined) => stepUp.requestStepUp(tokenId);
  const pending = new Set<Promise<unknown>>();
  const onInsufficientScope = (auth: { tokenId?: string }) => {
    const written = mark(auth.tokenId).catch((error: unknown) => {
      logger?.warn("gateway.step_up_mark_failed", {
        error: error instanceof Error ? error.name : typeof error,
      });
      return false;
    });
    pending.add(written);
    void written.finally(() => pending.delete(written));
  };
  const waitingGate = (gate: OperationGate): OperationGate => ({
    ...gate,
    async judge(head, body, started) {
      const verdict = await gate.judge(head, body, started);
      if (!verdict.ok && verdict.answer.status === 403 && pending.size > 0) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.all(pending),
          new Promise((resolve) => {
            timer = setTimeout(resolve, STEP_UP_WRITE_WAIT_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      return verdict;
    },
  });
  return { onInsufficientScope, waitingGate };
}

/**
 * Builds the gateway: checks every option (a `TypeError` or `Error` naming the problem), finds the
 * issuer's keys or introspection endpoint in its metadata unless given, and compiles the policy.
 */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  if ((options.upstream === undefined) === (options.stdio === undefined)) {
    throw new TypeError("give exactly one of upstream and stdio");
  }
  const policy =
    (options.policy as CompiledPolicy).methods instanceof Map
      ? (options.policy as CompiledPolicy)
      : compileOperationPolicy(options.policy as OperationPolicy);
  const issuer = options.authorizationServer;
  const logger = options.logger;
  const stepUp = options.stepUp === undefined ? undefined : stepUpHook(options.stepUp, logger);
  // Set once the stdio upstream exists (it needs the resource server made with this verifier).
  let stdioUpstream: ReturnType<typeof createStdioUpstream> | undefined;
  const resourceServer = createResourceServer({
    resource: options.resource,
    authorizationServers: [issuer],
    scopesSupported: policy.scopesNamed.length ? [...policy.scopesNamed] : undefined,
    verifier: await tokenVerifier(options, (subject) => stdioUpstream?.endUser(subject, "token_revoked")),
    ...(options.allowedHosts && { allowedHosts: [...options.allowedHosts] }),
    ...(stepUp && { onInsufficientScope: stepUp.onInsufficientScope }),
    ...(logger && { logger }),
  });
  const plainGate = createOperationGate(resourceServer, {
    policy,
    maxBodyBytes: options.maxBodyBytes,
    filterListings: options.filterListings === true,
    ...(logger && { logger }),
    ...(options.onAuditEvent && { onAuditEvent: options.onAuditEvent }),
  });
  const gate = stepUp ? stepUp.waitingGate(plainGate) : plainGate;

  if (options.identityAssertion !== undefined && options.upstream === undefined) {
    throw new TypeError("an identity assertion is for an HTTP upstream");
  }
  // `aud` is the upstream as the gateway calls it (the URL normalised), `iss` this resource.
  const signer =
    options.identityAssertion === undefined || options.upstream === undefined
      ? undefined
      : identityAssertionSigner({
          privateKey: options.identityAssertion.privateKey,
          issuer: resourceServer.resource,
          audience: new URL(options.upstream).href,
        });

  const s = options.stdio;
  const stdio =
    s === undefined
      ? undefined
      : createStdioUpstream({
          argv: typeof s.command === "string" ? commandWords(s.command) : [...s.command],
          env: s.env ?? {},
          scope: s.scope ?? "session",
          ...(s.subjectEnv !== undefined && { subjectEnv: s.subjectEnv }),
          ...(s.maxChildren !== undefined && { maxChildren: s.maxChildren }),
          idleMs: (s.idleSeconds ?? 600) * 1000,
          ...(s.upstreamTokens && {
            upstreamTokens: {
              variables: s.upstreamTokens.variables,
              client: upstreamTokenClient({
                issuer,
                clientAuth: {
                  clientId: s.upstreamTokens.clientId,
                  clientSecret: s.upstreamTokens.clientSecret,
                },
              }),
            },
          }),
          ...(s.revocation && {
            revocation: {
              store: s.revocation.store,
              everyMs: (s.revocation.checkSeconds ?? 30) * 1000,
            },
          }),
          ...(logger && { logger }),
        });
  stdioUpstream = stdio;

  const gateway = createHttpGateway({
    upstream: options.upstream,
    stdio,
    resourceServer,
    gate,
    ...(options.identityHeaders && { identityHeaders: options.identityHeaders }),
    ...(signer && { identityAssertion: { header: options.identityAssertion!.header, signer } }),
    ...(options.sessionKey && { sessionKey: options.sessionKey }),
    ...(options.upstreamTimeoutMs !== undefined && { upstreamTimeoutMs: options.upstreamTimeoutMs }),
    ...(logger && { logger }),
  });
  const fetchHandler = (request: Request) => gateway.fetch(request);
  return {
    fetch: fetchHandler,
    // The relay on node's own objects (http-gateway.ts nodeListener): bodies capped at the gate's
    // maxBodyBytes, an oversized one answered with the gate's 413 JSON-RPC error.
    listener: gateway.nodeListener({
      trustProxy: options.trustProxy ?? false,
      ...(logger && {
        // The error's class only: its message may quote what the handler held (SECURITY.md).
        onError: (error: unknown) =>
          logger.error("handler_error", {
            server: "gateway",
            reason: error instanceof Error ? error.name : "error",
          }),
      }),
    }),
    resource: resourceServer.resource,
    get inFlight() {
      return gateway.inFlight;
    },
    identityAssertionJwk: async () => signer?.publicJwk(),
    async close() {
      await stdio?.close();
    },
  };
}
