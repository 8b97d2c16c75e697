/**
 * `gatehouse keys rotate|list|rewrap|generate-kek`: the access-token signing keys in the store.
 * Rotation adds a new ES256 key that signs from now on; the old one stays in the JWKS until every
 * token it signed has expired (access-token lifetime plus a margin). Running servers pick the new
 * key up within a few seconds (they re-read the key list), so rotation needs no restart.
 * Private keys are stored encrypted under a key-encryption key (src/cli/key-encryption.ts);
 * `rewrap` re-encrypts them all under the current one, `generate-kek` prints a fresh one.
 */
import { writeFileSync } from "node:fs";
import { createKeyManager } from "../../authorization-server/keys/key-manager.js";
import { privateKeyProtection } from "../../authorization-server/keys/signing-key-envelope.js";
import { silentLogger } from "../../shared/log.js";
import {
  createKeyEncryptionKeyring,
  generateKeyEncryptionKey,
  keyEncryptionKeyId,
  parseKeyEncryptionKey,
} from "../../shared/secret-envelope.js";
import type { AuthorizationStore, SigningKeyRecord } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  integerValue,
  noPositionals,
  type OptionSpecs,
  type ParsedArgs,
  parseCommandArgs,
  stringValue,
  UsageError,
} from "../args.js";
import { dataDirFromArgs, loadConfigFile, storeTargetFromArgs } from "../config.js";
import {
  describeKeySource,
  generatedKeyBanner,
  KEY_ENCRYPTION_OPTIONS,
  type KeyEncryptionKeys,
  keyEncryptionKeysForStore,
  withKeyEncryptionHint,
} from "../key-encryption.js";
import { err, isoTime, out, outJson, printUsage, runSubcommand, table } from "../output.js";
import { locateStore, STORE_OPTIONS, withStore } from "../server-runtime.js";
import { rewrapSigningKeys } from "../signing-key-rewrap.js";

const ROTATE_OPTIONS: OptionSpecs = {
  "access-token-ttl": {
    type: "string",
    valueName: "s",
    description:
      "the server's access-token lifetime (default: from --config, else 300): how long the old key stays published",
  },
  ...KEY_ENCRYPTION_OPTIONS,
  ...STORE_OPTIONS,
};
const LIST_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };
const REWRAP_OPTIONS: OptionSpecs = { ...KEY_ENCRYPTION_OPTIONS, ...STORE_OPTIONS };
const GENERATE_OPTIONS: OptionSpecs = {
  out: {
    type: "string",
    valueName: "file",
    description: "write it to a new file (mode 0600) instead of stdout",
  },
  json: STORE_OPTIONS.json,
  help: STORE_OPTIONS.help,
};

const USAGE = [
  formatUsage("gatehouse keys rotate", ROTATE_OPTIONS),
  formatUsage("gatehouse keys list", LIST_OPTIONS),
  formatUsage(
    "gatehouse keys rewrap",
    REWRAP_OPTIONS,
    [
      "Re-encrypts every stored signing private key under the current (first) key-encryption key,",
      "including keys stored before encryption. Rotating the key-encryption key:",
      "  1. configure NEW,OLD on every server and restart them (the first encrypts, all decrypt)",
      "  2. gatehouse keys rewrap   (with NEW,OLD configured)",
      "  3. configure NEW alone and restart",
    ].join("\n"),
  ),
  formatUsage("gatehouse keys generate-kek", GENERATE_OPTIONS),
].join("\n");

/**
 * The KEKs an admin command uses on `store`: the same sources as `serve`; one is generated only
 * when the store holds no sealed key (key-encryption.ts `keyEncryptionKeysForStore` decides).
 */
async function keyEncryptionKeysFromArgs(
  parsed: ParsedArgs,
  store: AuthorizationStore,
  shared: boolean,
): Promise<KeyEncryptionKeys> {
  const configPath = stringValue(parsed, "config");
  const file = configPath ? loadConfigFile(configPath) : {};
  const keyFile = stringValue(parsed, "key-encryption-key-file") ?? file.keyEncryptionKeyFile;
  const keys = await keyEncryptionKeysForStore(
    { ...(keyFile === undefined ? {} : { file: keyFile }), dataDir: dataDirFromArgs(parsed, file) },
    store,
  );
  if (keys.source.kind === "data-dir" && keys.source.generated)
    err(generatedKeyBanner(keys.source.path, shared));
  return keys;
}

/**
 * A rotation seals the new key under the first configured KEK, and every server must open it. The
 * servers open the current signing key, so its KEK is one they hold: a configuration without that
 * KEK is not theirs (a stray key file, the wrong environment), and a key sealed under it would
 * stop them signing. Refused, naming both.
 */
function refuseForeignConfiguration(stored: readonly SigningKeyRecord[], keys: KeyEncryptionKeys): void {
  const current = stored.find((k) => k.kid === signerKid(stored));
  if (!current) return;
  const protection = privateKeyProtection(current);
  if (protection.kind !== "encrypted" || keys.ids.includes(protection.kekId)) return;
  throw new Error(
    `the current signing key ${current.kid} is sealed under key-encryption key ${protection.kekId}, which is not among the configured ones ` +
      `(${keys.ids.join(", ")} from ${describeKeySource(keys.source)}): the servers could not open a key sealed now. ` +
      `Configure ${protection.kekId} (alone, or after a new key while rotating the key-encryption key; see 'gatehouse keys --help')`,
  );
}

