import type { Endpoint } from "../context.js";

/** Placeholder: the login page. Replaced by the browser-side work. */
export const handleLogin: Endpoint = async () => new Response("not implemented", { status: 501 });
