/**
 * `gatehouse users add|list|passwd`: local accounts for the login page, straight on the store.
 * Passwords are stored as scrypt hashes only; a password given on stdin is never echoed, a
 * generated one is printed once.
 */
import { randomUUID } from "node:crypto";
import { hashPassword } from "../../authorization-server/password.js";
import type { UserRecord } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  noPositionals,
  type OptionSpecs,
  onePositional,
  type ParsedArgs,
  parseCommandArgs,
  UsageError,
} from "../args.js";
import { storeTargetFromArgs } from "../config.js";
import {
  generatePassword,
  isoTime,
  out,
  outJson,
  printUsage,
  readSecretFromStdin,
  runSubcommand,
  table,
} from "../output.js";
import { locateStore, STORE_OPTIONS, withStore } from "../server-runtime.js";

const ADD_OPTIONS: OptionSpecs = {
  "password-stdin": { type: "boolean", description: "read the password from standard input (first line)" },
  admin: { type: "boolean", description: "make the user an administrator" },
  ...STORE_OPTIONS,
};
const PASSWD_OPTIONS: OptionSpecs = {
  "password-stdin": {
    type: "boolean",
    description: "read the new password from standard input (first line)",
  },
  ...STORE_OPTIONS,
};
const LIST_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };

const USAGE = [
  formatUsage("gatehouse users add <username> [--password-stdin] [--admin]", ADD_OPTIONS),
  formatUsage("gatehouse users passwd <username> [--password-stdin]", PASSWD_OPTIONS),
  formatUsage("gatehouse users list", LIST_OPTIONS),
  "Without --password-stdin a strong password is generated and printed once.",
].join("\n");

/** Usernames are shown on pages and in logs: printable, no spaces, bounded. */
const USERNAME = /^[A-Za-z0-9._@+-]{1,64}$/;

/** Shortest password accepted from stdin (generated ones are 20 characters). */
export const MIN_PASSWORD_LENGTH = 12;

function usernameArg(parsed: ParsedArgs): string {
  const username = onePositional(parsed, "a username");
  if (!USERNAME.test(username)) {
    throw new UsageError("username must be 1-64 characters: letters, digits and . _ @ + -");
  }
  return username;
}

async function choosePassword(fromStdin: boolean): Promise<{ password: string; generated: boolean }> {
  if (!fromStdin) return { password: generatePassword(), generated: true };
  const password = await readSecretFromStdin("password");
  if ([...password].length < MIN_PASSWORD_LENGTH) {
    throw new UsageError(`the password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  return { password, generated: false };
}

async function add(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, ADD_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  const username = usernameArg(parsed);
  const where = locateStore(parsed);
  const { password, generated } = await choosePassword(flag(parsed, "password-stdin"));
  const user: UserRecord = {
    id: randomUUID(),
    username,
    passwordHash: await hashPassword(password),
    isAdmin: flag(parsed, "admin"),
    createdAt: Date.now(),
  };
  await withStore(where.target, async (store) => {
    if (await store.getUserByUsername(username))
      throw new Error(`user ${username} already exists in ${where.description} (use users passwd)`);
    await store.createUser(user);
  });
  if (flag(parsed, "json")) {
    outJson({
      id: user.id,
      username,
      admin: user.isAdmin,
      ...(generated ? { password } : {}),
      store: where.description,
    });
  } else {
    out(`created user ${username}${user.isAdmin ? " (admin)" : ""}`);
    out(where.note);
    if (generated) out(`password: ${password}\n(shown once; store it now)`);
  }
  return 0;
}

async function passwd(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, PASSWD_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  const username = usernameArg(parsed);
  const where = locateStore(parsed);
  const { password, generated } = await choosePassword(flag(parsed, "password-stdin"));
  const hash = await hashPassword(password);
  await withStore(where.target, async (store) => {
    const user = await store.getUserByUsername(username);
    if (!user) throw new Error(`no user named ${username} in ${where.description}`);
    await store.setUserPassword(user.id, hash);
  });
  if (flag(parsed, "json"))
    outJson({ username, ...(generated ? { password } : {}), store: where.description });
  else {
    out(`password changed for ${username}`);
    out(where.note);
    if (generated) out(`password: ${password}\n(shown once; store it now)`);
  }
  return 0;
}

async function list(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, LIST_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const users = await withStore(storeTargetFromArgs(parsed), (store) => store.listUsers());
  users.sort((a, b) => a.username.localeCompare(b.username));
  if (flag(parsed, "json")) {
    outJson({
      users: users.map((u) => ({
        id: u.id,
        username: u.username,
        admin: u.isAdmin,
        createdAt: isoTime(u.createdAt),
      })),
    });
  } else if (users.length === 0) {
    out("no users (add one with: gatehouse users add <username>)");
  } else {
    out(
      table(
        ["USERNAME", "ADMIN", "CREATED"],
        users.map((u) => [u.username, u.isAdmin ? "yes" : "no", isoTime(u.createdAt)]),
      ),
    );
  }
  return 0;
}

export async function run(args: string[]): Promise<number> {
  return runSubcommand("users", USAGE, { add, passwd, list }, args);
}
