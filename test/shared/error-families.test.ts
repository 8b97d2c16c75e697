/**
 * The closed set of errors (shared/errors.ts, DESIGN.md principle 3), checked by walking the
 * public surface rather than by a list kept by hand (issue 23 item 9): every class that any
 * package.json export makes public and whose instances are Errors descends from OAuthError
 * (protocol) or GatehouseError / GatehouseTypeError (everything else), declares its `code` as
 * literals of the family's closed union (OAuthErrorCode, GatehouseErrorCode), and an instance
 * made from its own constructor signature carries such a code and its class's name. A new error
 * class exported anywhere is walked too. And an OAuthError's own headers reach the HTTP answer
 * without the handler knowing its class.
 */
import { join } from "node:path";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";
import { ClientAuthenticationError } from "../../src/authorization-server/clients/authentication.js";
import { RateLimitedError } from "../../src/authorization-server/endpoints/register.js";
import { oauthErrorResponse } from "../../src/shared/http.js";
import { ROOT } from "../cli/helpers.js";
import {
  type Declarations,
  declarations,
  type Entry,
  errorClasses,
  importEntries,
  stringLiterals,
} from "../public-surface/exports.js";

type ErrorClass = new (...args: never[]) => Error;

interface Found {
  name: string;
  entry: Entry;
  value: ErrorClass;
}

let found: Found[];
let shared: typeof import("../../src/shared/errors.js");
let types: Declarations;
let codes: { gatehouse: Set<string>; oauth: Set<string> };

beforeAll(async () => {
  const loaded = await importEntries();
  // Each class once, at the first subpath that exports it.
  const seen = new Set<unknown>();
  found = [];
  for (const { entry, values } of loaded) {
    for (const [name, value] of errorClasses(values)) {
      if (seen.has(value)) continue;
      seen.add(value);
      found.push({ name, entry, value });
    }
  }
  // The bases as the build defines them (the same module instance every entry re-exports).
  shared = (await import(join(ROOT, "dist/shared/errors.js"))) as typeof shared;
  types = declarations();
  const errorsDts = join(ROOT, "dist/shared/errors.d.ts");
  codes = {
    gatehouse: types.literalsOf(errorsDts, "GatehouseErrorCode"),
    oauth: types.literalsOf(errorsDts, "OAuthErrorCode"),
  };
}, 120_000);

/** A value of `type` good enough to call a constructor: the first literal, a string, a number, {} … */
function sample(checker: ts.TypeChecker, type: ts.Type, optional: boolean): unknown {
  const constrained = type.isTypeParameter() ? (checker.getBaseConstraintOfType(type) ?? type) : type;
  const members = constrained.isUnion() ? constrained.types : [constrained];
  const literal = members.find((m) => m.isStringLiteral());
  if (literal?.isStringLiteral()) return literal.value;
  if (optional) return undefined;
  if (members.some((m) => m.flags & ts.TypeFlags.String)) return "sample";
  if (members.some((m) => m.flags & ts.TypeFlags.Number)) return 1;
  if (members.some((m) => m.flags & ts.TypeFlags.BooleanLike)) return true;
  if (members.some((m) => m.flags & ts.TypeFlags.Null)) return null;
  const symbolName = constrained.getSymbol()?.name;
  if (symbolName === "Array" || symbolName === "ReadonlyArray") return [];
  return {};
}

