/**
 * `--callback-port` of `gatehouse login` and `gatehouse fetch`: the browser login's loopback
 * listener on a pinned port, for an authorization server that registered the redirect URI with an
 * exact port (as some do for Claude Code's `--callback-port`). The server here is a real one,
 * oidc-provider (test/support/oidc-provider.ts), whose `web` clients get exact redirect URI matching;
 * the browser is a real program started through `$BROWSER` that walks the provider's sign-in and
 * consent pages with fetch and then delivers the redirect to the listener. The commands run in
 * this process (their `run`), so no build is needed.
 */
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run as fetchCommand } from "../../src/cli/commands/fetch.js";
import { run as login } from "../../src/cli/commands/login.js";
import { EncryptedFileTokenStore } from "../../src/client/stores/encrypted-file.js";
import { browserSession } from "../../src/client/user-agent/browser.js";
import { startLoopbackListener } from "../../src/client/user-agent/loopback-listener.js";
import { freePort } from "../support/free-port.js";
import { type OidcProviderFixture, startOidcProvider } from "../support/oidc-provider.js";
import { tempDir } from "./helpers.js";

let op: OidcProviderFixture;
let work: ReturnType<typeof tempDir>;
let browserLog: string;
const savedEnv = { ...process.env };

/** The fake browser: signs in and consents at oidc-provider, then opens the redirect it is given. */
const BROWSER_SCRIPT = `#!${process.execPath}
import { appendFileSync } from "node:fs";
const log = process.env.FAKE_BROWSER_LOG;
const jar = new Map();
const cookie = () => [...jar].map(([k, v]) => k + "=" + v).join("; ");
let next = { url: process.argv[2], init: { method: "GET" } };
for (let step = 0; step < 15; step++) {
  const r = await fetch(next.url, { ...next.init, redirect: "manual", headers: { ...(next.init.headers ?? {}), cookie: cookie() } });
  for (const line of r.headers.getSetCookie()) {
    const pair = line.split(";")[0];
    const eq = pair.indexOf("=");
    jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
  }
  if (r.status >= 300 && r.status < 400) {
    await r.body?.cancel();
    const location = new URL(r.headers.get("location"), next.url);
    if (location.pathname === "/callback") {
      appendFileSync(log, location.origin + location.pathname + "\\n");
      const delivered = await fetch(location);
      appendFileSync(log, "delivered " + delivered.status + "\\n");
      process.exit(0);
    }
    next = { url: location.href, init: { method: "GET" } };
    continue;
  }
  const html = await r.text();
  const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
  const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
  if (r.status !== 200 || !action || !prompt) {
    appendFileSync(log, "stuck " + r.status + "\\n");
    process.exit(1);
  }
  const form = new URLSearchParams({ prompt });
  if (prompt === "login") { form.set("login", "alice"); form.set("password", "irrelevant"); }
  next = { url: new URL(action.replaceAll("&amp;", "&"), next.url).href, init: { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form.toString() } };
}
appendFileSync(log, "too many steps\\n");
process.exit(1);
`;

beforeAll(async () => {
  op = await startOidcProvider();
  work = tempDir("gatehouse-callback-port-");
  const browser = join(work.path, "browser.mjs");
  writeFileSync(browser, BROWSER_SCRIPT);
  chmodSync(browser, 0o755);
  browserLog = join(work.path, "browser.log");
  writeFileSync(browserLog, "");
  process.env.BROWSER = browser;
  process.env.FAKE_BROWSER_LOG = browserLog;
  process.env.GATEHOUSE_STORE_KEY_LOCATION = "file";
  process.env.GATEHOUSE_DATABASE_URL = "";
}, 60_000);

afterAll(async () => {
  process.env = savedEnv;
  await op?.close();
  work?.remove();
});

let configCounter = 0;
/** A fresh config directory (no stored login or registration) for the next command. */
function freshConfig(): void {
  process.env.GATEHOUSE_CONFIG_DIR = join(work.path, `config-${++configCounter}`);
}

