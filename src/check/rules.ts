/**
 * The auditor's rule table. Each rule names the spec rule it checks (the project spec's section and
 * the RFC section behind it), its RFC 2119 level, and a pure check over what the probes observed.
 * A rule yields one verdict, or one per subject (per PRM location, per authorization server, per
 * metadata document). Only MUST rules can `fail`; a SHOULD that is not met is a `warn`.
 */
import type { Rule } from "./rule-helpers.js";
import { AUTHORIZATION_SERVER_RULES } from "./rules-as.js";
import { LOGIN_RULES } from "./rules-login.js";
import { OPERATION_RULES } from "./rules-operations.js";
import { RESOURCE_RULES } from "./rules-resource.js";
import { RESOURCE_DPOP_RULES } from "./rules-resource-dpop.js";
import type { Observations } from "./types.js";

export type { Rule, Verdict } from "./rule-helpers.js";

/** Every rule, in report order. */
export const RULES: readonly Rule[] = [
  ...RESOURCE_RULES,
  ...RESOURCE_DPOP_RULES,
  ...OPERATION_RULES,
  ...AUTHORIZATION_SERVER_RULES,
  ...LOGIN_RULES,
];

/** Evaluates every rule that applies to the revision, in table order. */
export function evaluateRules(observations: Observations, rules: readonly Rule[] = RULES) {
  return (
    rules
      .filter((rule) => !rule.revisions || rule.revisions.includes(observations.revision))
      // Login rules only when --login ran.
      .filter((rule) => rule.group !== "login" || observations.login !== undefined)
      .flatMap((rule) => {
        const verdicts = [rule.check(observations)].flat();
        return verdicts.map((v) => ({
          rule: rule.id,
          group: rule.group,
          level: rule.level,
          spec: rule.spec,
          title: rule.title,
          // Only a MUST can fail; anything weaker that is not met is a warning.
          outcome: v.outcome === "fail" && rule.level !== "MUST" ? ("warn" as const) : v.outcome,
          message: v.message,
          ...(v.subject !== undefined && { subject: v.subject }),
        }));
      })
  );
}
