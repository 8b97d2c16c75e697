/**
 * The token store's encryption key in the operating system's keychain: macOS Keychain, the Secret
 * Service on Linux (GNOME Keyring, KWallet; over the D-Bus session bus), Windows Credential
 * Manager, through `@napi-rs/keyring` (prebuilt binaries in the npm package; no build step).
 *
 * Only the 32-byte key goes into the keychain; the tokens stay in the encrypted file
 * (encrypted-file.ts). Copying the configuration directory (a backup, synced dotfiles) then leaks
 * nothing, and the keychain's entry stays small (Windows limits a credential to 2560 bytes).
 *
 * On Linux the entry is pinned to the Secret Service: the library's fallback, the kernel keyring,
 * forgets its keys at reboot, which would make the tokens unreadable. Without a reachable Secret
 * Service the keychain counts as unavailable and the caller decides (file key, or an error).
 */
import { resolve } from "node:path";
import { TokenStoreError } from "./errors.js";

/** The keychain service name every Gatehouse store key is filed under. */
const KEYCHAIN_SERVICE = "gatehouse";
/**
 * How long one keychain call may take. Generous: the desktop may ask the person to unlock the
 * keychain first. A D-Bus peer that never answers fails the call instead of hanging the CLI.
 */
const KEYCHAIN_CALL_TIMEOUT_MS = 60_000;

/** The keychain cannot be used here; `reason` says why (never a secret). Code ERR_KEYCHAIN_UNAVAILABLE. */
export class KeychainUnavailableError extends TokenStoreError<"ERR_KEYCHAIN_UNAVAILABLE"> {
  constructor(reason: string) {
    super("ERR_KEYCHAIN_UNAVAILABLE", `no OS keychain is reachable: ${reason}`);
    this.name = "KeychainUnavailableError";
  }
}

type KeyringModule = typeof import("@napi-rs/keyring");
type AsyncEntry = InstanceType<KeyringModule["AsyncEntry"]>;

/** The platform's own words for why it failed, without anything that was being stored. */
function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The keychain entry holding one store directory's key, as base64url text. */
export class KeychainKey {
  readonly #entry: AsyncEntry;
  /** What the keychain shows: the service and the account (the store's absolute directory). */
  readonly description: string;

  private constructor(entry: AsyncEntry, account: string) {
    this.#entry = entry;
    this.description = `${KEYCHAIN_SERVICE} / ${account}`;
  }

  /**
   * The entry for `directory`'s key, after one read proves the keychain answers; throws
   * {@link KeychainUnavailableError} when the library has no binary for this platform, no keychain
   * service is reachable, or it refuses.
   */
  static async open(directory: string): Promise<KeychainKey> {
    let keyring: KeyringModule;
    try {
      keyring = await import("@napi-rs/keyring");
    } catch (error) {
      throw new KeychainUnavailableError(`the keyring library does not load here (${reasonOf(error)})`);
    }
    const account = `store-key ${resolve(directory)}`;
    let entry: AsyncEntry;
    try {
      entry = new keyring.AsyncEntry(KEYCHAIN_SERVICE, account, { linux: { store: "secret-service" } });
      await entry.getPassword(AbortSignal.timeout(KEYCHAIN_CALL_TIMEOUT_MS));
    } catch (error) {
      throw new KeychainUnavailableError(reasonOf(error));
    }
    return new KeychainKey(entry, account);
  }

  /** The stored key text, or undefined when there is none yet. */
  async read(): Promise<string | undefined> {
    try {
      return (await this.#entry.getPassword(AbortSignal.timeout(KEYCHAIN_CALL_TIMEOUT_MS))) ?? undefined;
    } catch (error) {
      throw new KeychainUnavailableError(`reading ${this.description} failed (${reasonOf(error)})`);
    }
  }

  async write(keyText: string): Promise<void> {
    try {
      await this.#entry.setPassword(keyText, AbortSignal.timeout(KEYCHAIN_CALL_TIMEOUT_MS));
    } catch (error) {
      throw new KeychainUnavailableError(`writing ${this.description} failed (${reasonOf(error)})`);
    }
  }
}
