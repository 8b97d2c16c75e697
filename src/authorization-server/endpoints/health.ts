/**
 * `/health`: liveness and storage reachability for load balancers.
 */
import { jsonResponse } from "../../shared/http.js";
import type { Endpoint } from "../core/context.js";

/**
 * `GET /health`: 200 `{"status":"ok"}` when the store answers a cheap read and the server can sign
 * with its current key; 200 `{"status":"degraded"}` when it signs with an older published key
 * because the current one cannot be opened (the key manager logs which, and the KEK it needs);
 * 503 `{"status":"unavailable"}` with `Retry-After` when the store does not answer or no key can
 * sign (load balancers take the instance out of rotation). The reason goes to the log only.
 */
export const handleHealth: Endpoint = async (_request, ctx) => {
  let signing: "ok" | "degraded" | "unavailable";
  try {
    // A read of a client id that cannot exist (ids never contain a space): touches the database only.
    await ctx.store.getClient("health check");
    signing = (await ctx.keys.signingStatus?.()) ?? "ok";
    if (signing === "unavailable") throw new Error("no signing key this server can open is published");
  } catch (error) {
    ctx.log.error("health_check_failed", { reason: error instanceof Error ? error.message : String(error) });
    return jsonResponse(
      { status: "unavailable" },
      { status: 503, headers: { "cache-control": "no-store", "retry-after": "5" } },
    );
  }
  return jsonResponse({ status: signing }, { headers: { "cache-control": "no-store" } });
};
