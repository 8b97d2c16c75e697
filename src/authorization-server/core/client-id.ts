/**
 * The one test of what kind of client id a request names, for every floor that must tell before it
 * resolves the client (rate limits, client resolution, metadata documents).
 */

/** True when `clientId` is meant as a metadata document URL (any case of the scheme). */
export function isUrlClientId(clientId: string): boolean {
  return /^https:\/\//i.test(clientId);
}
