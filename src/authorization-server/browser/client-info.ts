/**
 * Who a client is, as the user sees it on the consent and error pages.
 */
import type { ClientRecord } from "../../storage/contract.js";
import { isLocalhostOnly } from "../clients/redirect-uri.js";
import { html, type SafeHtml } from "./html.js";

/**
 * Who a client is, as the user sees it (spec "Client ID Metadata Documents": show `client_name`,
 * display the redirect URI hostname clearly, warn on localhost-only redirect URIs).
 */
export interface ClientDisplay {
  /** `client_name`, or the client id when there is none. Always rendered as text. */
  name: string;
  /** The host that vouches for the client: the metadata document's host, else `client_uri`'s. */
  host?: string;
  /** Whether the user should take the name with a grain of salt (no administrator vetted it). */
  untrusted: boolean;
  localhostOnly: boolean;
}

function hostOf(uri: string | undefined, part: "host" | "hostname" = "host"): string | undefined {
  if (!uri) return undefined;
  try {
    const host = new URL(uri)[part];
    return host === "" ? undefined : host;
  } catch {
    return undefined;
  }
}

/** Untrusted: nobody but the client itself vouched for its metadata (SECURITY.md "Authorization endpoint"). */
export function isUntrustedClient(client: ClientRecord): boolean {
  return client.source === "metadata-document" || client.source === "dynamic";
}

export function describeClient(client: ClientRecord): ClientDisplay {
  const name = client.clientName?.trim() ? client.clientName.trim().slice(0, 200) : client.clientId;
  const host = client.source === "metadata-document" ? hostOf(client.clientId) : hostOf(client.clientUri);
  const display: ClientDisplay = {
    name,
    untrusted: isUntrustedClient(client),
    localhostOnly: isLocalhostOnly(client.redirectUris),
  };
  if (host !== undefined) display.host = host;
  return display;
}

/** The "who is asking" block shared by the consent and error pages. */
export function clientFacts(client: ClientRecord, redirectUri: string | undefined): SafeHtml {
  const d = describeClient(client);
  const redirectHost = hostOf(redirectUri);
  // The warning names the machine the page shows ("Returns you to"), not a generic "localhost".
  const loopbackName = hostOf(redirectUri ?? client.redirectUris[0], "hostname") ?? "localhost";
  return html`<dl>
<dt>Application</dt><dd class="name" data-testid="client-name">${d.name}</dd>
${d.host !== undefined ? html`<dt>Published by</dt><dd data-testid="client-host">${d.host}</dd>` : ""}
${redirectHost !== undefined ? html`<dt>Returns you to</dt><dd data-testid="redirect-host">${redirectHost}</dd>` : ""}
</dl>
${
  d.localhostOnly
    ? html`<p class="warning" data-testid="localhost-warning"><strong>This application runs on your own computer</strong>
(it returns to <code>${loopbackName}</code>). Any program on this machine could claim this name; continue only if you
just started it yourself.</p>`
    : ""
}
${
  d.untrusted && !d.localhostOnly
    ? html`<p class="muted">This application registered itself; its name has not been checked by an administrator.</p>`
    : ""
}`;
}
