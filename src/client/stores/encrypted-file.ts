/**
 * An encrypted file store for the command line (spec "Token theft" 1: tokens MUST be stored
 * securely; "Refresh tokens": kept confidential in storage).
 *
 * - AES-256-GCM over the whole JSON document, with a fresh 96-bit IV per write and a fixed
 *   associated-data label, so a file from another program or version does not decrypt.
 * - The key comes from the `key` option or `GATEHOUSE_STORE_KEY` (32 bytes, base64url or hex);
 *   otherwise `keyLocation` decides where it lives: the OS keychain (keychain.ts), or a key file
 *   created with mode 0600 next to the data (so copying only the data file leaks nothing), or
 *   `auto`: the keychain when one is reachable, else the file. The file's envelope records which
 *   (`key`), so a store whose key is in the keychain is never given a fresh key file by mistake.
 * - Moving to the keychain: a store found with a key file beside it is re-encrypted under a new
 *   key kept in the keychain; the key file is removed only after the data re-reads under the
 *   keychain's copy. Every step leaves a state the next start finishes (see `#adoptKeychainKey`).
 * - The directory is created 0700, files 0600; writes go to a temporary file that is fsynced and
 *   renamed over the old one, so a crash leaves either the old or the new document.
 * - Every read-modify-write holds the lock file `store.enc.lock` (file-lock.ts), so two processes
 *   never drop each other's writes; `withLock` gives callers named locks in the same directory.
 * - No symbolic link in the directory is followed (no-follow.ts): the data file, the key file and
 *   the lock files are read with O_NOFOLLOW, and a link there is refused with an error naming it.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { chmod, link, mkdir, open, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { GatehouseTypeError } from "../../shared/errors.js";
import { TokenStoreError } from "./errors.js";
import { type FileLockOptions, withFileLock } from "./file-lock.js";
import { KeychainKey, KeychainUnavailableError } from "./keychain.js";
import { existsNoFollow, readFileNoFollow } from "./no-follow.js";
import type { StoreKind, StoreRecords, TokenStore } from "./types.js";

const AAD = Buffer.from("gatehouse-client-store-v1");
type Document = { [K in StoreKind]?: Record<string, StoreRecords[K]> };

/** Where the key of the data file lives: given by the caller (option or environment), a file, the keychain. */
type KeySource = "given" | "file" | "keychain";

/** The file's JSON envelope. `key` is absent in files written before it was recorded (they used "file" or "given"). */
interface Envelope {
  v: number;
  iv: string;
  tag: string;
  data: string;
  key?: KeySource;
}

export interface EncryptedFileStoreOptions {
  /** Directory holding `store.enc`, its lock files and (for a file key) `store.key`. */
  directory: string;
  /** 32-byte key; defaults to `GATEHOUSE_STORE_KEY`, then to `keyLocation`. */
  key?: Uint8Array;
  /**
   * Where the key lives when neither `key` nor `GATEHOUSE_STORE_KEY` gives it: `file` (default),
   * `store.key` beside the data; `keychain`, the OS keychain, an error when none is reachable;
   * `auto`, the keychain when one is reachable, else the file (what {@link defaultTokenStore} uses).
   */
  keyLocation?: "file" | "keychain" | "auto";
  /** Staleness and waiting of the lock files (file-lock.ts); defaults 30 s and 120 s. */
  lock?: FileLockOptions;
}

function decodeKey(text: string): Buffer {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : Buffer.from(trimmed, "base64url");
  if (key.length !== 32) {
    throw new GatehouseTypeError(
      "ERR_INVALID_OPTION",
      "the store key must be 32 bytes, written as base64url or 64 hex digits",
    );
  }
  return key;
}

async function writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
  const temp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
}

function decryptEnvelope(envelope: Envelope, key: Buffer): Buffer {
  const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(envelope.iv, "base64url"));
  decipher.setAAD(AAD);
  decipher.setAuthTag(Buffer.from(envelope.tag, "base64url"));
  return Buffer.concat([decipher.update(Buffer.from(envelope.data, "base64url")), decipher.final()]);
}

/** Whether `key` opens `envelope` (the GCM tag verifies). */
function decryptsWith(envelope: Envelope, key: Buffer): boolean {
  try {
    decryptEnvelope(envelope, key);
    return true;
  } catch {
    return false;
  }
}

