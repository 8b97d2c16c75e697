/**
 * Rules about the resource side of DPoP (RFC 9449 §7, with the RFC 9728 §2 metadata fields it
 * defines): what a protected resource's metadata says about DPoP-bound tokens, and whether its 401
 * challenge agrees with it, so a client learns which scheme and which proof algorithms to use.
 */
import {
  dpopChallenge,
  fail,
  info,
  pass,
  type Rule,
  refusedDPoPAlgorithms,
  servedPrm,
  skip,
  splitScope,
  stringArray,
  unauthenticated401,
  type Verdict,
  warn,
} from "./rule-helpers.js";
import type { PrmProbe } from "./types.js";

/** RFC 9728 §2: `dpop_bound_access_tokens_required` is a boolean, false when absent. */
function requiresDPoP(json: Record<string, unknown>): boolean {
  return json.dpop_bound_access_tokens_required === true;
}

function prmDPoPVerdict(p: PrmProbe): Verdict {
  const json = p.json!;
  const required = json.dpop_bound_access_tokens_required;
  if (required !== undefined && typeof required !== "boolean") {
    return fail(`dpop_bound_access_tokens_required is ${JSON.stringify(required)}, not a boolean`, p.url);
  }
  const raw = json.dpop_signing_alg_values_supported;
  if (raw === undefined) {
    return required === true
      ? fail(
          "dpop_bound_access_tokens_required is true but dpop_signing_alg_values_supported is missing: a client cannot tell which key to make its proofs with",
          p.url,
        )
      : info("DPoP not advertised", p.url);
  }
  const algs = stringArray(raw);
  if (!algs || algs.length === 0)
    return fail("dpop_signing_alg_values_supported is not a non-empty array of strings", p.url);
  const refused = refusedDPoPAlgorithms(algs);
  if (refused.length) {
    return fail(
      `lists ${refused.join(", ")}: a DPoP proof must be signed with an asymmetric key (RFC 9449 §4.2); remove them from the resource's accepted algorithms and its metadata`,
      p.url,
    );
  }
  return pass(`${required === true ? "DPoP required" : "DPoP accepted"}: ${algs.join(", ")}`, p.url);
}

/** The 401 challenge of a resource whose metadata (the one a client reads) speaks of DPoP. */
function challengeDPoPVerdict(prm: Record<string, unknown>, o: Parameters<Rule["check"]>[0]): Verdict {
  const required = requiresDPoP(prm);
  const advertised = stringArray(prm.dpop_signing_alg_values_supported);
  const challenge = dpopChallenge(o.unauthenticated);
  const schemes = (o.unauthenticated.challenges ?? []).map((c) => c.scheme).join(", ") || "none";
  if (!challenge) {
    if (required) {
      return fail(
        `the metadata requires DPoP-bound tokens but the 401 offers no DPoP challenge (schemes: ${schemes}); a client is told to use a scheme the resource refuses`,
      );
    }
    if (advertised) return info("DPoP accepted per the metadata; the 401 offers only Bearer");
    return skip("DPoP neither advertised nor challenged");
  }
  const algs = splitScope(challenge.params.algs);
  if (algs.length === 0) {
    return warn(
      'the DPoP challenge has no algs parameter: name the accepted proof algorithms (RFC 9449 §7.1), e.g. algs="ES256 EdDSA"',
    );
  }
  const refused = refusedDPoPAlgorithms(algs);
  if (refused.length) {
    return fail(
      `the DPoP challenge's algs lists ${refused.join(", ")}: proofs are asymmetric only (RFC 9449 §4.2)`,
    );
  }
  if (required && o.unauthenticated.challenges?.some((c) => c.scheme.toLowerCase() === "bearer")) {
    return warn(
      "the metadata requires DPoP-bound tokens but the 401 also offers Bearer, inviting tokens the resource will refuse (RFC 9449 §7.1: DPoP alone)",
    );
  }
  if (advertised && [...algs].sort().join(" ") !== [...advertised].sort().join(" ")) {
    return warn(
      `the challenge's algs (${algs.join(" ")}) differ from the metadata's dpop_signing_alg_values_supported (${advertised.join(" ")})`,
    );
  }
  return pass(`DPoP challenge with algs="${algs.join(" ")}"${required ? ", no Bearer" : ""}`);
}

export const RESOURCE_DPOP_RULES: readonly Rule[] = [
  {
    id: "prm.dpop",
    group: "prm",
    level: "MUST",
    spec: "RFC 9728 §2 (dpop_bound_access_tokens_required, dpop_signing_alg_values_supported); RFC 9449 §4.2 (asymmetric proofs only)",
    title: "PRM DPoP fields: algorithms listed when DPoP is required, never none or HS*",
    check(o) {
      const served = servedPrm(o);
      if (served.length === 0) return skip("no PRM document served");
      return served.map(prmDPoPVerdict);
    },
  },
  {
    id: "prm.dpop-replay",
    group: "prm",
    level: "SHOULD",
    spec: "RFC 9449 §11.1 (a resource server SHOULD refuse a proof's jti seen before, within the iat window)",
    title: "A DPoP resource run as several instances shares one replay guard",
    check(o) {
      const prm = o.selectedPrm?.json;
      if (!prm) return skip("no protected resource metadata");
      if (prm.dpop_signing_alg_values_supported === undefined && !requiresDPoP(prm))
        return skip("DPoP not advertised");
      // Not observable from outside (it would take a real token and proof sent to two instances):
      // said once, because Gatehouse's default guard lives in one process.
      return info(
        "DPoP proofs are single use per replay guard: if this resource runs as several instances, they must share one (Gatehouse: dpop.replayGuard = storeReplayGuard(store) on the shared SQLite or PostgreSQL store), or a proof replayed at another instance is accepted there. The auditor cannot see how many instances answer",
        o.selectedPrm!.url,
      );
    },
  },
  {
    id: "challenge.dpop",
    group: "challenge",
    level: "MUST",
    spec: "RFC 9449 §7.1 (the DPoP scheme and its algs parameter), §7.2; RFC 9728 §2 (dpop_bound_access_tokens_required)",
    title: "A resource that requires DPoP challenges with the DPoP scheme and its algorithms",
    check(o) {
      const prm = o.selectedPrm?.json;
      if (!prm) return skip("no protected resource metadata to compare with");
      if (!unauthenticated401(o)) return skip("no 401 to inspect");
      return challengeDPoPVerdict(prm, o);
    },
  },
];