/** Runs a command in this process, with what it writes to stdout and stderr. */
async function capture(
  command: () => Promise<number>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    stdout += String(chunk);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    stderr += String(chunk);
    return true;
  });
  try {
    return { code: await command(), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** Registers at oidc-provider a public `web` client (exact redirect URI matching) for `port`. */
async function registerExactPort(port: number): Promise<string> {
  const response = await fetch(`${op.issuer}/reg`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      application_type: "web",
      redirect_uris: [`http://127.0.0.1:${port}/callback`],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { client_id: string }).client_id;
}

describe("gatehouse login --callback-port", () => {
  it("logs in against a server that registered that exact port, and the server refuses any other", async () => {
    const port = await freePort();
    const clientId = await registerExactPort(port);
    // The server really matches the port: the same request with another port is refused.
    const other = port === 65535 ? port - 1 : port + 1;
    const refused = await fetch(
      `${op.issuer}/auth?${new URLSearchParams({
        client_id: clientId,
        redirect_uri: `http://127.0.0.1:${other}/callback`,
        response_type: "code",
        scope: "openid",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
      })}`,
      { redirect: "manual" },
    );
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("redirect_uri");

    freshConfig();
    const before = readFileSync(browserLog, "utf8");
    const result = await capture(() =>
      login([
        "--callback-port",
        String(port),
        "--client-id",
        clientId,
        "--issuer",
        op.issuer,
        op.resourceUrl,
      ]),
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`Logged in to ${op.resourceUrl} via ${op.issuer}`);
    expect(readFileSync(browserLog, "utf8").slice(before.length)).toBe(
      `http://127.0.0.1:${port}/callback\ndelivered 200\n`,
    );
  }, 60_000);

  it("a port in use fails the login at once, naming the port", async () => {
    const busy: Server = createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", () => resolve()));
    const port = (busy.address() as AddressInfo).port;
    try {
      freshConfig();
      const result = await capture(() =>
        login(["--callback-port", String(port), "--client-id", "any", "--issuer", op.issuer, op.resourceUrl]),
      );
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expect(result.stderr).not.toContain("Waiting for you");
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  }, 60_000);

  it("a port out of range or not a number is a usage error (2), as is --callback-port with --device", async () => {
    for (const value of ["0", "65536", "-1", "abc", "80x", "1e3", " 80", "", "123456"]) {
      freshConfig();
      const result = await capture(() => login([`--callback-port=${value}`, op.resourceUrl]));
      expect({ value, code: result.code }).toEqual({ value, code: 2 });
      expect(result.stderr).toContain("--callback-port must be a port number from 1 to 65535");
    }
    const device = await capture(() => login(["--device", "--callback-port", "8123", op.resourceUrl]));
    expect(device.code).toBe(2);
    expect(device.stderr).toContain("--device listens on no port");
  });

  it("the help text documents --callback-port", async () => {
    for (const command of [login, fetchCommand]) {
      const result = await capture(() => command(["--help"]));
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("--callback-port N");
    }
  });
});

describe("gatehouse fetch --callback-port", () => {
  it("registers and logs in with the pinned port when the call needs a login, then calls", async () => {
    const port = await freePort();
    freshConfig();
    const before = readFileSync(browserLog, "utf8");
    const result = await capture(() => fetchCommand(["--callback-port", String(port), op.resourceUrl]));
    expect(result.code, result.stderr).toBe(0);
    expect(readFileSync(browserLog, "utf8").slice(before.length)).toBe(
      `http://127.0.0.1:${port}/callback\ndelivered 200\n`,
    );
  }, 60_000);
});

