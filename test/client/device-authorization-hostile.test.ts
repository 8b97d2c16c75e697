/**
 * Hostile authorization servers against the device flow (RFC 8628): what a server sends is shown
 * to a person in a terminal, so a user code or verification URI that carries terminal escapes or
 * direction overrides, or a URI that is not https, is refused before anything is printed; the
 * device authorization response is read under its cap; a poll answered with an error the RFC does
 * not list ends the flow instead of polling on; the device code appears in no error. A real
 * loopback server plays the hostile party.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthorizationFlowError,
  discoverAuthorizationServer,
  pollDeviceAuthorization,
  requestDeviceAuthorization,
  type StoredClient,
} from "../../src/client/index.js";
import { settleWithin } from "./settle-within.js";

const DEVICE_CODE = "secret-device-code-0123456789";

interface Hostile {
  issuer: string;
  polls: number;
  close(): Promise<void>;
}

let hostile: Hostile | undefined;
afterEach(async () => {
  await hostile?.close();
  hostile = undefined;
});

/**
 * An authorization server on loopback whose device authorization endpoint answers `device` (an
 * object sent as JSON, or a function writing the response itself), whose token endpoint answers
 * `tokenError` to every poll, and whose metadata can be overridden.
 */
async function startHostile(options: {
  device?: Record<string, unknown> | ((res: import("node:http").ServerResponse) => void);
  tokenError?: string;
  /** The token endpoint reads the poll and never answers. */
  hangPolls?: boolean;
  metadata?: Record<string, unknown>;
}): Promise<Hostile> {
  let issuer = "";
  const state = { polls: 0 };
  const server: Server = createServer((req, res) => {
    if (req.url === "/.well-known/oauth-authorization-server") {
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          issuer,
          token_endpoint: `${issuer}/token`,
          device_authorization_endpoint: `${issuer}/device_authorization`,
          code_challenge_methods_supported: ["S256"],
          ...options.metadata,
        }),
      );
      return;
    }
    if (req.url === "/device_authorization" && req.method === "POST") {
      req.resume();
      if (typeof options.device === "function") return options.device(res);
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" }).end(
        JSON.stringify({
          device_code: DEVICE_CODE,
          user_code: "BCDF-GHJK",
          verification_uri: `${issuer}/device`,
          expires_in: 600,
          interval: 1,
          ...options.device,
        }),
      );
      return;
    }
    if (req.url === "/token" && req.method === "POST") {
      req.resume();
      state.polls++;
      if (options.hangPolls) return;
      res
        .writeHead(400, { "content-type": "application/json", "cache-control": "no-store" })
        .end(JSON.stringify({ error: options.tokenError ?? "authorization_pending" }));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    get polls() {
      return state.polls;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function context(server: Hostile) {
  const metadata = await discoverAuthorizationServer({ issuer: server.issuer, fetch });
  const client: StoredClient = {
    issuer: server.issuer,
    client_id: "device-client",
    token_endpoint_auth_method: "none",
    source: "preregistered",
    registered_at: 0,
  };
  return { metadata, client, fetch };
}

async function refusal(promise: Promise<unknown>): Promise<AuthorizationFlowError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthorizationFlowError);
  expect((error as Error).message).not.toContain(DEVICE_CODE);
  return error as AuthorizationFlowError;
}

const request = async (server: Hostile) =>
  requestDeviceAuthorization(await context(server), { resource: "http://127.0.0.1:9/mcp" });

describe("device authorization responses that would deceive the person at the terminal", () => {
  it.each([
    ["a user_code with a terminal escape (clear screen)", { user_code: "\u001b[2J\u001b[HABCD" }],
    ["a user_code with a right-to-left override", { user_code: "ABCD\u202eKJHG" }],
    ["a user_code with a newline (a fake second line)", { user_code: "ABCD\nOpen https://evil.example" }],
    ["a user_code of 65 characters", { user_code: "A".repeat(65) }],
    ["an empty user_code", { user_code: "" }],
  ])("%s: invalid_document, nothing to show", async (_name, device) => {
    hostile = await startHostile({ device });
    const error = await refusal(request(hostile));
    expect(error.code).toBe("invalid_document");
    expect(error.kind).toBe("nonconforming");
  });

  it("a verification_uri with a C1 control character: invalid_document", async () => {
    hostile = await startHostile({ device: { verification_uri: "https://as.example/dev\u009bice" } });
    expect((await refusal(request(hostile))).code).toBe("invalid_document");
  });

  it.each([
    ["plain http to another host", { verification_uri: "http://evil.example/device" }],
    ["a javascript: verification_uri_complete", { verification_uri_complete: "javascript:alert(1)" }],
    ["a file: verification_uri", { verification_uri: "file:///etc/passwd" }],
  ])("%s: insecure_url", async (_name, device) => {
    hostile = await startHostile({ device });
    expect((await refusal(request(hostile))).code).toBe("insecure_url");
  });

  it("an endless device authorization response: response_too_large at 16 KiB", async () => {
    hostile = await startHostile({
      device: (res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write(`{"device_code":"${"x".repeat(1024)}`);
        const more = () => {
          while (res.write("x".repeat(4096))) {
            /* fill the socket */
          }
        };
        res.on("drain", more);
        res.on("close", () => res.off("drain", more));
        more();
      },
    });
    const error = await refusal(request(hostile));
    expect(error.code).toBe("response_too_large");
    expect(error.message).toContain("device authorization response");
  });

  it("a device_authorization_endpoint over plain http to another host: discovery refuses the metadata", async () => {
    hostile = await startHostile({
      metadata: { device_authorization_endpoint: "http://evil.example/device_authorization" },
    });
    const error = await refusal(discoverAuthorizationServer({ issuer: hostile.issuer, fetch }));
    expect(error.code).toBe("insecure_url");
  });
});

