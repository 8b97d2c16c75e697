/**
 * A real Secret Service for the keychain tests, private to one test file: its own D-Bus session
 * bus (dbus-daemon with a config that listens on a socket in a temporary directory and activates
 * nothing, so no desktop service can answer in its place) and a gnome-keyring-daemon on it, whose
 * login keyring is created and unlocked with a test password, with its files in the same
 * temporary directory. Processes started with `env` use it; `lookup` reads an item with
 * libsecret's own `secret-tool`, an observer independent of the library under test.
 *
 * Debian packages: dbus, gnome-keyring, libsecret-tools (scripts/ensure-test-services.sh installs
 * them). Linux only: elsewhere the keychain is the system's own and is not started by a test.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface SecretService {
  /** Environment for a process that should see this Secret Service (and only it). */
  env: Record<string, string>;
  /** The secret stored under `service` / `username` (the attributes the keyring library writes), or undefined. */
  lookup(service: string, username: string): Promise<string | undefined>;
  stop(): Promise<void>;
}

const MISSING_TOOLS =
  "the keychain tests need dbus-daemon, gnome-keyring-daemon and secret-tool: apt-get install dbus gnome-keyring libsecret-tools";

function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

/** Resolves with the first line `child` prints on stdout. */
function firstLine(child: ChildProcess, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = "";
    let err = "";
    child.stderr?.setEncoding("utf8").on("data", (c: string) => {
      err += c;
    });
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      const newline = out.indexOf("\n");
      if (newline >= 0) resolve(out.slice(0, newline).trim());
    });
    child.once("error", (error) => reject(new Error(`${MISSING_TOOLS} (${what}: ${error.message})`)));
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}) before it was ready: ${err}`)));
  });
}

export async function startSecretService(): Promise<SecretService> {
  const root = mkdtempSync(join(tmpdir(), "gh-secret-service-"));
  const home = join(root, "home");
  const runtime = join(root, "runtime");
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(runtime, { mode: 0o700 });
  const config = join(root, "bus.conf");
  writeFileSync(
    config,
    `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=${join(root, "bus")}</listen>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`,
  );
  const started: ChildProcess[] = [];
  const stop = async () => {
    for (const child of started.reverse()) await stopProcess(child);
    rmSync(root, { recursive: true, force: true });
  };
  try {
    const bus = spawn("dbus-daemon", [`--config-file=${config}`, "--nofork", "--print-address=1"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    started.push(bus);
    const address = await firstLine(bus, "dbus-daemon");
    const env = {
      DBUS_SESSION_BUS_ADDRESS: address,
      HOME: home,
      XDG_DATA_HOME: join(home, ".local/share"),
      XDG_RUNTIME_DIR: runtime,
      XDG_CONFIG_HOME: join(home, ".config"),
    };
    // --unlock reads the login keyring's password from stdin and creates that keyring unlocked.
    const keyring = spawn("gnome-keyring-daemon", ["--foreground", "--unlock", "--components=secrets"], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    started.push(keyring);
    keyring.stdin.end("test-keyring-password");
    await Promise.race([
      waitForName(env, "org.freedesktop.secrets"),
      exitedEarly(keyring, "gnome-keyring-daemon"),
    ]);
    return {
      env,
      async lookup(service, username) {
        try {
          const { stdout } = await run("secret-tool", ["lookup", "service", service, "username", username], {
            env: { ...process.env, ...env },
          });
          return stdout;
        } catch (error) {
          // secret-tool exits 1 with no output when nothing matches.
          if ((error as { code?: unknown }).code === 1) return undefined;
          throw new Error(`${MISSING_TOOLS} (${(error as Error).message})`);
        }
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Rejects when `child` cannot start or exits (a daemon meant to keep running). */
function exitedEarly(child: ChildProcess, what: string): Promise<never> {
  return new Promise((_resolve, reject) => {
    let err = "";
    child.stderr?.setEncoding("utf8").on("data", (c: string) => {
      err += c;
    });
    child.once("error", (error) => reject(new Error(`${MISSING_TOOLS} (${what}: ${error.message})`)));
    child.once("exit", (code) => reject(new Error(`${what} exited (${code}): ${err}`)));
  });
}

/** Polls the bus until `name` has an owner (bounded: 100 tries). */
async function waitForName(env: Record<string, string>, name: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const { stdout } = await run(
      "dbus-send",
      [
        "--session",
        "--print-reply",
        "--dest=org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.NameHasOwner",
        `string:${name}`,
      ],
      { env: { ...process.env, ...env } },
    );
    if (stdout.includes("boolean true")) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${name} did not appear on the test session bus`);
}
