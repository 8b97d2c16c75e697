/**
 * Rules about per-operation refusals, over what operations.ts observed with `--token-file`
 * (evaluated only when it ran: no verdict otherwise).
 */
import { isScopeToken, parseScope } from "../shared/scopes.js";
import type { Challenge } from "../shared/www-authenticate.js";
import type { OperationCallProbe, OperationsObservation } from "./operations.js";
import { fail, info, pass, type Rule, skip, type Verdict } from "./rule-helpers.js";

// The observation rides on the auditor's Observations (types.ts) as `operations`.
declare module "./types.js" {
  interface Observations {
    /** The calls made with `--token-file` (operations.ts). */
    operations?: OperationsObservation;
  }
}

/** A refusal's wording inside a 2xx answer (no policy to say the call was unauthorized). */
const REFUSAL_WORDS =
  /\b(insufficient[_ ]scope|scopes?\b|forbidden|unauthori[sz]ed|not authori[sz]ed|permission|access denied|not allowed)/i;

function scopeChallenge(call: OperationCallProbe): Challenge | undefined {
  return call.challenges?.find(
    (c) => /^(bearer|dpop)$/i.test(c.scheme) && c.params.error === "insufficient_scope",
  );
}

/** The call was refused for want of something, by the policy's word or the answer's. */
function expectedRefused(call: OperationCallProbe): boolean {
  return call.expected !== undefined && call.expected.decision !== "allowed";
}

function inside200(call: OperationCallProbe): string | undefined {
  return call.rpcError ?? call.toolError;
}

function describe(call: OperationCallProbe): string {
  if (call.transportError) return `request failed: ${call.transportError}`;
  const status = call.status ?? 0;
  if (status >= 200 && status < 300) {
    if (call.rpcError) return `HTTP ${status} with a JSON-RPC error inside ("${call.rpcError}")`;
    if (call.toolError) return `HTTP ${status} with a tool error inside ("${call.toolError}")`;
    return `HTTP ${status}: the tool ran`;
  }
  return `HTTP ${status}`;
}

/** Applies `judge` to each call made, or explains why none was. */
function perCall(
  o: { operations?: OperationsObservation },
  judge: (call: OperationCallProbe, ops: OperationsObservation) => Verdict | undefined,
): Verdict[] {
  const ops = o.operations;
  if (!ops) return [];
  if (ops.error) return [skip(ops.error)];
  const verdicts = ops.calls.flatMap((call) => {
    const v = judge(call, ops);
    return v ? [{ ...v, subject: `tools/call ${call.tool}` }] : [];
  });
  return verdicts.length ? verdicts : [skip("no call to judge")];
}

export const OPERATION_RULES: readonly Rule[] = [
  {
    id: "resource.operation-calls",
    group: "resource",
    level: "MAY",
    spec: 'Spec "Insufficient scope at run time" (what --token-file called)',
    title: "Tools called with a token holding few scopes",
    check(o) {
      const ops = o.operations;
      if (!ops) return [];
      if (ops.error) return skip(ops.error);
      const scopes = ops.tokenScopes ? `"${ops.tokenScopes.join(" ")}"` : "unknown scopes";
      const listed = `${ops.listed.length} listed${ops.listTruncated ? " (more not read)" : ""}`;
      const hidden = ops.calls.filter((c) => !c.listed).length;
      return info(
        `token with ${scopes}: ${ops.calls.length} tool(s) called, ${listed}` +
          (hidden ? `, ${hidden} named by the policy but not listed` : "") +
          (ops.policyGiven ? "; tools the policy allows this token were not run" : ""),
      );
    },
  },
  {
    id: "resource.operation-policy",
    group: "resource",
    level: "MUST",
    spec: "The operator's --policy; RFC 6750 §3.1 (insufficient_scope: the request needs more than the token grants)",
    title: "A call the policy refuses this token is refused, never answered 2xx",
    check(o) {
      if (!o.operations?.policyGiven) return [];
      return perCall(o, (call) => {
        if (!expectedRefused(call)) return undefined;
        const status = call.status ?? 0;
        if (call.transportError) return fail(describe(call));
        if (status === 401 || status === 403) return pass(`refused with ${status}`);
        const needed =
          call.expected?.decision === "insufficient_scope"
            ? ` (the policy needs ${call.expected.missing.join(" ")})`
            : "";
        return fail(`${describe(call)}${needed}`);
      });
    },
  },
  {
    id: "resource.operation-insufficient-scope",
    group: "resource",
    level: "SHOULD",
    spec: 'Spec "Insufficient scope at run time" 1-2; RFC 6750 §3.1',
    title:
      "A call the token lacks scope for gets 403 with error=insufficient_scope, not a 200 with an error inside",
    check(o) {
      return perCall(o, (call) => {
        // Refused by policy or claim conditions: no scope would help, so no scope challenge is due.
        if (call.expected?.decision === "denied") return undefined;
        if (call.transportError) return fail(describe(call));
        const status = call.status ?? 0;
        if (status === 403) {
          if (scopeChallenge(call)) return pass("403 with error=insufficient_scope");
          // Without a policy, a 403 with no scope challenge may be a refusal no scope would lift.
          return call.expected
            ? fail(
                `403 without an insufficient_scope challenge (WWW-Authenticate: ${call.wwwAuthenticate ?? "none"})`,
              )
            : info("403 without a scope challenge: refused whatever the scope (no --policy to compare with)");
        }
        if (status === 401) {
          return fail(
            "401 for a token that is valid but lacks scope: a client signs in again instead of stepping up",
          );
        }
        if (status >= 200 && status < 300) {
          if (expectedRefused(call)) return fail(`${describe(call)}: the client cannot step up from it`);
          const text = inside200(call);
          if (text !== undefined && REFUSAL_WORDS.test(text)) {
            return fail(`${describe(call)}: a refusal inside a 200, which no client can step up from`);
          }
          return undefined; // Accepted, or failed for its arguments: nothing to judge here.
        }
        return expectedRefused(call) ? fail(describe(call)) : undefined;
      });
    },
  },
  {
    id: "resource.operation-challenge-scope",
    group: "resource",
    level: "SHOULD",
    spec: 'Spec "Insufficient scope at run time" 2-3 (2026-07-28: all needed scopes in one challenge); RFC 6750 §3',
    title:
      "The insufficient_scope challenge is complete: resource_metadata, and every scope the operation needs",
    check(o) {
      return perCall(o, (call) => {
        const challenge = scopeChallenge(call);
        if (call.status !== 403 || !challenge) return undefined;
        const problems: string[] = [];
        const scope = challenge.params.scope;
        const named = parseScope(scope);
        if (scope === undefined || named.size === 0) problems.push("no scope parameter");
        else if (!scope.split(" ").every((s) => isScopeToken(s)))
          problems.push(`a malformed scope "${scope}"`);
        if (!challenge.params.resource_metadata) problems.push("no resource_metadata");
        if (call.expected?.decision === "insufficient_scope") {
          const absent = call.expected.missing.filter((s) => !named.has(s));
          if (absent.length) {
            problems.push(
              `names "${scope ?? ""}" but the policy needs ${call.expected.missing.join(" ")} (absent: ${absent.join(" ")}); ` +
                "a client asking for these would be refused again: every needed scope belongs in one challenge",
            );
          }
        }
        return problems.length ? fail(problems.join("; ")) : pass(`scope="${scope}"`);
      });
    },
  },
];
