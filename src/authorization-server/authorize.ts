import type { Endpoint } from "./context.js";

/** Placeholder: the authorization endpoint (OAuth 2.1 §4.1.1). Replaced by the browser-side work. */
export const handleAuthorize: Endpoint = async () => new Response("not implemented", { status: 501 });