describe("polling a hostile token endpoint", () => {
  it("an error RFC 8628 §3.5 does not list (invalid_grant) ends the flow after one poll", async () => {
    hostile = await startHostile({ tokenError: "invalid_grant" });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    const error = await refusal(
      pollDeviceAuthorization(ctx, authorization, {
        resource: "http://127.0.0.1:9/mcp",
        wait: async () => {},
      }),
    );
    expect(error.oauthError?.error).toBe("invalid_grant");
    expect(hostile.polls).toBe(1);
  });

  it("a poll the server never answers: the abort signal ends it at once with its reason", async () => {
    hostile = await startHostile({ hangPolls: true });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    const controller = new AbortController();
    const reason = new Error("Ctrl-C");
    const polling = pollDeviceAuthorization(ctx, authorization, {
      resource: "http://127.0.0.1:9/mcp",
      signal: controller.signal,
      wait: async () => {},
    });
    while (hostile.polls === 0) await new Promise((r) => setTimeout(r, 10));
    controller.abort(reason);
    await expect(polling).rejects.toBe(reason);
  });

  it("a server that answers authorization_pending past the codes' lifetime: the client's own clock ends it", async () => {
    hostile = await startHostile({ device: { expires_in: 1 } });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    // The pauses really pass (the server's 1 s interval), until the 1 s lifetime is over.
    const error = await refusal(
      pollDeviceAuthorization(ctx, authorization, { resource: "http://127.0.0.1:9/mcp" }),
    );
    expect(error.code).toBe("authorization_timed_out");
    expect(error.kind).toBe("action");
    expect(hostile.polls).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it("an interval above 2^31 ms (a setTimeout overflow): no tight loop, the codes' lifetime ends the flow", async () => {
    // 2^31 ms is about 24.9 days; 3 000 000 s is 34.7 days. Node's setTimeout turns a delay above
    // 2^31 - 1 into 1 ms, so a client that hands the server's number to it polls ~200 times a second.
    hostile = await startHostile({ device: { expires_in: 2, interval: 3_000_000 } });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    const outcome = await settleWithin(
      pollDeviceAuthorization(ctx, authorization, { resource: "http://127.0.0.1:9/mcp" }),
    );
    expect(outcome.hung).toBeUndefined();
    const error = await refusal(Promise.reject(outcome.error));
    expect(error.code).toBe("authorization_timed_out");
    expect(error.kind).toBe("action");
    // The server's interval is longer than its codes live: one poll, when they expire, and no more.
    expect(hostile.polls).toBe(1);
  }, 30_000);

  it("an interval far above expires_in: the client does not sleep past the codes' lifetime", async () => {
    hostile = await startHostile({ device: { expires_in: 2, interval: 3600 } });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    const outcome = await settleWithin(
      pollDeviceAuthorization(ctx, authorization, { resource: "http://127.0.0.1:9/mcp" }),
    );
    expect(outcome.hung).toBeUndefined();
    expect((outcome.error as AuthorizationFlowError).code).toBe("authorization_timed_out");
    expect(hostile.polls).toBe(1);
  }, 30_000);

  it("an interval beyond the client's 30-minute cap: no pause asked for is longer than the codes' remaining lifetime", async () => {
    // A day of lifetime (the client keeps 30 minutes of it) and 40 days between polls.
    hostile = await startHostile({ device: { expires_in: 86_400, interval: 3_456_000 } });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    expect(authorization.expiresAt - Date.now()).toBeLessThanOrEqual(30 * 60 * 1000);
    expect(authorization.interval * 1000).toBeLessThanOrEqual(30 * 60 * 1000);
    const pauses: number[] = [];
    const controller = new AbortController();
    const error = await pollDeviceAuthorization(ctx, authorization, {
      resource: "http://127.0.0.1:9/mcp",
      signal: controller.signal,
      // Records the pause instead of taking it, then stops the flow: what matters is what was asked.
      wait: async (ms) => {
        pauses.push(ms);
        controller.abort(new Error("stop"));
      },
    }).catch((e: unknown) => e);
    expect((error as Error).message).toBe("stop");
    expect(pauses).toHaveLength(1);
    expect(pauses[0]).toBeLessThanOrEqual(authorization.expiresAt - Date.now() + 1000);
    expect(pauses[0]).toBeLessThan(2 ** 31 - 1);
  });

  it("slow_down answered again and again: the growing interval never pauses past the codes' lifetime", async () => {
    hostile = await startHostile({ device: { expires_in: 3, interval: 1 }, tokenError: "slow_down" });
    const ctx = await context(hostile);
    const authorization = await requestDeviceAuthorization(ctx, { resource: "http://127.0.0.1:9/mcp" });
    // Each pause is really taken; beside it, what was left of the codes' lifetime when it was asked.
    const asked: Array<{ pause: number; left: number }> = [];
    const outcome = await settleWithin(
      pollDeviceAuthorization(ctx, authorization, {
        resource: "http://127.0.0.1:9/mcp",
        wait: async (ms) => {
          asked.push({ pause: ms, left: authorization.expiresAt - Date.now() });
          await new Promise((resolve) => setTimeout(resolve, ms));
        },
      }),
    );
    expect(outcome.hung).toBeUndefined();
    expect((outcome.error as AuthorizationFlowError).code).toBe("authorization_timed_out");
    // slow_down makes the second interval 6 s, past the 3 s lifetime: it is cut to what is left.
    expect(asked.length).toBeGreaterThanOrEqual(2);
    for (const { pause, left } of asked) expect(pause).toBeLessThanOrEqual(left);
    expect(hostile.polls).toBe(asked.length);
  }, 30_000);
});
