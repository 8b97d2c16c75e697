/**
 * The one place where the operation policy is applied to a message and a token: which rule
 * governs a message, the scopes it needs (the union of `base`, the method's rule and the target's
 * rule), whether the token's claims meet its conditions, and which scopes are missing through the
 * scope hierarchy (2026-07-28, "Insufficient scope", rule 5: the hierarchy MUST be honoured).
 */
import { isScopeToken, type ScopeHierarchy } from "../../shared/scopes.js";
import type { AuthInfo } from "../types.js";
import type { McpMessage, OperationTarget } from "./messages.js";
import type { CompiledPolicy, CompiledRule } from "./policy.js";

/** The protocol's own messages: they need only `base` unless the policy names their method. */
function isProtocolMessage(message: McpMessage): boolean {
  if (message.kind === "response") return true;
  const method = message.method!;
  return (
    method === "initialize" ||
    method === "ping" ||
    method === "server/discover" ||
    method.startsWith("notifications/")
  );
}

/** What a message needs before any token is looked at. */
export type Requirement =
  | { readonly deny: true; readonly reason: "policy" | "unmatched" | "scope-template" }
  | {
      readonly deny: false;
      readonly scopes: readonly string[];
      /** Claim conditions, all of which must hold (the method's rule and the target's). */
      readonly conditions: readonly ReadonlyMap<string, readonly string[]>[];
    };

const DENY_POLICY: Requirement = { deny: true, reason: "policy" };

/** The rule for a target: exact name, then (resources) the first matching template, then `"*"`. */
function targetRule(
  policy: CompiledPolicy,
  target: OperationTarget,
): { rule: CompiledRule; variables?: Record<string, string> } | undefined {
  if (target.kind === "resource") {
    const exact = policy.resources.get(target.name);
    if (exact !== undefined) return { rule: exact };
    for (const { template, rule } of policy.resourceTemplates) {
      const variables = template.match(target.name);
      if (variables !== undefined) return { rule, variables };
    }
    const any = policy.resources.get("*");
    return any === undefined ? undefined : { rule: any };
  }
  const table = target.kind === "tool" ? policy.tools : policy.prompts;
  // Names are compared as sent, code point for code point: no case folding, no Unicode
  // normalisation, so a look-alike name is another (unnamed) operation.
  const rule = table.get(target.name) ?? table.get("*");
  return rule === undefined ? undefined : { rule };
}

/** `notes:read:{id}` with the matched variables; `undefined` when a value would not be a scope token. */
function fillScopes(scopes: readonly string[], variables: Record<string, string>): string[] | undefined {
  const out: string[] = [];
  for (const scope of scopes) {
    const filled = scope.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => variables[name] ?? "");
    // A value that is not scope-token text (a space, a quote, a backslash) could split or break the
    // challenge (RFC 6749 §3.3, RFC 6750 §3): the operation is refused instead.
    if (!isScopeToken(filled)) return undefined;
    out.push(filled);
  }
  return out;
}

/**
 * The requirement of one message: `base`, plus its method's rule, plus its target's rule (a named
 * tool/resource/prompt, else `"*"`, else the default). A `"deny"` anywhere denies.
 */
export function requirementOf(policy: CompiledPolicy, message: McpMessage): Requirement {
  const scopes = new Set(policy.base);
  const conditions: ReadonlyMap<string, readonly string[]>[] = [];
  const add = (rule: CompiledRule, variables?: Record<string, string>): Requirement | undefined => {
    if (rule.deny) return DENY_POLICY;
    let list = rule.scopes;
    if (rule.templated) {
      const filled = fillScopes(rule.scopes, variables ?? {});
      if (filled === undefined) return { deny: true, reason: "scope-template" };
      list = filled;
    }
    for (const s of list) scopes.add(s);
    if (rule.when !== undefined) conditions.push(rule.when);
    return undefined;
  };
  const methodRule = message.method === undefined ? undefined : policy.methods.get(message.method);
  if (message.target !== undefined) {
    if (methodRule !== undefined) {
      const denied = add(methodRule);
      if (denied) return denied;
    }
    const found = targetRule(policy, message.target);
    const denied = found === undefined ? add(policy.fallback) : add(found.rule, found.variables);
    if (denied) return denied.deny && found === undefined ? { deny: true, reason: "unmatched" } : denied;
  } else if (methodRule !== undefined) {
    const denied = add(methodRule);
    if (denied) return denied;
  } else if (!isProtocolMessage(message)) {
    const denied = add(policy.fallback);
    if (denied) return { deny: true, reason: "unmatched" };
  }
  return { deny: false, scopes: [...scopes], conditions };
}

