/**
 * The operation policy file: JSON and YAML read by one parser, checked at start-up, every error
 * naming the file, the line and the path of the offending value; the same policy as a plain object.
 */
import { describe, expect, it } from "vitest";
import { compileOperationPolicy, parseOperationPolicy } from "../../../src/resource-server/index.js";
import { decide } from "../../../src/resource-server/operations/decide.js";
import type { AuthInfo } from "../../../src/resource-server/types.js";
import { ScopeHierarchy } from "../../../src/shared/scopes.js";

const auth = (scopes: string[], claims: Record<string, unknown> = {}): AuthInfo => ({
  subject: "alice",
  clientId: "app",
  scopes,
  audience: ["https://mcp.example.com/mcp"],
  expiresAt: Date.now() / 1000 + 60,
  issuer: "https://as.example.com",
  claims,
});

const call = (name: string) =>
  ({ kind: "request", method: "tools/call", id: 1, target: { kind: "tool", name } }) as const;

describe("parseOperationPolicy", () => {
  it("reads the three-line policy of the docs", () => {
    const policy = parseOperationPolicy(
      "default: { scopes: [mcp:use] }\ntools:\n  delete_file: { scopes: [files:admin] }\n",
    );
    const h = new ScopeHierarchy();
    expect(decide(policy, h, auth(["mcp:use"]), call("read_file")).decision).toBe("allowed");
    expect(decide(policy, h, auth(["mcp:use"]), call("delete_file"))).toEqual({
      decision: "insufficient_scope",
      required: ["files:admin"],
      missing: ["files:admin"],
    });
  });

  it("reads JSON as well, with the same result as the plain object", () => {
    const object = { default: "deny", tools: { a: { scopes: ["s:a"] } } } as const;
    const fromJson = parseOperationPolicy(JSON.stringify(object, null, 2), "policy.json");
    const fromObject = compileOperationPolicy(object);
    const h = new ScopeHierarchy();
    for (const policy of [fromJson, fromObject]) {
      expect(decide(policy, h, auth(["s:a"]), call("a")).decision).toBe("allowed");
      expect(decide(policy, h, auth(["s:a"]), call("b")).decision).toBe("denied");
    }
  });

  it.each([
    [
      "an invalid scope token",
      'tools:\n  a: { scopes: ["ok", "bad scope"] }\n',
      /policy\.yaml line 2: tools\.a\.scopes\[1\] is not a valid scope token/,
    ],
    [
      "an unknown top-level field",
      "base: []\ntool:\n  a: {}\n",
      /policy\.yaml line 2: tool is not a policy field/,
    ],
    [
      "an unknown rule field",
      "tools:\n  a:\n    scope: [x]\n",
      /policy\.yaml line 3: tools\.a\.scope is not a rule field/,
    ],
    ["a rule that is a string", "tools:\n  a: allow\n", /line 2: tools\.a must be "deny" or a rule/],
    ["a duplicate key", "tools:\n  a: {}\n  a: deny\n", /policy\.yaml line 3: .*[Uu]nique/],
    ["a YAML syntax error", "tools:\n  a: {scopes: [x]\n", /policy\.yaml line \d+:/],
    [
      "a template scope naming no variable",
      'resources:\n  "notes://{id}": { scopes: ["n:{other}"] }\n',
      /line 2: resources\["notes:\/\/\{id\}"\]\.scopes\[0\] names \{other\}/,
    ],
    [
      "an unsupported template operator",
      'resources:\n  "notes://{?q}": {}\n',
      /line 2: .* is not a URI template this policy supports/,
    ],
    [
      "a condition with no values",
      "tools:\n  a: { when: { roles: [] } }\n",
      /line 2: tools\.a\.when\.roles must be a string or a non-empty list/,
    ],
    [
      "braces in a scope outside a template",
      'tools:\n  a: { scopes: ["x:{id}"] }\n',
      /line 2: tools\.a\.scopes\[0\] is not a valid scope token/,
    ],
  ])("refuses %s, naming the line", (_, text, message) => {
    expect(() => parseOperationPolicy(text, "policy.yaml")).toThrow(message);
  });

  it("an alias bomb is refused, not expanded", () => {
    const text = "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\ntools:\n  t: { scopes: *c }\n";
    expect(() => parseOperationPolicy(text, "policy.yaml")).toThrow(/policy/);
  });
});
