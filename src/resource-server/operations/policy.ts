/**
 * The operation policy: which MCP operations (JSON-RPC methods, tools by name, resources by URI or
 * URI template, prompts by name) a token may call, and with which scopes (spec "Insufficient scope
 * at run time"; SEP-2350: every scope an operation needs, named in one challenge).
 *
 * One format, written as a plain object in code or as a JSON/YAML file ({@link parseOperationPolicy};
 * YAML 1.2 is a superset of JSON, so one parser reads both and knows every value's line). Checked
 * once, when the gate is made: a bad policy throws at start-up with the line and the path of the
 * offending value, never on a request.
 */
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import { GatehouseTypeError } from "../../shared/errors.js";
import { isScopeToken } from "../../shared/scopes.js";
import { compileUriTemplate, type UriTemplate } from "./uri-template.js";

/** Conditions on the token's claims: every named claim must hold one of the listed values. */
export type ClaimConditions = Readonly<Record<string, string | readonly string[]>>;

/**
 * What one operation needs: `scopes` (all of them, through the scope hierarchy) and, optionally,
 * `when`, conditions on the token's claims (`sub`, `client_id`, roles, groups, any claim). A rule
 * written `"deny"` refuses the operation whatever the token.
 */
export type OperationRule =
  | "deny"
  | {
      readonly scopes?: readonly string[];
      readonly when?: ClaimConditions;
    };

/** The policy as written (a plain object, or the document of a JSON/YAML file). */
export interface OperationPolicy {
  /** Scopes every request to the endpoint needs (GET streams, DELETE, every message). */
  readonly base?: readonly string[];
  /**
   * Anything the policy does not name: `"deny"`, or a rule (e.g. `{ scopes: ["mcp:use"] }`).
   * Default `"deny"`. The protocol's own messages (`initialize`, `ping`, `server/discover`,
   * notifications, responses to the server's requests) need only `base`, unless `methods` names them.
   */
  readonly default?: OperationRule;
  /** By JSON-RPC method (`tools/list`, `resources/list`, ...); for `tools/call` etc. added to the target's rule. */
  readonly methods?: Readonly<Record<string, OperationRule>>;
  /** `tools/call` by tool name; `"*"` for every tool not named. */
  readonly tools?: Readonly<Record<string, OperationRule>>;
  /**
   * `resources/read` (and `resources/subscribe`/`unsubscribe`) by URI, or by RFC 6570 URI template
   * (`{var}`, `{+var}`); a template's variables may appear in its scopes
   * (`notes:read:{id}`). Exact URIs win over templates; `"*"` for anything else.
   */
  readonly resources?: Readonly<Record<string, OperationRule>>;
  /** `prompts/get` by prompt name; `"*"` for every prompt not named. */
  readonly prompts?: Readonly<Record<string, OperationRule>>;
}

/** A rule checked and ready: a deny, or the scopes (possibly templated) and claim conditions. */
export type CompiledRule =
  | { readonly deny: true }
  | {
      readonly deny: false;
      /** Scopes; a templated one holds `{var}` references to the matched URI's variables. */
      readonly scopes: readonly string[];
      readonly templated: boolean;
      readonly when: ReadonlyMap<string, readonly string[]> | undefined;
    };

export interface CompiledPolicy {
  readonly base: readonly string[];
  readonly fallback: CompiledRule;
  readonly methods: ReadonlyMap<string, CompiledRule>;
  readonly tools: ReadonlyMap<string, CompiledRule>;
  readonly prompts: ReadonlyMap<string, CompiledRule>;
  readonly resources: ReadonlyMap<string, CompiledRule>;
  readonly resourceTemplates: readonly { template: UriTemplate; rule: CompiledRule }[];
  /** Every scope a rule names (templated ones excluded), for `scopes_supported`. */
  readonly scopesNamed: readonly string[];
}

