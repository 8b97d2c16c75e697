/**
 * DPoP at the gate (RFC 9449 §7): a resource's policy, the proof verifier it uses (the one shared
 * with the authorization server, shared/dpop-proof.ts), and what its metadata says about DPoP
 * (RFC 9728 §2 `dpop_signing_alg_values_supported`, `dpop_bound_access_tokens_required`).
 */
import {
  type DPoPNonceOptions,
  type DPoPProofVerifier,
  type DPoPReplayGuard,
  dpopProofVerifier,
} from "../shared/dpop-proof.js";
import { GatehouseTypeError } from "../shared/errors.js";

/**
 * Which tokens a resource takes:
 * - `"bearer"` (default): the `Bearer` scheme only; the `DPoP` scheme is not recognised.
 * - `"allowed"`: bearer tokens with `Bearer`, DPoP-bound tokens with `DPoP` and a proof.
 * - `"required"`: DPoP-bound tokens with `DPoP` and a proof only.
 *
 * Under every policy a DPoP-bound token (`cnf.jkt`) sent as `Bearer` is refused (RFC 9449 §7.2):
 * the binding is what makes a stolen copy useless.
 */
export type DPoPPolicy = "bearer" | "allowed" | "required";

const POLICIES: readonly DPoPPolicy[] = ["bearer", "allowed", "required"];

export interface ResourceDPoPOptions {
  policy: DPoPPolicy;
  /** Accepted proof algorithms (default ES256, EdDSA, RS256, PS256); advertised in `algs` and metadata. */
  algorithms?: readonly string[];
  /** How far a proof's `iat` may be from now, either way, in seconds (default 60). */
  iatWindowSeconds?: number;
  /**
   * Where used proofs are recorded (default: this process's memory). Instances serving one
   * resource share one (e.g. `storeReplayGuard(store)`), or a proof replayed at another instance
   * is accepted there.
   */
  replayGuard?: DPoPReplayGuard;
  /**
   * Require server nonces in proofs (RFC 9449 §9). `context` defaults to the resource URI;
   * instances share `secret`.
   */
  nonce?: DPoPNonceOptions;
}

/** A resource's DPoP set-up, when its policy accepts DPoP at all. */
export interface ResourceDPoP {
  /** `"required"`: bearer tokens are refused. */
  required: boolean;
  verifier: DPoPProofVerifier;
}

function invalidOption(message: string): GatehouseTypeError {
  return new GatehouseTypeError("ERR_INVALID_OPTION", message);
}

/**
 * Checks the options (at start-up) and builds the proof verifier; `undefined` for the `"bearer"`
 * policy (or no options), so such a resource pays nothing for DPoP.
 */
export function resourceDPoP(
  options: ResourceDPoPOptions | undefined,
  resource: string,
): ResourceDPoP | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null || !POLICIES.includes(options.policy)) {
    throw invalidOption(`dpop.policy must be one of ${POLICIES.join(", ")}`);
  }
  if (options.policy === "bearer") return undefined;
  const verifier = dpopProofVerifier({
    algorithms: options.algorithms,
    iatWindowSeconds: options.iatWindowSeconds,
    replayGuard: options.replayGuard,
    nonce: options.nonce === undefined ? undefined : { context: resource, ...options.nonce },
  });
  return { required: options.policy === "required", verifier };
}

/** The RFC 9728 §2 DPoP fields of the resource's metadata (none for a bearer-only resource). */
export function dpopMetadataFields(dpop: ResourceDPoP | undefined): {
  dpop_signing_alg_values_supported?: string[];
  dpop_bound_access_tokens_required?: true;
} {
  if (dpop === undefined) return {};
  return {
    dpop_signing_alg_values_supported: [...dpop.verifier.algorithms],
    ...(dpop.required ? { dpop_bound_access_tokens_required: true as const } : {}),
  };
}
