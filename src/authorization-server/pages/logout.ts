import type { Endpoint } from "../context.js";

/** Placeholder: the logout page. Replaced by the browser-side work. */
export const handleLogout: Endpoint = async () => new Response("not implemented", { status: 501 });
