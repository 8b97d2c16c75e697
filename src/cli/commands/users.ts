/**
 * `gatehouse users add|list|passwd|disable|enable|admin|remove`: local accounts for the login
 * page, straight on the store. Passwords are stored as scrypt hashes only; a password given on
 * stdin is never echoed, a generated one is printed once. Disabling and removing end what the user
 * holds (grants, sessions, kept upstream tokens); the rule is authorization-server/core/user-accounts.ts,
 * shared with the admin page, and each change is written as an audit event (a JSON line on stderr).
 */
import { randomUUID } from "node:crypto";
import { AuditTrail, createAuditor } from "../../authorization-server/core/audit.js";
import { hashPassword } from "../../authorization-server/core/password.js";
import { changeAccount } from "../../authorization-server/core/user-accounts.js";
import { jsonLogger } from "../../shared/log.js";
import type { UserChange, UserRecord } from "../../storage/contract.js";
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
const CHANGE_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };
const ADMIN_OPTIONS: OptionSpecs = {
  revoke: { type: "boolean", description: "take the administrator role away instead of giving it" },
  ...STORE_OPTIONS,
};

const USAGE = [
  formatUsage("gatehouse users add <username> [--password-stdin] [--admin]", ADD_OPTIONS),
  formatUsage("gatehouse users passwd <username> [--password-stdin]", PASSWD_OPTIONS),
  formatUsage("gatehouse users list", LIST_OPTIONS),
  formatUsage("gatehouse users disable <username>", CHANGE_OPTIONS),
  formatUsage("gatehouse users enable <username>", CHANGE_OPTIONS),
  formatUsage("gatehouse users admin <username> [--revoke]", ADMIN_OPTIONS),
  formatUsage("gatehouse users remove <username>", CHANGE_OPTIONS),
  "Without --password-stdin a strong password is generated and printed once.",
  "disable and remove revoke the user's grants (refresh tokens stop at once; access tokens already",
  "issued stay valid at resource servers that verify them themselves until they expire, at most the",
  "access-token lifetime) and end the user's sessions; a disabled user cannot sign in until enabled.",
  "remove also deletes the user's consents and upstream sign-in links. The last enabled administrator",
  "cannot be disabled, removed or lose the role: make another user an administrator first.",
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
        disabled: u.disabledAt !== undefined,
        createdAt: isoTime(u.createdAt),
      })),
    });
  } else if (users.length === 0) {
    out("no users (add one with: gatehouse users add <username>)");
  } else {
    out(
      table(
        ["USERNAME", "ADMIN", "STATUS", "CREATED"],
        users.map((u) => [
          u.username,
          u.isAdmin ? "yes" : "no",
          u.disabledAt === undefined ? "enabled" : `disabled ${isoTime(u.disabledAt)}`,
          isoTime(u.createdAt),
        ]),
      ),
    );
  }
  return 0;
}

/** What each change did, for the operator. */
const CHANGED: Record<UserChange, (username: string) => string> = {
  disable: (name) => `disabled user ${name}`,
  enable: (name) => `enabled user ${name}`,
  "make-admin": (name) => `${name} is now an administrator`,
  "remove-admin": (name) => `${name} is no longer an administrator`,
  remove: (name) => `removed user ${name}`,
};

async function change(args: string[], options: OptionSpecs, pick: (parsed: ParsedArgs) => UserChange) {
  const parsed = parseCommandArgs(args, options);
  if (flag(parsed, "help")) return printUsage(USAGE);
  const username = usernameArg(parsed);
  const what = pick(parsed);
  const where = locateStore(parsed);
  const result = await withStore(where.target, async (store) => {
    const user = await store.getUserByUsername(username);
    if (!user) throw new Error(`no user named ${username} in ${where.description}`);
    return changeAccount(store, user.id, what, Date.now());
  });
  if (result.status === "not_found") throw new Error(`no user named ${username} in ${where.description}`);
  if (result.status === "last_admin") {
    throw new Error(
      `${username} is the last enabled administrator in ${where.description}: nobody could use the admin page. ` +
        "Make another user an administrator first (gatehouse users admin <username>)",
    );
  }
  const { user, ended } = result;
  const audit = createAuditor(jsonLogger(), new AuditTrail(), Date.now);
  audit({
    type: "user_changed",
    user_id: user.id,
    change: what,
    by: "cli",
    ...(ended ? { grants_revoked: ended.grants, sessions_ended: ended.sessions } : {}),
  });
  if (flag(parsed, "json")) {
    outJson({
      username,
      change: what,
      admin: user.isAdmin,
      disabled: user.disabledAt !== undefined,
      ...(ended ? { grantsRevoked: ended.grants, sessionsEnded: ended.sessions } : {}),
      store: where.description,
    });
  } else {
    out(CHANGED[what](username));
    if (ended) {
      out(
        `revoked ${ended.grants} grant${ended.grants === 1 ? "" : "s"} and ended ${ended.sessions} session${ended.sessions === 1 ? "" : "s"}; ` +
          "access tokens already issued stay valid at resource servers that verify them themselves until they expire",
      );
    }
    out(where.note);
  }
  return 0;
}

export async function run(args: string[]): Promise<number> {
  return runSubcommand(
    "users",
    USAGE,
    {
      add,
      passwd,
      list,
      disable: (a) => change(a, CHANGE_OPTIONS, () => "disable"),
      enable: (a) => change(a, CHANGE_OPTIONS, () => "enable"),
      admin: (a) => change(a, ADMIN_OPTIONS, (p) => (flag(p, "revoke") ? "remove-admin" : "make-admin")),
      remove: (a) => change(a, CHANGE_OPTIONS, () => "remove"),
    },
    args,
  );
}