/** The instance-side `code` type's literals and a constructed instance, from the .d.ts. */
function inspect(item: Found): { declared: Set<string>; instance: Error & { code?: unknown } } {
  const { checker } = types;
  const symbol = types.exportsOf(item.entry).get(item.name);
  if (!symbol) throw new Error(`${item.name} has no declaration in ${item.entry.dts}`);
  const instanceType = checker.getDeclaredTypeOfSymbol(symbol);
  const codeProperty = instanceType.getProperty("code");
  if (!codeProperty) return { declared: new Set(), instance: new Error("no code property") };
  let codeType = checker.getTypeOfSymbol(codeProperty);
  if (codeType.isTypeParameter()) codeType = checker.getBaseConstraintOfType(codeType) ?? codeType;
  const declared = stringLiterals(codeType);
  const [signature] = checker.getSignaturesOfType(
    checker.getTypeOfSymbol(symbol),
    ts.SignatureKind.Construct,
  );
  const args = (signature?.parameters ?? []).map((parameter) => {
    const declaration = parameter.valueDeclaration;
    const optional =
      !!declaration &&
      ts.isParameter(declaration) &&
      (!!declaration.questionToken || !!declaration.initializer);
    return sample(checker, checker.getTypeOfSymbol(parameter), optional);
  });
  return { declared, instance: Reflect.construct(item.value, args) as Error & { code?: unknown } };
}

describe("the closed set of errors, walked from the package's exports", () => {
  it("finds the error classes of every subpath (the walk is not empty)", () => {
    const names = found.map((f) => f.name);
    // Spot checks that the walk reaches the role entries, not a list to keep up to date.
    expect(names).toEqual(
      expect.arrayContaining([
        "OAuthError",
        "GatehouseError",
        "AuthorizationFlowError",
        "StorageConflictError",
      ]),
    );
  });

  it("every exported error class descends from OAuthError, GatehouseError or GatehouseTypeError", () => {
    const outside = found
      .filter(
        ({ value }) =>
          value !== shared.OAuthError &&
          value !== shared.GatehouseError &&
          value !== shared.GatehouseTypeError &&
          !(value.prototype instanceof shared.OAuthError) &&
          !(value.prototype instanceof shared.GatehouseError) &&
          !(value.prototype instanceof shared.GatehouseTypeError),
      )
      .map(({ name, entry }) => `${entry.subpath} ${name}`);
    expect(outside).toEqual([]);
  });

  it("every exported error class declares its code from its family's closed union, and an instance carries it", () => {
    const wrong: string[] = [];
    for (const item of found) {
      const oauth = item.value === shared.OAuthError || item.value.prototype instanceof shared.OAuthError;
      const allowed = oauth ? codes.oauth : codes.gatehouse;
      const where = `${item.entry.subpath} ${item.name}`;
      let inspected: ReturnType<typeof inspect>;
      try {
        inspected = inspect(item);
      } catch (error) {
        wrong.push(`${where}: ${(error as Error).message}`);
        continue;
      }
      const { declared, instance } = inspected;
      if (declared.size === 0) wrong.push(`${where}: declares no code`);
      for (const code of declared) {
        if (!allowed.has(code)) wrong.push(`${where}: declares ${code}, not in the closed union`);
      }
      if (typeof instance.code !== "string" || !allowed.has(instance.code)) {
        wrong.push(`${where}: an instance carries code ${String(instance.code)}`);
      }
      if (instance.name !== item.name) wrong.push(`${where}: an instance is named ${instance.name}`);
      if (!shared.isGatehouseError(instance)) wrong.push(`${where}: isGatehouseError is false`);
    }
    expect(wrong).toEqual([]);
    expect(shared.isGatehouseError(new Error("plain"))).toBe(false);
  });
});

describe("OAuthError on the wire", () => {
  it("an OAuthError's own headers reach the response: a client-authentication challenge, Retry-After", () => {
    const challenge = oauthErrorResponse(
      new ClientAuthenticationError({ description: "bad secret", wwwAuthenticate: 'Basic realm="token"' }),
    );
    expect(challenge.status).toBe(401);
    expect(challenge.headers.get("www-authenticate")).toBe('Basic realm="token"');
    expect(challenge.headers.get("cache-control")).toBe("no-store");
    const limited = oauthErrorResponse(new RateLimitedError(42));
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("42");
    // The caller's headers come on top.
    expect(
      oauthErrorResponse(new RateLimitedError(42), { "retry-after": "7" }).headers.get("retry-after"),
    ).toBe("7");
  });
});
