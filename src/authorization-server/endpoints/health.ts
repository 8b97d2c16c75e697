/**
 * `/health`: liveness and storage reachability for load balancers.
 */
import { jsonResponse } from "../../shared/http.js";
import type { Endpoint } from "../config/context.js";

/**
 * `GET /health`: 200 `{"status":"ok"}` when the store answers a cheap read, 503
 * `{"status":"unavailable"}` with `Retry-After` when it does not (load balancers take the instance
 * out of rotation). The reason goes to the log only.
 */
export const handleHealth: Endpoint = async (_request, ctx) => {
  try {
    // A read of a client id that cannot exist (ids never contain a space): touches the database only.
    await ctx.store.getClient("health check");
  } catch (error) {
    ctx.log.error("health_check_failed", { reason: error instanceof Error ? error.message : String(error) });
    return jsonResponse(
      { status: "unavailable" },
      { status: 503, headers: { "cache-control": "no-store", "retry-after": "5" } },
    );
  }
  return jsonResponse({ status: "ok" }, { headers: { "cache-control": "no-store" } });
};