const TOP_LEVEL = new Set(["base", "default", "methods", "tools", "resources", "prompts"]);
const RULE_KEYS = new Set(["scopes", "when"]);
/** A scope with `{var}` references: scope-token characters around them (checked again once filled in). */
const TEMPLATED_SCOPE = /^(?:[\x21\x23-\x5b\x5d-\x7a\x7c\x7e]|\{[A-Za-z0-9_]+\})+$/;

type Path = readonly (string | number)[];

/** Where a value sits in the source, for error messages (`file line 7`); empty for a plain object. */
type Locate = (path: Path) => string;

function pathText(path: Path): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else
      out += /^[A-Za-z_][A-Za-z0-9_]*$/.test(part) ? `${out ? "." : ""}${part}` : `[${JSON.stringify(part)}]`;
  }
  return out || "(policy)";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

class PolicyChecker {
  constructor(private readonly locate: Locate) {}

  fail(path: Path, message: string): never {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `operation policy${this.locate(path)}: ${pathText(path)} ${message}`,
    );
  }

  scopes(
    value: unknown,
    path: Path,
    allowTemplates: ReadonlySet<string> | undefined,
  ): { scopes: string[]; templated: boolean } {
    if (!Array.isArray(value)) this.fail(path, "must be a list of scopes");
    let templated = false;
    const scopes: string[] = [];
    value.forEach((scope, i) => {
      if (typeof scope !== "string") this.fail([...path, i], "must be a string");
      if (isScopeToken(scope) && !scope.includes("{")) {
        scopes.push(scope);
        return;
      }
      if (allowTemplates !== undefined && TEMPLATED_SCOPE.test(scope)) {
        for (const [, name] of scope.matchAll(/\{([A-Za-z0-9_]+)\}/g)) {
          if (!allowTemplates.has(name!))
            this.fail([...path, i], `names {${name}}, which its URI template does not have`);
        }
        templated = true;
        scopes.push(scope);
        return;
      }
      this.fail([...path, i], "is not a valid scope token (RFC 6749 §3.3)");
    });
    return { scopes, templated };
  }

  when(value: unknown, path: Path): Map<string, readonly string[]> {
    if (!isRecord(value)) this.fail(path, "must map claim names to a value or a list of values");
    const out = new Map<string, readonly string[]>();
    for (const [claim, expected] of Object.entries(value)) {
      const values = typeof expected === "string" ? [expected] : expected;
      if (!Array.isArray(values) || values.length === 0 || values.some((v) => typeof v !== "string")) {
        this.fail([...path, claim], "must be a string or a non-empty list of strings");
      }
      out.set(claim, values as string[]);
    }
    return out;
  }

  rule(value: unknown, path: Path, variables?: ReadonlySet<string>): CompiledRule {
    if (value === "deny") return { deny: true };
    if (!isRecord(value)) this.fail(path, 'must be "deny" or a rule with scopes and/or when');
    for (const key of Object.keys(value)) {
      if (!RULE_KEYS.has(key)) this.fail([...path, key], "is not a rule field (scopes, when)");
    }
    const { scopes, templated } =
      value.scopes === undefined
        ? { scopes: [], templated: false }
        : this.scopes(value.scopes, [...path, "scopes"], variables);
    const when = value.when === undefined ? undefined : this.when(value.when, [...path, "when"]);
    return { deny: false, scopes, templated, when };
  }

  template(source: string, path: Path): UriTemplate {
    try {
      return compileUriTemplate(source);
    } catch (error) {
      this.fail(path, `is not a URI template this policy supports (${(error as Error).message})`);
    }
  }

  table(value: unknown, path: Path): Map<string, CompiledRule> {
    const out = new Map<string, CompiledRule>();
    if (value === undefined) return out;
    if (!isRecord(value)) this.fail(path, "must map names to rules");
    for (const [name, rule] of Object.entries(value)) {
      if (name === "") this.fail(path, "has an empty name");
      out.set(name, this.rule(rule, [...path, name]));
    }
    return out;
  }
}

