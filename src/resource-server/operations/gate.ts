/**
 * The operation gate: the resource server's bearer judgement (resource-server.ts, unchanged) plus
 * the operation policy, for an MCP endpoint over Streamable HTTP. It reads the JSON-RPC body once
 * (bounded), judges every message of it, answers one challenge naming every scope the request
 * needs (2026-07-28 "Insufficient scope", SEP-2350; the union for a batch; the 2025-11-25
 * strategy as the resource server is configured), emits one audit event per message, and hands
 * the parsed body on so the server does not parse it again.
 *
 * Order: Host/Origin and the token as the resource server judges them (401 before anything about
 * the operation is said); a policy refusal (`"deny"`, the default for an unnamed operation, unmet
 * claim conditions: 403 without a scope challenge, since no scope would help); then missing scopes
 * (403 `insufficient_scope`, the challenge built by challenge.ts).
 */
import { declaresMoreThan, readRequestTextUpTo, TOO_LARGE } from "../../shared/bounded-body.js";
import { NO_STORE } from "../../shared/http.js";
import { telemetryInstalled } from "../../shared/telemetry.js";
import type { BearerRequestHead } from "../bearer-token.js";
import { headOfRequest } from "../bearer-token.js";
import type { ChallengeParts } from "../challenge.js";
import { challengePartsResponse } from "../challenge.js";
import type { BearerJudge, BearerVerdict, ResourceServer } from "../resource-server.js";
import type { AuthInfo } from "../types.js";
import {
  emitOperationEvents,
  messageFields,
  type OperationAuditEvent,
  type OperationAuditSinks,
} from "./audit.js";
import {
  decideRequirement,
  listedItemAllowed,
  type MessageDecision,
  type Requirement,
  requirementOf,
} from "./decide.js";
import { filterListingResponse, type ListingKind, listingKindOf } from "./listing-filter.js";
import {
  type MalformedBody,
  type McpMessage,
  malformedResponseBody,
  parseJsonRpcBody,
  parseJsonRpcValue,
  tooLarge,
} from "./messages.js";
import { type CompiledPolicy, compileOperationPolicy, type OperationPolicy } from "./policy.js";

/** Largest JSON-RPC body read by default: 4 MiB (the official SDKs' message limit). */
export const DEFAULT_MAX_MCP_BODY = 4 * 1024 * 1024;
/**
 * Largest body read from a request without credentials (no `Authorization` header): its answer is
 * a 401 whatever it says, and reading it only lets the 401 name the operation's scopes, so a
 * stranger cannot make the server hold more than this (`initialize` and the like fit).
 */
const ANONYMOUS_BODY_LIMIT = 16 * 1024;

export interface OperationGateOptions extends OperationAuditSinks {
  /** The policy: a plain object, or one read from a file by `parseOperationPolicy`. */
  policy: OperationPolicy | CompiledPolicy;
  /** Largest POST body read, in bytes (default {@link DEFAULT_MAX_MCP_BODY}); a larger one gets 413. */
  maxBodyBytes?: number;
  /**
   * Filter `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list` results
   * to what the token may call (JSON and SSE responses). Off by default: SEP-1881, which proposes
   * it, is still open, and a client may rely on seeing what it could step up to.
   */
  filterListings?: boolean;
}

/** What the gate passes on: the token's facts, the parsed body, and the listings to filter. */
export interface OperationContext {
  readonly auth: AuthInfo;
  /** The JSON-RPC body as parsed (POST), `undefined` for GET/DELETE. Hand it to the server as is. */
  readonly body: unknown;
  readonly messages: readonly McpMessage[];
  /** JSON-RPC ids (as JSON text) of the listing requests whose results are filtered. */
  readonly listings: ReadonlyMap<string, ListingKind> | undefined;
}

export type OperationVerdict =
  | ({ readonly ok: true } & OperationContext)
  | { readonly ok: false; readonly answer: ChallengeParts };

/**
 * The body as an adapter read it: text, the marker that it went over the cap, or a value a
 * framework already parsed as JSON (`{ parsed }`, e.g. Express's `req.body` after `express.json()`).
 */
export type ReadBody = string | typeof BODY_TOO_LARGE | { readonly parsed: unknown } | undefined;
export const BODY_TOO_LARGE: unique symbol = Symbol("body too large");

