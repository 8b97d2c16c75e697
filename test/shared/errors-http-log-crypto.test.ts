import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { randomToken, sha256Base64url, timingSafeEqualString } from "../../src/shared/crypto.js";
import { GatehouseTypeError, OAuthError, sanitizeErrorDescription } from "../../src/shared/errors.js";
import { jsonResponse, oauthErrorResponse } from "../../src/shared/http.js";
import { jsonLogger, redact } from "../../src/shared/log.js";

describe("OAuthError", () => {
  it("puts the description on the wire and keeps the detail private", async () => {
    const error = new OAuthError("invalid_token", { description: "bad", detail: "kid k9 unknown" });
    expect(error.status).toBe(401);
    expect(error.toJSON()).toEqual({ error: "invalid_token", error_description: "bad" });
    const res = oauthErrorResponse(error);
    expect(res.status).toBe(401);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.text()).not.toContain("k9");
  });

  it("uses the RFC default statuses and allows an override", () => {
    expect(new OAuthError("insufficient_scope").status).toBe(403);
    expect(new OAuthError("invalid_request").status).toBe(400);
    expect(new OAuthError("invalid_client", { status: 400 }).status).toBe(400);
  });

  it("sanitises error_description to RFC 6749 §5.2 characters", () => {
    expect(sanitizeErrorDescription('a"b\\c\r\nd é')).toBe("a b c  d  ");
    expect(new OAuthError("invalid_request", { description: "x\ny" }).description).toBe("x y");
  });

  it("GatehouseTypeError carries a stable code and is a TypeError", () => {
    const e = new GatehouseTypeError("ERR_INVALID_OPTION", "m");
    expect(e).toBeInstanceOf(TypeError);
    expect(e.code).toBe("ERR_INVALID_OPTION");
  });
});

describe("http helpers", () => {
  it("jsonResponse sets the content type and status", async () => {
    const res = jsonResponse({ a: 1 }, { status: 201 });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.json()).toEqual({ a: 1 });
  });
});

describe("log", () => {
  it("redacts secret-looking fields, nested ones included", () => {
    expect(redact({ access_token: "t", user: "u", nested: { client_secret: "s", id: 1 } })).toEqual({
      access_token: "[redacted]",
      user: "u",
      nested: { client_secret: "[redacted]", id: 1 },
    });
  });

  it("writes one JSON line per event without secrets", () => {
    const lines: string[] = [];
    jsonLogger((l) => lines.push(l)).warn("e", { password: "p", n: 2 });
    expect(lines).toHaveLength(1);
    const parsed = JSON.parse(lines[0]!);
    expect(parsed).toMatchObject({ level: "warn", event: "e", password: "[redacted]", n: 2 });
  });
});

describe("crypto", () => {
  it("randomToken has the requested entropy and is URL-safe", () => {
    const t = randomToken();
    expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(randomToken()).not.toBe(t);
  });

  it("sha256Base64url matches a known vector", () => {
    expect(sha256Base64url("abc")).toBe("ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
  });

  it("sha256Base64url hashes the UTF-8 bytes, as the streaming form does (non-ASCII, empty, long)", () => {
    for (const value of ["", "é", "日本語", "\u{1F512}", "x".repeat(10_000), "a\u0000b"]) {
      expect(sha256Base64url(value)).toBe(createHash("sha256").update(value, "utf8").digest("base64url"));
    }
  });

  it("timingSafeEqualString compares exactly", () => {
    expect(timingSafeEqualString("abc", "abc")).toBe(true);
    expect(timingSafeEqualString("abc", "abd")).toBe(false);
    expect(timingSafeEqualString("abc", "abcd")).toBe(false);
    expect(timingSafeEqualString("", "")).toBe(true);
  });
});
