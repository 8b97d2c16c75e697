/**
 * `--token-file`: the auditor calls the resource's tools with a token that holds few scopes and
 * records how each call is answered, so the rules in rules-operations.ts can judge the per-operation
 * challenges (spec "Insufficient scope at run time"; RFC 6750 §3.1).
 *
 * What it sends: one MCP session over Streamable HTTP, all with the given token and only to the
 * resource URL: `initialize`, `notifications/initialized`, `tools/list`, then `tools/call` with empty
 * arguments for each tool, then DELETE of the session. With a policy (`--policy`), only the tools the
 * policy says this token may NOT call are called (and the tools it names that the listing hides, a
 * filtered listing being allowed): a tool the token may call is not run, since an auditor must not
 * cause a tool's effects. Without a policy, every listed tool is called with `{}`: use a test
 * deployment or a token that can do no harm. Never the token's value in the report.
 */
import { decide } from "../resource-server/operations/decide.js";
import type { CompiledPolicy } from "../resource-server/operations/policy.js";
import type { AuthInfo } from "../resource-server/types.js";
import { parseScope, ScopeHierarchy } from "../shared/scopes.js";
import { type Challenge, parseWWWAuthenticate } from "../shared/www-authenticate.js";
import type { Prober } from "./probes.js";

/** At most this many tools are called. */
const MAX_OPERATION_CALLS = 50;
/** An answer is read up to this many bytes (an SSE stream up to the first answer). */
const MAX_OPERATION_ANSWER_BYTES = 64 * 1024;

const PROTOCOL_VERSION = "2025-11-25";

export interface OperationsOptions {
  /** The access token the calls carry: one holding few scopes. */
  token: string;
  /**
   * The scopes the token holds, when the caller knows them; otherwise read from the token's own
   * `scope` claim when it is a JWT (unverified: the auditor only predicts what the policy says).
   */
  tokenScopes?: readonly string[];
  /** The operator's operation policy, each refusal compared with what it says. */
  policy?: CompiledPolicy;
  /** The scope hierarchy the resource honours (default: none). */
  hierarchy?: ScopeHierarchy;
}

/** What the policy says about one call for this token (absent without a policy). */
type ExpectedDecision =
  | { decision: "allowed"; required: string[] }
  | { decision: "insufficient_scope"; required: string[]; missing: string[] }
  | { decision: "denied"; reason: string };

export interface OperationCallProbe {
  tool: string;
  /** Whether `tools/list` showed the tool (a policy may name tools a filtered listing hides). */
  listed: boolean;
  expected?: ExpectedDecision;
  status?: number;
  transportError?: string;
  wwwAuthenticate?: string | null;
  challenges?: Challenge[];
  /** For a 2xx: the JSON-RPC error, or the tool result's `isError` text, bounded. */
  rpcError?: string;
  toolError?: string;
  /** For a 2xx: the answer could not be read as a JSON-RPC response. */
  unreadable?: string;
}

export interface OperationsObservation {
  /** Why the calls could not be made (the session was refused, the token's scopes are unknown). */
  error?: string;
  initializeStatus?: number;
  listStatus?: number;
  /** Tools the listing showed (bounded by MAX_OPERATION_CALLS). */
  listed: string[];
  listTruncated?: boolean;
  tokenScopes?: string[];
  policyGiven: boolean;
  calls: OperationCallProbe[];
}

