/**
 * The user code of the device authorization grant (RFC 8628 §6.1): drawn from an alphabet a person
 * can read and type without ambiguity, shown as `XXXX-XXXX`, and recognised however it is typed.
 * Only its SHA-256 is stored, like every other code.
 */
import { randomInt } from "node:crypto";
import { sha256Base64url } from "../../shared/crypto.js";

/**
 * RFC 8628 §6.1: base-20 consonants. No vowels (no words spelled by accident), no digits and no
 * letters that look like them (0/O, 1/I/L, 5/S... only the unambiguous ones are left).
 */
export const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
/** Characters of a user code: 20^8 ≈ 2^34.5 codes (RFC 8628 §6.1's own example). */
export const USER_CODE_LENGTH = 8;

/** Longest input the verification page looks at; anything longer is not a user code. */
const MAX_TYPED_LENGTH = 64;
/** What a person may type between the characters: the dash we show, spaces (RFC 8628 §6.1). */
const SEPARATORS = /[\s-]/g;
const NORMALIZED = new RegExp(`^[${USER_CODE_ALPHABET}]{${USER_CODE_LENGTH}}$`);

/** A new user code in its displayed form, `XXXX-XXXX`, every character drawn uniformly. */
export function newUserCode(): string {
  let code = "";
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return displayUserCode(code);
}

/**
 * The canonical form of what a person typed (RFC 8628 §6.1: case-insensitive, separators ignored),
 * or undefined when it cannot be a user code of ours (wrong length, a character outside the
 * alphabet, or absurdly long input).
 */
export function normalizeUserCode(typed: string | null | undefined): string | undefined {
  if (typeof typed !== "string" || typed.length > MAX_TYPED_LENGTH) return undefined;
  const code = typed.replace(SEPARATORS, "").toUpperCase();
  return NORMALIZED.test(code) ? code : undefined;
}

/** `BCDFGHJK` → `BCDF-GHJK`: the form shown on the device and on the verification page. */
export function displayUserCode(normalized: string): string {
  const half = USER_CODE_LENGTH / 2;
  return `${normalized.slice(0, half)}-${normalized.slice(half)}`;
}

/** What is stored and looked up: the SHA-256 of the normalized code, never the code itself. */
export function userCodeHash(normalized: string): string {
  return sha256Base64url(normalized);
}