/** The key file holds 43 base64url characters or 64 hex digits; the data file a bounded document. */
const MAX_KEY_FILE_BYTES = 1024;
const MAX_DATA_FILE_BYTES = 64 * 1024 * 1024;

/** Reads a store file without following a symbolic link (no-follow.ts); undefined when absent. */
async function readStoreFile(path: string, maxBytes: number): Promise<string | undefined> {
  return (await readFileNoFollow(path, maxBytes))?.text;
}

export class EncryptedFileTokenStore implements TokenStore {
  readonly #dir: string;
  readonly #file: string;
  readonly #keyFile: string;
  readonly #keyLocation: "file" | "keychain" | "auto";
  readonly #lockOptions: FileLockOptions;
  #key: Buffer | undefined;
  #keySource: KeySource = "given";
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: EncryptedFileStoreOptions) {
    this.#dir = options.directory;
    this.#file = join(options.directory, "store.enc");
    this.#keyFile = join(options.directory, "store.key");
    this.#keyLocation = options.keyLocation ?? "file";
    this.#lockOptions = options.lock ?? {};
    if (options.key) {
      if (options.key.length !== 32) {
        throw new GatehouseTypeError("ERR_INVALID_OPTION", "the store key must be 32 bytes");
      }
      this.#key = Buffer.from(options.key);
    } else if (process.env.GATEHOUSE_STORE_KEY) {
      this.#key = decodeKey(process.env.GATEHOUSE_STORE_KEY);
    }
  }

  /** The path of the encrypted data file. */
  get path(): string {
    return this.#file;
  }

  async #ensureDir(): Promise<void> {
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    const info = await stat(this.#dir);
    // A directory created earlier with a looser mode is tightened: owner only.
    if ((info.mode & 0o077) !== 0) await chmod(this.#dir, 0o700);
  }

  async #getKey(): Promise<Buffer> {
    if (this.#key) return this.#key;
    const location = this.#keyLocation;
    let keychain: KeychainKey | undefined;
    if (location !== "file") {
      try {
        keychain = await KeychainKey.open(this.#dir);
      } catch (error) {
        if (location === "keychain" || !(error instanceof KeychainUnavailableError)) throw error;
      }
    }
    if (keychain) {
      const stored = await keychain.read();
      // The common case needs no lock: the key is in the keychain and no key file is left over.
      const key =
        stored !== undefined && !(await existsNoFollow(this.#keyFile))
          ? decodeKey(stored)
          : await this.#underDataLock(() => this.#adoptKeychainKey(keychain));
      this.#key = key;
      this.#keySource = "keychain";
      return key;
    }
    this.#key = await this.#fileKey();
    this.#keySource = "file";
    return this.#key;
  }

  /** The key file beside the data, created (0600, exclusively) when there is none. */
  async #fileKey(): Promise<Buffer> {
    await this.#ensureDir();
    const existing = await this.#readKeyFile();
    if (existing) return existing;
    const envelope = await this.#readEnvelope();
    if (envelope?.key === "keychain") {
      // A fresh key file would only make every later write fail to read the data.
      throw new KeychainUnavailableError(
        `${this.#file} is encrypted under a key kept in the OS keychain, which this store does not use or cannot reach; run where the keychain is available, or remove the file to sign in afresh`,
      );
    }
    const fresh = randomBytes(32);
    // Written in full under a temporary name, then published with link(), which fails if the key
    // file exists: a reader never sees a key file that is created but not yet written.
    const temp = `${this.#keyFile}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
    const handle = await open(temp, "wx", 0o600);
    try {
      await handle.writeFile(fresh.toString("base64url"));
      await handle.sync();
    } finally {
      await handle.close();
    }
    try {
      await link(temp, this.#keyFile);
      return fresh;
    } catch (createError) {
      // Another process created it first: use theirs.
      if ((createError as NodeJS.ErrnoException).code !== "EEXIST") throw createError;
      const theirs = await readStoreFile(this.#keyFile, MAX_KEY_FILE_BYTES);
      if (theirs === undefined) throw createError;
      return decodeKey(theirs);
    } finally {
      await unlink(temp).catch(() => {});
    }
  }

  async #readKeyFile(): Promise<Buffer | undefined> {
    const text = await readStoreFile(this.#keyFile, MAX_KEY_FILE_BYTES);
    return text === undefined ? undefined : decodeKey(text);
  }

  /**
   * Under the data lock: the keychain's key, created when missing, and a key file left beside the
   * data from before the keychain retired. The order makes every interruption recoverable:
   * 1. a new key is written to the keychain and read back (a keychain that drops it stops here);
   * 2. the data is decrypted with the old file key and written again under the keychain's key;
   * 3. the data is read back with the keychain's copy; only then is the key file removed.
   * A start that finds the key file still there either finds the data already readable with the
   * keychain's key (step 3 was cut short) or starts again from step 2 with the same keychain key.
   */
  async #adoptKeychainKey(keychain: KeychainKey): Promise<Buffer> {
    const stored = await keychain.read();
    let key = stored === undefined ? undefined : decodeKey(stored);
    const legacy = await this.#readKeyFile();
    const envelope = await this.#readEnvelope();
    if (!legacy) {
      if (key) return key;
      if (envelope) {
        throw new TokenStoreError(
          "ERR_STORE_KEY_MISSING",
          `cannot decrypt ${this.#file}: its key is neither in the OS keychain nor in ${this.#keyFile} (was it written with GATEHOUSE_STORE_KEY?); set that key, or remove the file to sign in afresh`,
        );
      }
      return this.#createKeychainKey(keychain);
    }
    if (envelope && !(key && decryptsWith(envelope, key))) {
      // Throws on a damaged file: nothing has been changed yet.
      const doc = this.#decrypt(envelope, legacy);
      key ??= await this.#createKeychainKey(keychain);
      await this.#write(doc, key, "keychain");
      const reread = await keychain.read();
      const check = await this.#readEnvelope();
      if (reread === undefined || !check || !decryptsWith(check, decodeKey(reread))) {
        throw new KeychainUnavailableError(
          `moving the key of ${this.#file} to the OS keychain could not be confirmed`,
        );
      }
    }
    key ??= await this.#createKeychainKey(keychain);
    await unlink(this.#keyFile).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "ENOENT") throw error;
    });
    return key;
  }

  /** A fresh key into the keychain, kept only once it reads back the same. */
  async #createKeychainKey(keychain: KeychainKey): Promise<Buffer> {
    const fresh = randomBytes(32);
    await keychain.write(fresh.toString("base64url"));
    const reread = await keychain.read();
    if (reread === undefined || !decodeKey(reread).equals(fresh)) {
      throw new KeychainUnavailableError(
        `the OS keychain did not keep the store key (${keychain.description})`,
      );
    }
    return fresh;
  }

  async #readEnvelope(): Promise<Envelope | undefined> {
    const raw = await readStoreFile(this.#file, MAX_DATA_FILE_BYTES);
    if (raw === undefined) return undefined;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(raw) as Envelope;
    } catch (cause) {
      throw new TokenStoreError("ERR_STORE_UNREADABLE", `cannot read ${this.#file}: damaged file`, { cause });
    }
    if (envelope?.v !== 1)
      throw new TokenStoreError("ERR_STORE_UNREADABLE", "unsupported store format version");
    return envelope;
  }

  #decrypt(envelope: Envelope, key: Buffer): Document {
    try {
      return JSON.parse(decryptEnvelope(envelope, key).toString("utf8")) as Document;
    } catch (cause) {
      throw new TokenStoreError(
        "ERR_STORE_UNREADABLE",
        `cannot decrypt ${this.#file}: wrong key or damaged file`,
        {
          cause,
        },
      );
    }
  }

  async #load(): Promise<Document> {
    if (!(await existsNoFollow(this.#file))) return {};
    // The key first: finding it may move the store to the keychain, rewriting the file.
    const key = await this.#getKey();
    const envelope = await this.#readEnvelope();
    return envelope ? this.#decrypt(envelope, key) : {};
  }

  async #save(doc: Document): Promise<void> {
    const key = await this.#getKey();
    await this.#write(doc, key, this.#keySource);
  }

  async #write(doc: Document, key: Buffer, source: KeySource): Promise<void> {
    await this.#ensureDir();
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, iv);
    cipher.setAAD(AAD);
    const data = Buffer.concat([cipher.update(JSON.stringify(doc), "utf8"), cipher.final()]);
    const envelope: Envelope = {
      v: 1,
      iv: iv.toString("base64url"),
      tag: cipher.getAuthTag().toString("base64url"),
      data: data.toString("base64url"),
      key: source,
    };
    await writeFileAtomic(this.#file, JSON.stringify(envelope));
  }

  /** Holds `store.enc.lock` (other processes' read-modify-write cycles) around `task`. */
  async #underDataLock<T>(task: () => Promise<T>): Promise<T> {
    await this.#ensureDir();
    return withFileLock(join(this.#dir, "store.enc.lock"), task, this.#lockOptions);
  }

  /**
   * Runs `task` holding the lock file for `name` in the store's directory (`<hash>.lock`; the name
   * itself, which may hold URLs, is not written anywhere), shared with other processes.
   */
  async withLock<T>(name: string, task: () => Promise<T>): Promise<T> {
    await this.#ensureDir();
    const digest = createHash("sha256").update(name).digest("base64url").slice(0, 32);
    return withFileLock(join(this.#dir, `${digest}.lock`), task, this.#lockOptions);
  }

  /** Runs operations one at a time so that read-modify-write cycles in this process never interleave. */
  #serial<T>(operation: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(operation, operation);
    this.#queue = next.catch(() => {});
    return next;
  }

  get<K extends StoreKind>(kind: K, key: string): Promise<StoreRecords[K] | undefined> {
    return this.#serial(async () => {
      const doc = await this.#load();
      const table = doc[kind] as Record<string, StoreRecords[K]> | undefined;
      return table && Object.hasOwn(table, key) ? table[key] : undefined;
    });
  }

  set<K extends StoreKind>(kind: K, key: string, value: StoreRecords[K]): Promise<void> {
    return this.#serial(async () => {
      // The key first: finding it may itself take the data lock (the lock is not re-entrant).
      await this.#getKey();
      await this.#underDataLock(async () => {
        const doc = await this.#load();
        const table = (doc[kind] ?? {}) as Record<string, StoreRecords[K]>;
        table[key] = value;
        (doc as Record<string, unknown>)[kind] = table;
        await this.#save(doc);
      });
    });
  }

  delete(kind: StoreKind, key: string): Promise<void> {
    return this.#serial(async () => {
      await this.#getKey();
      await this.#underDataLock(async () => {
        const doc = await this.#load();
        const table = doc[kind] as Record<string, unknown> | undefined;
        if (!table || !Object.hasOwn(table, key)) return;
        delete table[key];
        await this.#save(doc);
      });
    });
  }

  list<K extends StoreKind>(kind: K): Promise<Array<[string, StoreRecords[K]]>> {
    return this.#serial(async () => {
      const doc = await this.#load();
      return Object.entries((doc[kind] ?? {}) as Record<string, StoreRecords[K]>);
    });
  }

  clear(): Promise<void> {
    return this.#serial(async () => {
      // Under the data lock: a write another process is making lands before, not after, the removal.
      await this.#underDataLock(() =>
        unlink(this.#file).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "ENOENT") throw error;
        }),
      );
    });
  }
}

/**
 * The encrypted file store with its key in the OS keychain (keychain.ts), never in a file beside
 * the data; a store found with such a file is moved over on first use. Fails with
 * `KeychainUnavailableError` where no keychain is reachable.
 */
export class KeychainTokenStore extends EncryptedFileTokenStore {
  constructor(options: Omit<EncryptedFileStoreOptions, "keyLocation">) {
    super({ ...options, keyLocation: "keychain" });
  }
}

/**
 * The store the command line uses: the encrypted file in `directory`, its key in the OS keychain
 * when one is reachable, else in `store.key` beside it (`GATEHOUSE_STORE_KEY` still wins). The
 * choice is made on first use, so constructing it costs nothing.
 */
export function defaultTokenStore(options: { directory: string }): EncryptedFileTokenStore {
  return new EncryptedFileTokenStore({ directory: options.directory, keyLocation: "auto" });
}