/** The claims of a JWT, decoded without verification (undefined for anything else). */
function unverifiedClaims(token: string): Record<string, unknown> | undefined {
  const parts = token.split(".");
  if (parts.length !== 3) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as unknown;
    return typeof claims === "object" && claims !== null && !Array.isArray(claims)
      ? (claims as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** One line of at most `max` characters, for the report. */
function bounded(text: string, max = 200): string {
  const line = text.replace(/\s+/g, " ");
  return line.length > max ? `${line.slice(0, max)}…` : line;
}

/**
 * Reads the JSON-RPC answer with `id` from a JSON or SSE response, at most
 * {@link MAX_OPERATION_ANSWER_BYTES}; the rest of the stream is cancelled.
 */
async function readAnswer(response: Response, id: number): Promise<Record<string, unknown> | string> {
  const reader = response.body?.getReader();
  if (!reader) return "empty body";
  const sse = (response.headers.get("content-type") ?? "").toLowerCase().includes("text/event-stream");
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (value) {
        bytes += value.byteLength;
        if (bytes > MAX_OPERATION_ANSWER_BYTES) return `answer over ${MAX_OPERATION_ANSWER_BYTES} bytes`;
        text += decoder.decode(value, { stream: true });
      }
      if (sse) {
        // One event per blank line; its data lines joined (WHATWG HTML "Server-sent events").
        const events = text.split(/\r?\n\r?\n/);
        const complete = done ? events : events.slice(0, -1);
        for (const event of complete) {
          const data = event
            .split(/\r?\n/)
            .filter((l) => l.startsWith("data:"))
            .map((l) => l.slice(5).replace(/^ /, ""))
            .join("\n");
          if (!data) continue;
          try {
            const message = JSON.parse(data) as Record<string, unknown>;
            if (message?.id === id) return message;
          } catch {
            return "an SSE event that is not JSON";
          }
        }
      }
      if (done) break;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  if (sse) return "the stream ended without the answer";
  try {
    const parsed = JSON.parse(text) as unknown;
    const found = Array.isArray(parsed) ? parsed.find((m) => m?.id === id) : parsed;
    return typeof found === "object" && found !== null
      ? (found as Record<string, unknown>)
      : "not a JSON object";
  } catch {
    return "not JSON";
  }
}

/** The first text of a tool result's content, bounded. */
function resultText(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const first = content.find(
    (c): c is { text: string } => typeof (c as { text?: unknown })?.text === "string",
  );
  return bounded(first?.text ?? "(no text)");
}

/**
 * Opens a session with `token`, lists the tools and calls each one the rules need (see the module
 * comment for which), recording status, challenge and JSON-RPC answer.
 */
export async function probeOperations(
  prober: Prober,
  resourceUrl: string,
  options: OperationsOptions,
): Promise<OperationsObservation> {
  const observation: OperationsObservation = {
    listed: [],
    policyGiven: options.policy !== undefined,
    calls: [],
  };
  const claims = unverifiedClaims(options.token);
  const tokenScopes =
    options.tokenScopes !== undefined
      ? [...options.tokenScopes]
      : typeof claims?.scope === "string"
        ? [...parseScope(claims.scope)]
        : undefined;
  if (tokenScopes !== undefined) observation.tokenScopes = tokenScopes;
  if (options.policy && tokenScopes === undefined) {
    observation.error =
      "the token's scopes are unknown (not a JWT with a scope claim): pass them with --token-scope to compare with the policy";
    return observation;
  }

  let sessionId: string | undefined;
  let nextId = 1;
  const headers = (): Record<string, string> => ({
    authorization: `Bearer ${options.token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": PROTOCOL_VERSION,
    ...(sessionId !== undefined && { "mcp-session-id": sessionId }),
  });
  const post = (message: Record<string, unknown>) =>
    prober.send(resourceUrl, {
      method: "POST",
      credential: "access-token",
      headers: headers(),
      body: JSON.stringify({ jsonrpc: "2.0", ...message }),
    });

  // 1. The session, as an MCP client opens it.
  const initId = nextId++;
  const init = await post({
    id: initId,
    method: "initialize",
    params: {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: "gatehouse-check", version: "1" },
    },
  });
  observation.initializeStatus = init.response?.status;
  if (!init.response || init.response.status >= 300) {
    await init.response?.body?.cancel().catch(() => undefined);
    observation.error = init.error
      ? `initialize failed: ${init.error}`
      : `initialize with the token was answered ${init.response!.status}: the token must be accepted for the session itself`;
    return observation;
  }
  sessionId = init.response.headers.get("mcp-session-id") ?? undefined;
  const initAnswer = await readAnswer(init.response, initId);
  if (typeof initAnswer === "string" || initAnswer.error !== undefined) {
    observation.error = `initialize: ${typeof initAnswer === "string" ? initAnswer : "JSON-RPC error"}`;
    return observation;
  }
  const initialized = await post({ method: "notifications/initialized" });
  await initialized.response?.body?.cancel().catch(() => undefined);

  try {
    // 2. The listing (paged, bounded).
    let cursor: string | undefined;
    do {
      const listId = nextId++;
      const list = await post({ id: listId, method: "tools/list", params: cursor ? { cursor } : {} });
      observation.listStatus = list.response?.status;
      if (!list.response || list.response.status >= 300) {
        await list.response?.body?.cancel().catch(() => undefined);
        if (!options.policy) {
          observation.error = `tools/list was answered ${list.error ?? list.response!.status}`;
          return observation;
        }
        break; // A policy names tools to call even when the listing is refused.
      }
      const answer = await readAnswer(list.response, listId);
      const result = typeof answer === "string" ? undefined : (answer.result as Record<string, unknown>);
      const tools = Array.isArray(result?.tools) ? (result.tools as unknown[]) : [];
      for (const tool of tools) {
        const name = (tool as { name?: unknown })?.name;
        if (typeof name !== "string") continue;
        if (observation.listed.length >= MAX_OPERATION_CALLS) {
          observation.listTruncated = true;
          break;
        }
        observation.listed.push(name);
      }
      cursor =
        typeof result?.nextCursor === "string" && !observation.listTruncated ? result.nextCursor : undefined;
    } while (cursor !== undefined);

    // 3. Which tools to call, and what the policy expects of each.
    const names = [...observation.listed];
    if (options.policy) {
      for (const name of options.policy.tools.keys())
        if (name !== "*" && !names.includes(name)) names.push(name);
    }
    const hierarchy = options.hierarchy ?? new ScopeHierarchy();
    const auth: AuthInfo = {
      subject: typeof claims?.sub === "string" ? claims.sub : undefined,
      clientId: typeof claims?.client_id === "string" ? claims.client_id : undefined,
      scopes: tokenScopes ?? [],
      audience: [],
      expiresAt: 0,
      issuer: undefined,
      claims: claims ?? {},
    };
    for (const tool of names.slice(0, MAX_OPERATION_CALLS)) {
      const call: OperationCallProbe = { tool, listed: observation.listed.includes(tool) };
      if (options.policy) {
        const d = decide(options.policy, hierarchy, auth, {
          kind: "request",
          method: "tools/call",
          id: undefined,
          target: { kind: "tool", name: tool },
        });
        call.expected =
          d.decision === "denied"
            ? { decision: "denied", reason: d.reason }
            : d.decision === "insufficient_scope"
              ? { decision: d.decision, required: [...d.required], missing: [...d.missing] }
              : { decision: "allowed", required: [...d.required] };
        // A tool this token may call is not run: the auditor causes no tool's effects.
        if (d.decision === "allowed") continue;
      }
      const callId = nextId++;
      const sent = await post({ id: callId, method: "tools/call", params: { name: tool, arguments: {} } });
      observation.calls.push(call);
      if (!sent.response) {
        call.transportError = sent.error ?? "no response";
        continue;
      }
      call.status = sent.response.status;
      call.wwwAuthenticate = sent.response.headers.get("www-authenticate");
      if (call.wwwAuthenticate) call.challenges = parseWWWAuthenticate(call.wwwAuthenticate);
      if (sent.response.status >= 200 && sent.response.status < 300) {
        const answer = await readAnswer(sent.response, callId);
        if (typeof answer === "string") call.unreadable = answer;
        else if (answer.error !== undefined) {
          const message = (answer.error as { message?: unknown })?.message;
          call.rpcError = bounded(typeof message === "string" ? message : JSON.stringify(answer.error));
        } else if ((answer.result as { isError?: unknown })?.isError === true) {
          call.toolError = resultText(answer.result as Record<string, unknown>);
        }
      } else {
        await sent.response.body?.cancel().catch(() => undefined);
      }
    }
  } finally {
    if (sessionId !== undefined) {
      const closed = await prober.send(resourceUrl, {
        method: "DELETE",
        credential: "access-token",
        headers: headers(),
      });
      await closed.response?.body?.cancel().catch(() => undefined);
    }
  }
  return observation;
}