type KeyStatus = "signing" | "published" | "expired";

function keyStatus(key: SigningKeyRecord, signer: string | undefined, now: number): KeyStatus {
  if (key.kid === signer) return "signing";
  if (key.retiredAt === undefined || (key.expiresAt !== undefined && key.expiresAt > now)) return "published";
  return "expired";
}

/** The signer is the newest key not retired (the rule the key manager applies). */
function signerKid(keys: readonly SigningKeyRecord[]): string | undefined {
  const live = keys.filter((k) => k.retiredAt === undefined);
  live.sort((a, b) => b.createdAt - a.createdAt || (a.kid < b.kid ? 1 : -1));
  return live[0]?.kid;
}

async function rotate(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, ROTATE_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const configPath = stringValue(parsed, "config");
  const ttl =
    integerValue(parsed, "access-token-ttl") ??
    (configPath ? loadConfigFile(configPath).accessTokenTtlSeconds : undefined) ??
    300;
  const where = locateStore(parsed);
  const target = where.target;
  const kid = await withStore(target, async (store) => {
    const keys = await keyEncryptionKeysFromArgs(parsed, store, target.kind === "postgres");
    refuseForeignConfiguration(await store.listSigningKeys(), keys);
    const keyring = await createKeyEncryptionKeyring(keys.keys);
    const manager = createKeyManager({
      store,
      // Rotation signs nothing: the issuer is not used here.
      issuer: "https://unused.invalid",
      now: () => Date.now(),
      accessTokenTtlSeconds: ttl,
      log: silentLogger,
      keyring,
    });
    return manager.rotate();
  });
  if (flag(parsed, "json")) outJson({ kid, rotated: true, store: where.description });
  else out(`new signing key ${kid}; the previous key stays published for ${ttl + 300} s\n${where.note}`);
  return 0;
}

async function list(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, LIST_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const keys = await withStore(storeTargetFromArgs(parsed), (store) => store.listSigningKeys());
  keys.sort((a, b) => b.createdAt - a.createdAt);
  const signer = signerKid(keys);
  const now = Date.now();
  // Only public facts: never the private JWK (the KEK id is a hash, not key material).
  const rows = keys.map((k) => ({
    kid: k.kid,
    alg: k.alg,
    status: keyStatus(k, signer, now),
    protection: protectionLabel(k),
    created: isoTime(k.createdAt),
    retired: isoTime(k.retiredAt),
    expires: isoTime(k.expiresAt),
  }));
  if (flag(parsed, "json")) outJson({ keys: rows });
  else if (rows.length === 0)
    out("no signing keys yet (the server creates one at start, or run: gatehouse keys rotate)");
  else {
    out(
      table(
        ["KID", "ALG", "STATUS", "PRIVATE KEY", "CREATED", "RETIRED", "EXPIRES"],
        rows.map((r) => [r.kid, r.alg, r.status, r.protection, r.created, r.retired, r.expires]),
      ),
    );
  }
  return 0;
}

function protectionLabel(key: SigningKeyRecord): string {
  const protection = privateKeyProtection(key);
  return protection.kind === "plaintext" ? "plaintext" : `kek ${protection.kekId}`;
}

async function rewrap(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, REWRAP_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const where = locateStore(parsed);
  const target = where.target;
  const { keys, keyring, result } = await withStore(target, async (store) => {
    const keys = await keyEncryptionKeysFromArgs(parsed, store, target.kind === "postgres");
    const keyring = await createKeyEncryptionKeyring(keys.keys);
    return {
      keys,
      keyring,
      result: await withKeyEncryptionHint(keys, () => rewrapSigningKeys(store, keyring)),
    };
  });
  if (flag(parsed, "json")) outJson({ kek: keyring.currentId, ...result, store: where.description });
  else {
    out(
      `${result.rewrapped.length} signing key(s) re-encrypted under key-encryption key ${keyring.currentId} ` +
        `(from ${describeKeySource(keys.source)}); ${result.unchanged.length} already were`,
    );
    out(where.note);
    for (const { kid, from } of result.rewrapped) out(`  ${kid}  was ${from}`);
  }
  if (result.changedMeanwhile.length) {
    err(`changed by another process while rewrapping, run again: ${result.changedMeanwhile.join(", ")}`);
    return 1;
  }
  return 0;
}

async function generateKek(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, GENERATE_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const key = generateKeyEncryptionKey();
  const id = keyEncryptionKeyId(parseKeyEncryptionKey(key, "key"));
  const path = stringValue(parsed, "out");
  if (path !== undefined) {
    try {
      writeFileSync(path, `${key}\n`, { mode: 0o600, flag: "wx" });
    } catch (error) {
      throw new UsageError(`cannot create ${path}: ${(error as NodeJS.ErrnoException).code ?? "error"}`);
    }
    if (flag(parsed, "json")) outJson({ kek: id, file: path });
    else out(`new key-encryption key ${id} written to ${path} (mode 0600)`);
  } else if (flag(parsed, "json")) outJson({ kek: id, key });
  else out(key);
  return 0;
}

export async function run(args: string[]): Promise<number> {
  return runSubcommand("keys", USAGE, { rotate, list, rewrap, "generate-kek": generateKek }, args);
}
