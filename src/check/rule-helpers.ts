/**
 * Helpers the rule tables share: verdict constructors and views over the observations (documents
 * served once per URL, identical metadata documents judged once).
 */
import { findChallenge } from "../shared/www-authenticate.js";
import { usable } from "./probes.js";
import type {
  AuthorizationServerProbe,
  Group,
  Level,
  Observations,
  Outcome,
  PrmProbe,
  ResponseProbe,
  Revision,
} from "./types.js";

export interface Verdict {
  outcome: Outcome;
  message: string;
  subject?: string;
}

export interface Rule {
  id: string;
  group: Group;
  level: Level;
  /** Where the requirement comes from: the spec section and the RFC section. */
  spec: string;
  title: string;
  /** Revisions the rule applies to (default: both). */
  revisions?: readonly Revision[];
  check(observations: Observations): Verdict | Verdict[];
}

export const pass = (message: string, subject?: string): Verdict => ({ outcome: "pass", message, subject });
export const fail = (message: string, subject?: string): Verdict => ({ outcome: "fail", message, subject });
export const warn = (message: string, subject?: string): Verdict => ({ outcome: "warn", message, subject });
export const info = (message: string, subject?: string): Verdict => ({ outcome: "info", message, subject });
export const skip = (message: string, subject?: string): Verdict => ({ outcome: "skip", message, subject });

export function describeResponse(probe: {
  status?: number;
  transportError?: string;
  location?: string;
}): string {
  if (probe.transportError) return `request failed: ${probe.transportError}`;
  if (probe.location && probe.status !== undefined && probe.status >= 300 && probe.status < 400) {
    return `${probe.status} redirect to ${probe.location} (not followed)`;
  }
  return `HTTP ${probe.status}`;
}

export function bearerChallenge(probe: ResponseProbe | undefined) {
  return probe?.challenges ? findChallenge(probe.challenges, "Bearer") : undefined;
}

export function dpopChallenge(probe: ResponseProbe | undefined) {
  return probe?.challenges ? findChallenge(probe.challenges, "DPoP") : undefined;
}

/**
 * The challenge a client reads the resource's parameters from: `Bearer`, or `DPoP` at a resource
 * that offers only DPoP (RFC 9449 §7.1: one that requires DPoP-bound tokens sends no Bearer challenge).
 */
export function accessChallenge(probe: ResponseProbe | undefined) {
  return bearerChallenge(probe) ?? dpopChallenge(probe);
}

/**
 * JWS algorithms a DPoP proof must never use (RFC 9449 §4.2: asymmetric only): `none`, which signs
 * nothing, and the HMAC family, which anyone who holds the shared key could sign with.
 */
export function refusedDPoPAlgorithms(algs: readonly string[]): string[] {
  return algs.filter((a) => a === "none" || /^HS\d+$/.test(a));
}

export function unauthenticated401(o: Observations): boolean {
  return o.unauthenticated.status === 401;
}

export function splitScope(value: string | undefined): string[] {
  return value ? value.split(" ").filter((s) => s !== "") : [];
}

export function stringArray(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? value : undefined;
}

/** Probes once per URL (the challenge's URL is often one of the well-known ones). */
export function uniqueByUrl<T extends { url: string }>(probes: T[]): T[] {
  const seen = new Set<string>();
  return probes.filter((p) => !seen.has(p.url) && seen.add(p.url));
}

/** PRM documents that answered 200 with a JSON object, once per URL. */
export function servedPrm(o: Observations): PrmProbe[] {
  return uniqueByUrl(o.prm.filter((p) => p.status === 200 && p.json !== undefined));
}

export interface ServedAsDocument {
  server: AuthorizationServerProbe;
  json: Record<string, unknown>;
  urls: string[];
}

/**
 * Valid AS metadata documents. Identical documents served under several forms of one server are
 * checked once, with every URL named in the subject.
 */
export function servedAsMetadata(o: Observations): ServedAsDocument[] {
  return o.authorizationServers.flatMap((server) => {
    const byBody = new Map<string, ServedAsDocument>();
    for (const form of server.forms.filter((f) => usable(f))) {
      const key = JSON.stringify(form.json);
      const entry = byBody.get(key);
      if (entry) entry.urls.push(form.url);
      else byBody.set(key, { server, json: form.json!, urls: [form.url] });
    }
    return [...byBody.values()];
  });
}

export function perAsDocument(
  o: Observations,
  what: string,
  check: (json: Record<string, unknown>, server: AuthorizationServerProbe) => Verdict,
): Verdict[] {
  const docs = servedAsMetadata(o);
  if (docs.length === 0) return [skip(`no authorization server metadata to check ${what} in`)];
  return docs.map(({ server, json, urls }) => ({ ...check(json, server), subject: urls.join(" and ") }));
}

/** RFC 8414 §3.2 / RFC 9728 §3.2: `application/json`, parameters (charset) allowed. */
export function contentTypeVerdict(probe: { url: string; contentType?: string }): Verdict {
  const type = probe.contentType?.split(";")[0]?.trim().toLowerCase();
  return type === "application/json"
    ? pass(probe.contentType!, probe.url)
    : fail(`content type ${probe.contentType ?? "(none)"}`, probe.url);
}

/** The endpoints whose scheme the transport rule inspects. */
export function endpointFields(json: Record<string, unknown>): Array<[string, string]> {
  return Object.entries(json).filter(
    (entry): entry is [string, string] =>
      typeof entry[1] === "string" && (entry[0].endsWith("_endpoint") || entry[0] === "jwks_uri"),
  );
}