export interface OperationGate {
  readonly policy: CompiledPolicy;
  readonly maxBodyBytes: number;
  /**
   * How much of this request's body an adapter reads: `maxBodyBytes`, or 16 KiB for a request
   * without credentials (its answer is a 401 anyway; beyond, the 401 names `scopes_supported`).
   */
  readLimit(head: BearerRequestHead): number;
  /**
   * Judges a request whose body (a POST's) the adapter has read, at most `maxBodyBytes` bytes
   * ({@link BODY_TOO_LARGE} beyond). `started` (`performance.now()`) dates the audit's latency.
   */
  judge(head: BearerRequestHead, body: ReadBody, started?: number): Promise<OperationVerdict>;
  /** The gate as a web-standard middleware: the answer itself, or `next` with the context. */
  handle(
    request: Request,
    next: (request: Request, context: OperationContext) => Promise<Response>,
  ): Promise<Response>;
  /** The server's response with listing results filtered (when enabled and the request listed). */
  filterResponse(response: Response, context: OperationContext): Promise<Response>;
}

const NOTHING_MISSING: ReadonlySet<string> = new Set();

/** Whether an audit event has anywhere to go (asked per request: an SDK may be installed later). */
function auditing(sinks: OperationAuditSinks): boolean {
  return sinks.logger !== undefined || sinks.onAuditEvent !== undefined || telemetryInstalled();
}

/** A head whose body has already been read by the gate: the token rules see the same text. */
class ReadHead implements BearerRequestHead {
  constructor(
    private readonly inner: BearerRequestHead,
    private readonly text: string,
  ) {}
  get url() {
    return this.inner.url;
  }
  get method() {
    return this.inner.method;
  }
  get host() {
    return this.inner.host;
  }
  requestUrl(): string {
    return this.inner.requestUrl?.() ?? this.inner.url;
  }
  header(name: string): string | null {
    return this.inner.header(name);
  }
  get hasBody(): boolean {
    return this.inner.hasBody;
  }
  async bodyText(): Promise<string> {
    return this.text;
  }
}

function jsonAnswer(status: number, body: string, cors: boolean): ChallengeParts {
  const headers: Record<string, string> = { ...NO_STORE, "content-type": "application/json" };
  if (cors) headers["access-control-allow-origin"] = "*";
  return { status, headers, body };
}

const FORBIDDEN_BODY = JSON.stringify({
  error: "forbidden",
  error_description: "This MCP operation is not permitted for this token",
});

function isCompiled(policy: OperationPolicy | CompiledPolicy): policy is CompiledPolicy {
  return (policy as CompiledPolicy).methods instanceof Map;
}

/** Reads a web request's body, at most `limit` bytes (the stream is cancelled beyond). */
export async function readBoundedText(request: Request, limit: number): Promise<ReadBody> {
  if (declaresMoreThan(request.headers, limit)) return BODY_TOO_LARGE;
  const text = await readRequestTextUpTo(request, limit);
  return text === TOO_LARGE ? BODY_TOO_LARGE : text;
}

/**
 * Makes the operation gate of `server` (its token rules, metadata, challenges and scope hierarchy)
 * with `options.policy`. The policy is checked now: a bad one throws at start-up.
 */
