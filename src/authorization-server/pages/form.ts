import { OAuthError } from "../../shared/errors.js";

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
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    throw new OAuthError("invalid_request", {
      description: "form body must be application/x-www-form-urlencoded",
    });
  }
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared) && Number(declared) > maxBytes) {
    throw new OAuthError("invalid_request", { description: "form body is too large", status: 413 });
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await reader.cancel().catch(() => {});
          throw new OAuthError("invalid_request", { description: "form body is too large", status: 413 });
        }
        chunks.push(value);
      }
    } catch (error) {
      if (error instanceof OAuthError) throw error;
      throw new OAuthError("invalid_request", { description: "form body could not be read" });
    }
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new OAuthError("invalid_request", { description: "form body is not valid UTF-8" });
  }
  return [...new URLSearchParams(text)];
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
