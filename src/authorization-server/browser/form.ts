/**
 * Reading the pages' small `application/x-www-form-urlencoded` bodies, with a byte cap.
 */
import { OAuthError } from "../../shared/errors.js";
import { readCappedText, requestMediaType } from "../core/request-body.js";

/** The pages' forms are small; anything bigger is refused before it is read in full. */
export const MAX_PAGE_FORM_BYTES = 16 * 1024;

/**
 * Reads an `application/x-www-form-urlencoded` body as a list of pairs (so callers can see repeated
 * parameters). Wrong content type, oversized or non-UTF-8 bodies are an `invalid_request`.
 */
export async function readFormPairs(
  request: Request,
  maxBytes = MAX_PAGE_FORM_BYTES,
): Promise<[string, string][]> {
  if (requestMediaType(request) !== "application/x-www-form-urlencoded") {
    throw new OAuthError("invalid_request", {
      description: "form body must be application/x-www-form-urlencoded",
    });
  }
  return [...new URLSearchParams(await readCappedText(request, maxBytes, "form body"))];
}

/**
 * A page form as a map: a field sent twice is refused (a second value must never silently win, RFC
 * 6749 §3.1), and an empty field counts as absent.
 */
export async function readPageForm(request: Request): Promise<Map<string, string>> {
  const form = new Map<string, string>();
  for (const [name, value] of await readFormPairs(request)) {
    if (form.has(name)) throw new OAuthError("invalid_request", { description: "a form field is repeated" });
    form.set(name, value);
  }
  for (const [name, value] of form) if (value === "") form.delete(name);
  return form;
}