export function createOperationGate(
  server: Pick<ResourceServer, "judge" | "scopeHierarchy">,
  options: OperationGateOptions,
): OperationGate {
  const policy = isCompiled(options.policy) ? options.policy : compileOperationPolicy(options.policy);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_MCP_BODY;
  if (!Number.isInteger(maxBodyBytes) || maxBodyBytes < 1) {
    throw new TypeError("maxBodyBytes must be a positive integer");
  }
  const hierarchy = server.scopeHierarchy;
  const filterListings = options.filterListings === true;
  const tokenOnly = server.judge({});
  /** Judges by required-scope set, made on first use (the sets a policy yields are few). */
  const judges = new Map<string, BearerJudge>();
  const judgeFor = (scopes: readonly string[]): BearerJudge => {
    if (scopes.length === 0) return tokenOnly;
    const key = scopes.join(" ");
    let judge = judges.get(key);
    if (judge === undefined) {
      judge = server.judge({ scopes });
      // Template-filled scopes are chosen by the client: bound what they can make us keep.
      if (judges.size >= 1024) judges.clear();
      judges.set(key, judge);
    }
    return judge;
  };

  const emit = (events: OperationAuditEvent[]) => emitOperationEvents(options, events);
  /** The listing requests whose results are filtered (with `filterListings`), by id as JSON. */
  const listingsOf = (messages: readonly McpMessage[]): Map<string, ListingKind> | undefined => {
    if (!filterListings) return undefined;
    let listings: Map<string, ListingKind> | undefined;
    for (const m of messages) {
      const kind = m.kind === "request" ? listingKindOf(m.method) : undefined;
      if (kind === undefined) continue;
      listings ??= new Map();
      listings.set(JSON.stringify(m.id), kind);
    }
    return listings;
  };

  const judge = async (
    head: BearerRequestHead,
    body: ReadBody,
    started = performance.now(),
  ): Promise<OperationVerdict> => {
    const httpMethod = head.method ?? "GET";
    const base = { type: "mcp_operation" as const, http_method: httpMethod };
    const finish = (events: OperationAuditEvent[], verdict: OperationVerdict): OperationVerdict => {
      const at = Date.now();
      const latency = Math.round((performance.now() - started) * 1000) / 1000;
      for (const e of events) {
        e.at = at;
        e.latency_ms = latency;
      }
      emit(events);
      return verdict;
    };
    const event = (
      fields: Partial<OperationAuditEvent>,
      decision: OperationAuditEvent["decision"],
      status: number,
    ) => ({ ...base, ...fields, decision, status, at: 0, latency_ms: 0 }) as OperationAuditEvent;

    // 1. The body, read once (a POST's), parsed and named message by message.
    let messages: readonly McpMessage[] = [];
    let parsed: unknown;
    let malformed: MalformedBody | undefined;
    let judgedHead = head;
    if (body === BODY_TOO_LARGE) malformed = tooLarge();
    else if (body !== undefined) {
      if (typeof body === "string") judgedHead = new ReadHead(head, body);
      const result = typeof body === "string" ? parseJsonRpcBody(body) : parseJsonRpcValue(body.parsed);
      if (result.ok) {
        messages = result.messages;
        parsed = result.body;
      } else malformed = result.malformed;
    }

    // 2. What the request needs before any token is looked at: the union of its messages' scopes,
    //    and whether the policy refuses one of them outright. Each message's requirement is kept
    //    for step 5 (computed once).
    const needed = new Set(policy.base);
    let refusedOutright = false;
    const judged: Requirement[] = [];
    for (const message of messages) {
      const requirement = requirementOf(policy, message);
      judged.push(requirement);
      if (requirement.deny) refusedOutright = true;
      else for (const s of requirement.scopes) needed.add(s);
    }

    // 3. The token (Host/Origin first), judged against every needed scope: a 401 names them all.
    const scopes = malformed !== undefined || refusedOutright ? policy.base : [...needed];
    let verdict: BearerVerdict = await judgeFor(scopes)(judgedHead);
    if (!verdict.ok && verdict.challenge.status !== 403) {
      const events = messages.length
        ? messages.map((m) =>
            event(messageFields(m), "unauthenticated", verdict.ok ? 0 : verdict.challenge.status),
          )
        : [event({}, "unauthenticated", verdict.challenge.status)];
      return finish(events, { ok: false, answer: verdict.challenge });
    }
    let challenge: ChallengeParts | undefined;
    if (!verdict.ok) {
      // 403: a host refusal (no challenge) ends here; an insufficient scope needs the token's facts
      // for the policy's own refusals and the audit (the verifier holds them now).
      if (!verdict.challenge.headers["www-authenticate"]) {
        return finish([event({}, "denied", 403)], { ok: false, answer: verdict.challenge });
      }
      challenge = verdict.challenge;
      verdict = await tokenOnly(judgedHead);
      if (!verdict.ok)
        return finish([event({}, "unauthenticated", verdict.challenge.status)], {
          ok: false,
          answer: verdict.challenge,
        });
    }
    const auth = verdict.auth;
    const who: Partial<OperationAuditEvent> = {};
    if (auth.subject !== undefined) who.sub = auth.subject;
    if (auth.clientId !== undefined) who.client_id = auth.clientId;

    // 4. A body that is not JSON-RPC: the transport's answer, once the caller is known.
    if (malformed !== undefined) {
      return finish([event(who, "malformed", malformed.status)], {
        ok: false,
        answer: jsonAnswer(malformed.status, malformedResponseBody(malformed), true),
      });
    }

    // 5. Each message for this token; a batch passes only whole. When the token passed the
    //    judgement against the union of every message's scopes (no challenge came back, nothing
    //    was refused outright), each message's scopes are covered through the same hierarchy:
    //    only claim conditions are left to check (2026-07-28 "Insufficient scope", rule 5).
    const covered = challenge === undefined && !refusedOutright;
    const decisions: MessageDecision[] = judged.map((r) => decideRequirement(hierarchy, auth, r, covered));
    const baseMissing = covered ? NOTHING_MISSING : hierarchy.missing(auth.scopes, policy.base);
    const denied = decisions.some((d) => d.decision === "denied");
    const lacking = baseMissing.size > 0 || decisions.some((d) => d.decision === "insufficient_scope");
    if (!denied && !lacking && !auditing(options)) {
      // Allowed, and nobody listens for the events (no logger, no hook, no telemetry SDK): none built.
      return { ok: true, auth, body: parsed, messages, listings: listingsOf(messages) };
    }
    const status = denied ? 403 : lacking ? 403 : 200;
    const events = messages.map((m, i) => {
      const d = decisions[i]!;
      const fields: Partial<OperationAuditEvent> = { ...messageFields(m), ...who };
      if (d.decision === "denied") return event({ ...fields, reason: d.reason }, "denied", status);
      fields.required_scopes = [...d.required];
      if (d.decision === "insufficient_scope") {
        return event({ ...fields, missing_scopes: [...d.missing] }, "insufficient_scope", status);
      }
      return event(fields, status === 200 ? "allowed" : "refused_with_batch", status);
    });
    if (messages.length === 0) {
      const fields = { ...who, required_scopes: [...policy.base] };
      events.push(
        baseMissing.size
          ? event({ ...fields, missing_scopes: [...baseMissing] }, "insufficient_scope", 403)
          : event(fields, "allowed", 200),
      );
    }
    if (denied) return finish(events, { ok: false, answer: jsonAnswer(403, FORBIDDEN_BODY, true) });
    if (lacking) {
      // The challenge (challenge.ts) names every scope the request needs; the earlier judgement
      // made it already unless the token covered the pre-token union (a claim-templated case).
      if (challenge === undefined) {
        const again = await judgeFor([...needed])(judgedHead);
        challenge = again.ok ? jsonAnswer(403, FORBIDDEN_BODY, true) : again.challenge;
      }
      return finish(events, { ok: false, answer: challenge });
    }
    return finish(events, { ok: true, auth, body: parsed, messages, listings: listingsOf(messages) });
  };

  const filterResponse = async (response: Response, context: OperationContext): Promise<Response> => {
    if (context.listings === undefined) return response;
    return filterListingResponse(response, context.listings, (kind, item) =>
      listedItemAllowed(policy, hierarchy, context.auth, kind, item),
    );
  };

  const readLimit = (head: BearerRequestHead): number =>
    head.header("authorization") === null ? Math.min(ANONYMOUS_BODY_LIMIT, maxBodyBytes) : maxBodyBytes;

  return {
    policy,
    maxBodyBytes,
    readLimit,
    judge,
    filterResponse,
    async handle(request, next) {
      const started = performance.now();
      const head = headOfRequest(request);
      const body = request.method === "POST" ? await readBoundedText(request, readLimit(head)) : undefined;
      const verdict = await judge(head, body, started);
      if (!verdict.ok) return challengePartsResponse(verdict.answer);
      // The body was consumed here: the request handed on carries the same bytes for servers that
      // read it, and the parsed body is in the context for those that take it (SDK `parsedBody`).
      const forwarded =
        typeof body === "string"
          ? new Request(request, { body, duplex: "half" } as RequestInit & { duplex: "half" })
          : request;
      return filterResponse(await next(forwarded, verdict), verdict);
    },
  };
}
