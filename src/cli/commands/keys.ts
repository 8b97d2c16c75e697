/**
 * `gatehouse keys rotate|list`: the access-token signing keys in the store. Rotation adds a new
 * ES256 key that signs from now on; the old one stays in the JWKS until every token it signed
 * has expired (access-token lifetime plus a margin). Running servers pick the new key up within a
 * few seconds (they re-read the key list), so rotation needs no restart.
 */
import { createKeyManager } from "../../authorization-server/keys.js";
import { silentLogger } from "../../shared/log.js";
import type { SigningKeyRecord } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  integerValue,
  noPositionals,
  type OptionSpecs,
  parseCommandArgs,
  stringValue,
} from "../args.js";
import { loadConfigFile, storeTargetFromArgs } from "../config.js";
import { isoTime, out, outJson, printUsage, runSubcommand, table } from "../output.js";
import { STORE_OPTIONS, withStore } from "../server-runtime.js";

const ROTATE_OPTIONS: OptionSpecs = {
  "access-token-ttl": {
    type: "string",
    valueName: "s",
    description:
      "the server's access-token lifetime (default: from --config, else 300): how long the old key stays published",
  },
  ...STORE_OPTIONS,
};
const LIST_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };

const USAGE = [
  formatUsage("gatehouse keys rotate", ROTATE_OPTIONS),
  formatUsage("gatehouse keys list", LIST_OPTIONS),
].join("\n");

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
  const kid = await withStore(storeTargetFromArgs(parsed), async (store) => {
    const manager = createKeyManager({
      store,
      // Rotation signs nothing: the issuer is not used here.
      issuer: "https://unused.invalid",
      now: () => Date.now(),
      accessTokenTtlSeconds: ttl,
      log: silentLogger,
    });
    return manager.rotate();
  });
  if (flag(parsed, "json")) outJson({ kid, rotated: true });
  else out(`new signing key ${kid}; the previous key stays published for ${ttl + 300} s`);
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
  // Only public facts: never the private JWK.
  const rows = keys.map((k) => ({
    kid: k.kid,
    alg: k.alg,
    status: keyStatus(k, signer, now),
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
        ["KID", "ALG", "STATUS", "CREATED", "RETIRED", "EXPIRES"],
        rows.map((r) => [r.kid, r.alg, r.status, r.created, r.retired, r.expires]),
      ),
    );
  }
  return 0;
}

export async function run(args: string[]): Promise<number> {
  return runSubcommand("keys", USAGE, { rotate, list }, args);
}