describe("a saved registration for another port", () => {
  it("with --callback-port, a dynamic registration saved for another port is not reused: the client registers again", async () => {
    const [saved, pinned] = [await freePort(), await freePort()];
    // A registration the store holds from an earlier login on another port, at a server that
    // matches ports exactly (oidc-provider's web client).
    const oldClientId = await registerExactPort(saved);
    freshConfig();
    const store = new EncryptedFileTokenStore({
      directory: process.env.GATEHOUSE_CONFIG_DIR!,
      keyLocation: "file",
    });
    await store.set("client", op.issuer, {
      issuer: op.issuer,
      client_id: oldClientId,
      token_endpoint_auth_method: "none",
      source: "dynamic",
      redirect_uris: [`http://127.0.0.1:${saved}/callback`],
      registered_at: Date.now(),
    });
    const before = readFileSync(browserLog, "utf8");
    const result = await capture(() => login(["--callback-port", String(pinned), op.resourceUrl]));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(`Client identity at ${op.issuer}: dynamic`);
    expect(readFileSync(browserLog, "utf8").slice(before.length)).toBe(
      `http://127.0.0.1:${pinned}/callback\ndelivered 200\n`,
    );
    const client = await store.get("client", op.issuer);
    expect(client?.client_id).not.toBe(oldClientId);
    expect(client?.redirect_uris).toEqual([`http://127.0.0.1:${pinned}/callback`]);
  }, 30_000);

  it("with --callback-port, a registration saved for that very port is reused", async () => {
    const port = await freePort();
    const clientId = await registerExactPort(port);
    freshConfig();
    const store = new EncryptedFileTokenStore({
      directory: process.env.GATEHOUSE_CONFIG_DIR!,
      keyLocation: "file",
    });
    await store.set("client", op.issuer, {
      issuer: op.issuer,
      client_id: clientId,
      token_endpoint_auth_method: "none",
      source: "dynamic",
      redirect_uris: [`http://127.0.0.1:${port}/callback`],
      registered_at: Date.now(),
    });
    const result = await capture(() => login(["--callback-port", String(port), op.resourceUrl]));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain("Client identity at");
    expect((await store.get("client", op.issuer))?.client_id).toBe(clientId);
  }, 30_000);
});

describe("the client's option (gatehouse/client)", () => {
  it("browserSession({ callbackPort }) listens there; an out-of-range port is refused when configured", async () => {
    const port = await freePort();
    const session = await browserSession({ callbackPort: port, print: () => {} })();
    try {
      expect(session.redirectUri).toBe(`http://127.0.0.1:${port}/callback`);
    } finally {
      await session.close?.();
    }
    for (const bad of [-1, 1.5, 65536, Number.NaN]) {
      expect(() => browserSession({ callbackPort: bad })).toThrow(
        expect.objectContaining({ name: "GatehouseTypeError", code: "ERR_INVALID_OPTION" }),
      );
      await expect(startLoopbackListener({ port: bad })).rejects.toMatchObject({
        code: "ERR_INVALID_OPTION",
      });
    }
  });
});

describe("a pre-registered client (login --client-id --issuer), then fetch", () => {
  it("fetch refreshes with the client the login used: no new registration, no browser", async () => {
    const port = await freePort();
    const clientId = await registerExactPort(port);
    freshConfig();
    const loggedIn = await capture(() =>
      login([
        "--callback-port",
        String(port),
        "--client-id",
        clientId,
        "--issuer",
        op.issuer,
        op.resourceUrl,
      ]),
    );
    expect(loggedIn.code, loggedIn.stderr).toBe(0);
    expect(loggedIn.stdout).toContain("refreshable");
    // The access token is past its expiry (the refresh token stays): the next call must refresh.
    const store = new EncryptedFileTokenStore({
      directory: process.env.GATEHOUSE_CONFIG_DIR!,
      keyLocation: "file",
    });
    const stored = await store.list("tokens");
    expect(stored).toHaveLength(1);
    const [key, tokens] = stored[0]!;
    expect(tokens.client_id).toBe(clientId);
    await store.set("tokens", key, { ...tokens, expires_at: Date.now() - 60_000 });

    const browserBefore = readFileSync(browserLog, "utf8");
    // --no-browser: were a login needed, the command would fail at once instead of waiting.
    const called = await capture(() => fetchCommand(["--no-browser", op.resourceUrl]));
    expect(called.code, called.stderr).toBe(0);
    expect(called.stderr).toContain(`Refreshed the access token for ${op.resourceUrl}`);
    expect(called.stderr).not.toContain("Client identity at");
    expect(readFileSync(browserLog, "utf8")).toBe(browserBefore);
    const after = await store.list("tokens");
    expect(after.map(([, t]) => t.client_id)).toEqual([clientId]);
    expect(after[0]![1].refresh_token).not.toBe(tokens.refresh_token);
  }, 60_000);
});