/**
 * Checks a policy and compiles it (URI templates, claim conditions). Throws
 * {@link GatehouseTypeError} `ERR_INVALID_OPTION` naming the offending value (and its line, for a
 * parsed file).
 */
export function compileOperationPolicy(policy: OperationPolicy, locate: Locate = () => ""): CompiledPolicy {
  const check = new PolicyChecker(locate);
  if (!isRecord(policy)) check.fail([], "must be an object");
  for (const key of Object.keys(policy)) {
    if (!TOP_LEVEL.has(key))
      check.fail([key], "is not a policy field (base, default, methods, tools, resources, prompts)");
  }
  const base = policy.base === undefined ? [] : check.scopes(policy.base, ["base"], undefined).scopes;
  const fallback =
    policy.default === undefined ? ({ deny: true } as const) : check.rule(policy.default, ["default"]);
  const methods = check.table(policy.methods, ["methods"]);
  const tools = check.table(policy.tools, ["tools"]);
  const prompts = check.table(policy.prompts, ["prompts"]);
  const resources = new Map<string, CompiledRule>();
  const resourceTemplates: { template: UriTemplate; rule: CompiledRule }[] = [];
  if (policy.resources !== undefined) {
    if (!isRecord(policy.resources)) check.fail(["resources"], "must map URIs or URI templates to rules");
    for (const [uri, rule] of Object.entries(policy.resources)) {
      const path = ["resources", uri];
      if (uri === "") check.fail(["resources"], "has an empty URI");
      if (!uri.includes("{")) {
        resources.set(uri, check.rule(rule, path));
        continue;
      }
      const template = check.template(uri, path);
      resourceTemplates.push({ template, rule: check.rule(rule, path, new Set(template.variables)) });
    }
  }
  const named = new Set(base);
  for (const rule of [
    fallback,
    ...methods.values(),
    ...tools.values(),
    ...prompts.values(),
    ...resources.values(),
    ...resourceTemplates.map((t) => t.rule),
  ]) {
    if (!rule.deny) for (const s of rule.scopes) if (!s.includes("{")) named.add(s);
  }
  return { base, fallback, methods, tools, prompts, resources, resourceTemplates, scopesNamed: [...named] };
}

/**
 * Reads a policy file's text (JSON or YAML) and compiles it. `source` names the file in errors:
 * a syntax error or a bad value says `source line N: path ...`.
 */
export function parseOperationPolicy(text: string, source = "policy"): CompiledPolicy {
  const lines = new LineCounter();
  const document = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const first = document.errors[0];
  if (first !== undefined) {
    const at = lines.linePos(first.pos[0]);
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `operation policy ${source} line ${at.line}: ${first.message.split("\n")[0]}`,
    );
  }
  let value: unknown;
  try {
    // No aliases at all: a policy has no use for them, and expanding them is the billion-laughs door.
    value = document.toJS({ maxAliasCount: 0 });
  } catch {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      `operation policy ${source}: YAML aliases are not allowed`,
    );
  }
  const locate: Locate = (path) => {
    // The key of the deepest part of the path that exists (a missing field at its parent's key).
    for (let n = path.length; n > 0; n--) {
      const parent = n === 1 ? document.contents : document.getIn(path.slice(0, n - 1), true);
      const last = path[n - 1];
      let node: Node | undefined;
      if (isMap(parent)) {
        const pair = parent.items.find((p) => isScalar(p.key) && p.key.value === last);
        node = (pair?.key as Node | undefined) ?? undefined;
      } else if (isSeq(parent) && typeof last === "number") node = parent.items[last] as Node | undefined;
      if (node?.range) return ` ${source} line ${lines.linePos(node.range[0]).line}`;
    }
    return ` ${source}`;
  };
  return compileOperationPolicy(value as OperationPolicy, locate);
}
