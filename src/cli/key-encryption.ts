/**
 * Where the command line finds the key-encryption keys (KEKs) that seal signing private keys at
 * rest (DESIGN.md "Secrets at rest"; docs/deployment.md "Key-encryption key"): the environment
 * (GATEHOUSE_KEY_ENCRYPTION_KEY), or a key file (--key-encryption-key-file, owner-only
 * permissions), else the data directory's own file, generated on first use and announced loudly.
 */
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { join, resolve } from "node:path";
import {
  privateKeyProtection,
  SigningKeyDecryptionError,
} from "../authorization-server/keys/signing-key-envelope.js";
import { GatehouseTypeError } from "../shared/errors.js";
import type { Logger } from "../shared/log.js";
import {
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../shared/secret-envelope.js";
import type { AuthorizationStore } from "../storage/contract.js";
import type { OptionSpecs } from "./args.js";
import { UsageError } from "./args.js";
import { banner } from "./output.js";

export const KEY_ENCRYPTION_KEY_ENV = "GATEHOUSE_KEY_ENCRYPTION_KEY";
/** The generated KEK's file name inside the data directory (beside, never inside, the database). */
export const DATA_DIR_KEY_FILE = "key-encryption-key";

export const KEY_ENCRYPTION_OPTIONS: OptionSpecs = {
  "key-encryption-key-file": {
    type: "string",
    valueName: "file",
    description: `key-encryption key(s), one per line, the first encrypts (mode 0600; or ${KEY_ENCRYPTION_KEY_ENV})`,
  },
};

export type KeySource =
  | { kind: "environment" }
  | { kind: "file"; path: string }
  | { kind: "data-dir"; path: string; generated: boolean };

export interface KeyEncryptionKeys {
  /** The keys as text, the sealing one first (what `keyEncryptionKeys` takes). */
  keys: string[];
  /** Their ids, in the same order (safe to log). */
  ids: string[];
  source: KeySource;
}

export interface KeyEncryptionSettings {
  /** `--key-encryption-key-file` or the config file's `keyEncryptionKeyFile`. */
  file?: string;
  /** The data directory: where the generated key lives when nothing else is configured. */
  dataDir: string;
}

/** A key file's contents: one key per line; blank lines and `#` comments are skipped. */
function keysFromText(text: string, where: string): string[] {
  const keys = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"));
  if (keys.length === 0) throw new UsageError(`${where} holds no key-encryption key`);
  return keys;
}

/**
 * Reads a key file, refusing one that group or others may read or write: the key protects every
 * signing key, so it must be as private as the service account (mode 0600 or 0400).
 */
export function readKeyFile(path: string): string[] {
  let mode: number;
  try {
    const stat = statSync(path);
    if (!stat.isFile()) throw new UsageError(`key-encryption key file ${path} is not a regular file`);
    mode = stat.mode & 0o777;
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(
      `cannot read key-encryption key file ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  // POSIX permissions only: Windows reports synthetic modes.
  if (process.platform !== "win32" && (mode & 0o077) !== 0) {
    throw new UsageError(
      `key-encryption key file ${path} has mode 0${mode.toString(8)}: group and others must have no access (chmod 600 ${path})`,
    );
  }
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read key-encryption key file ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  return keysFromText(text, `key-encryption key file ${path}`);
}

/**
 * Writes a new key file holding one fresh key, mode 0600, without ever replacing an existing
 * file: the key is written to a private temporary file and linked into place, so two processes
 * starting together end up with the same key (the loser reads the winner's). Returns whether this
 * call created it.
 */
export function createKeyFile(path: string): boolean {
  const temporary = `${path}.${process.pid}.${Date.now()}.tmp`;
  const fd = openSync(temporary, "wx", 0o600);
  try {
    writeSync(
      fd,
      [
        "# Gatehouse key-encryption key: seals the signing private keys stored in the database.",
        "# Keep it private (mode 0600) and backed up APART from the database. One key per line;",
        '# the first encrypts, every line decrypts (docs/deployment.md "Key-encryption key").',
        generateKeyEncryptionKey(),
        "",
      ].join("\n"),
    );
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    unlinkSync(temporary);
  }
}

function checked(keys: string[], where: string): string[] {
  try {
    return keys.map((key, i) => {
      parseKeyEncryptionKey(key, `${where}, key ${i + 1}`);
      return key;
    });
  } catch (error) {
    if (error instanceof GatehouseTypeError) throw new UsageError(error.message);
    throw error;
  }
}

function withIds(keys: string[], source: KeySource): KeyEncryptionKeys {
  const ids = keys.map((k) => keyEncryptionKeyId(parseKeyEncryptionKey(k, "key")));
  if (new Set(ids).size !== ids.length) throw new UsageError("the same key-encryption key is listed twice");
  return { keys, ids, source };
}

/**
 * The KEKs to use: GATEHOUSE_KEY_ENCRYPTION_KEY (comma- or space-separated, first encrypts) or
 * the key file, never both; otherwise the data directory's `key-encryption-key`, created when
 * missing (the caller announces it: {@link announceKeyEncryptionKeys}). Commands that open a store
 * use {@link keyEncryptionKeysForStore}, which never generates a key the store's keys do not use.
 */
export function resolveKeyEncryptionKeys(
  settings: KeyEncryptionSettings,
  env: NodeJS.ProcessEnv = process.env,
): KeyEncryptionKeys {
  return configuredKeyEncryptionKeys(settings, env) ?? generateDataDirKey(settings);
}

/**
 * The configured KEKs (environment, key file, or the data directory's existing key file), or
 * undefined when there are none and one would have to be generated.
 */
export function configuredKeyEncryptionKeys(
  settings: KeyEncryptionSettings,
  env: NodeJS.ProcessEnv = process.env,
): KeyEncryptionKeys | undefined {
  const envValue = env[KEY_ENCRYPTION_KEY_ENV]?.trim() || undefined;
  if (envValue !== undefined && settings.file !== undefined) {
    throw new UsageError(
      `give the key-encryption key either in ${KEY_ENCRYPTION_KEY_ENV} or with --key-encryption-key-file, not both`,
    );
  }
  if (envValue !== undefined) {
    const keys = checked(
      envValue.split(/[\s,]+/).filter((k) => k !== ""),
      KEY_ENCRYPTION_KEY_ENV,
    );
    return withIds(keys, { kind: "environment" });
  }
  if (settings.file !== undefined) {
    const path = resolve(settings.file);
    return withIds(checked(readKeyFile(path), path), { kind: "file", path });
  }
  const path = dataDirKeyPath(settings);
  if (!existsQuietly(path)) return undefined;
  return withIds(checked(readKeyFile(path), path), { kind: "data-dir", path, generated: false });
}

function dataDirKeyPath(settings: KeyEncryptionSettings): string {
  return join(resolve(settings.dataDir), DATA_DIR_KEY_FILE);
}

/** Creates the data directory's key file (another process may win the race: its key is used). */
function generateDataDirKey(settings: KeyEncryptionSettings): KeyEncryptionKeys {
  const path = dataDirKeyPath(settings);
  mkdirSync(resolve(settings.dataDir), { recursive: true, mode: 0o700 });
  const generated = createKeyFile(path);
  return withIds(checked(readKeyFile(path), path), { kind: "data-dir", path, generated });
}

/** The ids of the KEKs the store's signing keys are sealed under (no key is opened). */
export async function storedKeyEncryptionKeyIds(store: AuthorizationStore): Promise<string[]> {
  const ids = new Set<string>();
  for (const record of await store.listSigningKeys()) {
    const protection = privateKeyProtection(record);
    if (protection.kind === "encrypted") ids.add(protection.kekId);
  }
  return [...ids];
}

/**
 * The KEKs for a command that writes to `store` (serve, keys rotate, keys rewrap): the configured
 * ones; when none is configured, a generated one, unless the store already holds keys sealed under
 * a KEK. Then a new KEK could open none of them and would seal new keys that the servers sharing
 * the store cannot open (issue 26: every /token failed): refused, naming the KEK ids it needs.
 * The one place that decides whether a command may generate a KEK.
 */
export async function keyEncryptionKeysForStore(
  settings: KeyEncryptionSettings,
  store: AuthorizationStore,
  env: NodeJS.ProcessEnv = process.env,
): Promise<KeyEncryptionKeys> {
  const configured = configuredKeyEncryptionKeys(settings, env);
  if (configured) return configured;
  const needed = await storedKeyEncryptionKeyIds(store);
  if (needed.length > 0) {
    throw new Error(
      `no key-encryption key is configured, and the database's signing keys are sealed under ${needed.join(", ")}: ` +
        `refusing to generate a new one in ${dataDirKeyPath(settings)} (it could open none of them, and the servers could not open what it sealed). ` +
        `Configure the key the servers use (${KEY_ENCRYPTION_KEY_ENV} or --key-encryption-key-file; docs/deployment.md "Key-encryption key")`,
    );
  }
  return generateDataDirKey(settings);
}

function existsQuietly(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw new UsageError(
      `cannot read key-encryption key file ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
}

/** Printed on stderr when a key was generated: nobody should miss where it is. */
export function generatedKeyBanner(path: string, shared: boolean): string {
  return [
    "!!! GENERATED A KEY-ENCRYPTION KEY: none was configured",
    `!!! (${KEY_ENCRYPTION_KEY_ENV} or --key-encryption-key-file). It is in:`,
    `!!!     ${path}   (mode 0600)`,
    "!!! Signing private keys are encrypted with it. Back it up APART from the database: without it",
    "!!! the stored signing keys cannot be read. For production, move it out of the data directory",
    `!!! (${KEY_ENCRYPTION_KEY_ENV} or a key file elsewhere); see docs/deployment.md.`,
    ...(shared
      ? ["!!! PostgreSQL: every instance sharing this database needs this same key; give it to them."]
      : []),
  ].join("\n");
}

/** A short description of where the keys came from, for logs and messages (never the keys). */
export function describeKeySource(source: KeySource): string {
  switch (source.kind) {
    case "environment":
      return KEY_ENCRYPTION_KEY_ENV;
    case "file":
      return source.path;
    case "data-dir":
      return `${source.path} (data directory${source.generated ? ", generated now" : ""})`;
  }
}

/**
 * Tells where the keys came from: a generated key gets the stderr banner (unless `banner: false`) and a warning log line
 * (DESIGN.md "Secrets at rest": say loudly that it was generated and where it is kept).
 */
export function announceKeyEncryptionKeys(
  keys: KeyEncryptionKeys,
  log: Logger,
  sharedDatabase: boolean,
  options: { banner?: boolean } = {},
): void {
  if (keys.source.kind === "data-dir" && keys.source.generated) {
    // The banner's advice is for production; `demo` names the key in its own summary instead.
    if (options.banner !== false) banner(generatedKeyBanner(keys.source.path, sharedDatabase), log);
    log.warn("key_encryption_key_generated", {
      message: "Generated a key-encryption key for the signing keys; back it up apart from the database.",
      path: keys.source.path,
      kek: keys.ids[0],
    });
    return;
  }
  log.info("key_encryption_keys", { source: describeKeySource(keys.source), keks: keys.ids });
}

/**
 * Runs the server's start-up; a stored signing key the keys cannot open becomes an error that
 * also says where the configured keys came from (ids only).
 */
export async function withKeyEncryptionHint<T>(keys: KeyEncryptionKeys, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (!(error instanceof SigningKeyDecryptionError)) throw error;
    throw new Error(
      `${error.message}. Key-encryption keys configured: ${keys.ids.join(", ")} from ${describeKeySource(keys.source)}; ` +
        `configure the one that sealed it (${KEY_ENCRYPTION_KEY_ENV} or --key-encryption-key-file, see docs/deployment.md "Key-encryption key")`,
      { cause: error },
    );
  }
}
