/**
 * The media type of a `Content-Type` value (RFC 9110 §8.3.1): the `type/subtype` before any
 * parameter, trimmed and lower-cased (types are case-insensitive); "" when absent.
 */
export function mediaType(contentType: string | null | undefined): string {
  if (contentType === null || contentType === undefined) return "";
  const semi = contentType.indexOf(";");
  return (semi < 0 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
}
