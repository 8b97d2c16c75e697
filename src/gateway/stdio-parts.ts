/**
 * The stdio upstream's parts (stdio-upstream.ts): its JSON-RPC error answers, the key a request id
 * is matched by, the command line split into words (no shell), and the user's upstream tokens
 * read into a child's environment. Split out of stdio-upstream.ts as they were.
 */
import type { JsonRpcId } from "../resource-server/operations/messages.js";
import { UpstreamTokenError } from "../resource-server/upstream-token.js";
import { OAuthError } from "../shared/errors.js";
import type { Logger } from "../shared/log.js";
import type { StdioUpstreamOptions } from "./stdio-upstream.js";

export function rpcError(
  status: number,
  code: number,
  message: string,
  id: JsonRpcId | undefined = null,
): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", id: id ?? null, error: { code, message } }), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

export function idKey(id: unknown): string {
  return JSON.stringify(id);
}

/** Splits a command line into words (single and double quotes, backslash escapes; no expansion). */
export function commandWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let quote: '"' | "'" | undefined;
  let started = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      started = true;
    } else if (c === "\\" && i + 1 < line.length) {
      word += line[++i];
      started = true;
    } else if (/\s/.test(c)) {
      if (started) words.push(word);
      word = "";
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (quote) throw new TypeError("unbalanced quote in the command");
  if (started) words.push(word);
  if (words.length === 0) throw new TypeError("the command is empty");
  return words;
}

/** The user's upstream tokens for the child's environment, or the answer refusing the start. */
export async function upstreamEnv(
  wanted: StdioUpstreamOptions["upstreamTokens"],
  log: Logger | undefined,
  request: Request,
  id: JsonRpcId | undefined,
): Promise<Record<string, string> | Response> {
  const env: Record<string, string> = {};
  if (!wanted) return env;
  for (const [variable, provider] of Object.entries(wanted.variables)) {
    try {
      // The subject token is the request's own, sent back only to the server that issued it.
      env[variable] = (await wanted.client.token(request, provider)).accessToken;
    } catch (error) {
      // The reason only: no token, no secret (upstream-token.ts puts none in its errors).
      const reason =
        error instanceof UpstreamTokenError || error instanceof OAuthError ? error.code : "failed";
      log?.warn("gateway.stdio_upstream_token_refused", { provider, reason });
      if (error instanceof UpstreamTokenError && error.code === "ERR_UPSTREAM_UNAVAILABLE") {
        return rpcError(503, -32603, `The ${provider} sign-in is unavailable; try again later`, id);
      }
      if (
        (error instanceof UpstreamTokenError && error.code === "ERR_UPSTREAM_REAUTHENTICATE") ||
        (error instanceof OAuthError && error.code === "invalid_request")
      ) {
        // Nothing usable is kept for this user (never signed in through it, the grant revoked,
        // the provider refused the refresh): no child without its credentials.
        return rpcError(403, -32001, `Sign in through ${provider} again to use this server`, id);
      }
      return rpcError(502, -32603, `The ${provider} token could not be obtained`, id);
    }
  }
  return env;
}
