/**
 * The anonymous registration probe behind `as.anonymous-machine-clients`: may anyone on the
 * internet register a client that gets tokens with no user (`client_credentials`, OAuth 2.1 §4.2)?
 * Where dynamic registration (RFC 7591) answers yes without an initial access token (§3), every
 * resource that treats a valid token as authorized is open to whoever asks (issue 22's finding
 * against Gatehouse itself).
 *
 * The probe is one anonymous `POST` to the announced `registration_endpoint` asking for exactly
 * such a client. It carries no credential. A server that refuses it registers nothing. A server that
 * accepts it has registered a client anyone could have registered: the probe never uses it, keeps
 * no part of the answer but `client_id` presence and the error code, drops the secret unread, and
 * deletes the client through RFC 7592 when the answer offers a management URL and token.
 */
import { discard, type Prober, readCapped } from "./probes.js";
import type { MachineRegistrationProbe } from "./types.js";

/** What the probe asks for: the finding's request, named so an operator recognises it. */
const PROBE_METADATA = {
  client_name: "gatehouse check probe (never used; delete it)",
  token_endpoint_auth_method: "client_secret_post",
  grant_types: ["client_credentials"],
};

const MAX_ANSWER_BYTES = 16 * 1024;

/** Registers anonymously asking for `client_credentials`, and cleans up what a server accepted. */
export async function probeMachineRegistration(
  prober: Prober,
  endpoint: string,
): Promise<MachineRegistrationProbe> {
  const { response, error } = await prober.send(endpoint, {
    method: "POST",
    credential: "none",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(PROBE_METADATA),
  });
  if (!response) return { endpoint, transportError: error ?? "no answer" };
  const text = await readCapped(response, MAX_ANSWER_BYTES);
  if (text === undefined) await discard(response);
  let body: Record<string, unknown> = {};
  try {
    const parsed = text === undefined ? undefined : JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed;
  } catch {}
  const accepted = response.status >= 200 && response.status < 300 && typeof body.client_id === "string";
  const probe: MachineRegistrationProbe = { endpoint, status: response.status, accepted };
  if (typeof body.error === "string") probe.error = body.error.slice(0, 64);
  if (accepted) probe.deleted = await deleteRegistration(prober, body);
  return probe;
}

/** RFC 7592 §2.3: DELETE on the client configuration endpoint with its registration access token. */
async function deleteRegistration(prober: Prober, body: Record<string, unknown>): Promise<boolean> {
  const uri = body.registration_client_uri;
  const token = body.registration_access_token;
  if (typeof uri !== "string" || typeof token !== "string" || !/^https?:\/\//i.test(uri)) return false;
  const { response } = await prober.send(uri, {
    method: "DELETE",
    credential: "client",
    headers: { authorization: `Bearer ${token}` },
  });
  if (!response) return false;
  await discard(response);
  return response.status === 204 || response.status === 200;
}