/** The claim a condition names: `sub` and `client_id` from the verified facts, others from the claims. */
function claimValue(auth: AuthInfo, name: string): unknown {
  if (name === "sub") return auth.subject;
  if (name === "client_id") return auth.clientId;
  return auth.claims?.[name];
}

/** Every condition holds: the claim equals one of the values, or (a list claim) contains one. */
export function conditionsHold(auth: AuthInfo, conditions: Requirement & { deny: false }): boolean {
  for (const condition of conditions.conditions) {
    for (const [name, accepted] of condition) {
      const value = claimValue(auth, name);
      const held = Array.isArray(value)
        ? value.some((v) => typeof v === "string" && accepted.includes(v))
        : typeof value === "string" && accepted.includes(value);
      if (!held) return false;
    }
  }
  return true;
}

/** The verdict on one message for a verified token. */
export type MessageDecision =
  | { readonly decision: "allowed"; readonly required: readonly string[] }
  | {
      readonly decision: "insufficient_scope";
      readonly required: readonly string[];
      readonly missing: readonly string[];
    }
  | {
      readonly decision: "denied";
      readonly reason: "policy" | "unmatched" | "scope-template" | "conditions";
    };

/** Judges one message for `auth`: denied (policy, conditions), missing scopes, or allowed. */
export function decide(
  policy: CompiledPolicy,
  hierarchy: ScopeHierarchy,
  auth: AuthInfo,
  message: McpMessage,
): MessageDecision {
  return decideRequirement(hierarchy, auth, requirementOf(policy, message));
}

/**
 * {@link decide} for a requirement already computed (the gate computes each message's once).
 * `covered`: the token was already found to hold every scope of the requirement (the gate judged
 * it against their union through the same hierarchy), so only the conditions are left to check.
 */
export function decideRequirement(
  hierarchy: ScopeHierarchy,
  auth: AuthInfo,
  requirement: Requirement,
  covered = false,
): MessageDecision {
  if (requirement.deny) return { decision: "denied", reason: requirement.reason };
  if (requirement.conditions.length > 0 && !conditionsHold(auth, requirement))
    return { decision: "denied", reason: "conditions" };
  if (!covered) {
    const missing = hierarchy.missing(auth.scopes, requirement.scopes);
    if (missing.size > 0)
      return { decision: "insufficient_scope", required: requirement.scopes, missing: [...missing] };
  }
  return { decision: "allowed", required: requirement.scopes };
}

/**
 * May the token call an item of a listing (the listing filter, SEP-1881)? A tool or prompt by
 * name, a resource by URI, as `tools/call`, `prompts/get`, `resources/read` would be judged; a
 * resource template by the policy's rule for that very template (its templated scopes are judged
 * once a URI fills them in), else as a URI. An item without its name is not shown.
 */
export function listedItemAllowed(
  policy: CompiledPolicy,
  hierarchy: ScopeHierarchy,
  auth: AuthInfo,
  kind: "tools" | "resources" | "resourceTemplates" | "prompts",
  item: Record<string, unknown>,
): boolean {
  const field = kind === "resources" ? item.uri : kind === "resourceTemplates" ? item.uriTemplate : item.name;
  if (typeof field !== "string") return false;
  if (kind === "resourceTemplates") {
    const entry = policy.resourceTemplates.find((t) => t.template.source === field);
    if (entry !== undefined) {
      const rule = entry.rule;
      if (rule.deny) return false;
      const methodRule = policy.methods.get("resources/read");
      if (methodRule?.deny) return false;
      const scopes = [
        ...policy.base,
        ...(methodRule?.deny === false ? methodRule.scopes : []),
        ...rule.scopes.filter((s) => !s.includes("{")),
      ];
      const conditions = [methodRule?.deny === false ? methodRule.when : undefined, rule.when].filter(
        (c): c is ReadonlyMap<string, readonly string[]> => c !== undefined,
      );
      return (
        conditionsHold(auth, { deny: false, scopes, conditions }) && hierarchy.satisfies(auth.scopes, scopes)
      );
    }
  }
  const method = kind === "tools" ? "tools/call" : kind === "prompts" ? "prompts/get" : "resources/read";
  const target: OperationTarget = {
    kind: kind === "tools" ? "tool" : kind === "prompts" ? "prompt" : "resource",
    name: field,
  };
  return (
    decide(policy, hierarchy, auth, { kind: "request", method, id: undefined, target }).decision === "allowed"
  );
}
