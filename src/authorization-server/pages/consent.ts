import type { Endpoint } from "../context.js";

/** Placeholder: the consent page. Replaced by the browser-side work. */
export const handleConsent: Endpoint = async () => new Response("not implemented", { status: 501 });
