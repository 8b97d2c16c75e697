/**
 * A browser stand-in for the examples' end-to-end tests: logs in and approves consent on the
 * repository's authorization server by submitting its HTML forms with fetch and a cookie jar.
 */
/** The pages a user agent went through during one authorization. */
export interface Visit {
  login: boolean;
  consent: boolean;
  consentPage: string;
}

/**
 * A browser stand-in: keeps cookies per origin-less jar (one server), never follows redirects
 * itself, submits the login form (hidden fields + username/password) and approves consent.
 */
export class FormUserAgent {
  readonly cookies = new Map<string, string>();
  readonly visits: Visit[] = [];

  constructor(
    private readonly username: string,
    private readonly password: string,
  ) {}

  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) {
      headers.set("cookie", [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; "));
    }
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }

  /** Hidden inputs of the page's form, entities decoded. */
  static hiddenFields(html: string): Record<string, string> {
    const fields: Record<string, string> = {};
    for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
      fields[m[1]!] ??= m[2]!
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
        .replace(/&amp;/g, "&");
    }
    return fields;
  }

  async post(url: string, form: Record<string, string>): Promise<Response> {
    return this.request(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
  }

  /**
   * Follows the authorization URL through login and consent and returns the URL the authorization
   * server sends the browser back to: the first one on another origin (the client's redirect URI).
   */
  readonly open = async (authorizationUrl: URL): Promise<string> => {
    const visit: Visit = { login: false, consent: false, consentPage: "" };
    this.visits.push(visit);
    let url = authorizationUrl.href;
    for (let step = 0; step < 8; step++) {
      if (new URL(url).origin !== authorizationUrl.origin) return url;
      const response = await this.request(url);
      if (response.status === 303 || response.status === 302) {
        url = new URL(response.headers.get("location")!, url).href;
        continue;
      }
      const html = await response.text();
      if (response.status !== 200) throw new Error(`the authorization server answered ${response.status}`);
      const fields = FormUserAgent.hiddenFields(html);
      const action = new URL(url);
      let answer: Response;
      if (action.pathname.endsWith("/login")) {
        visit.login = true;
        answer = await this.post(new URL("/login", url).href, {
          ...fields,
          username: this.username,
          password: this.password,
        });
      } else if (action.pathname.endsWith("/consent")) {
        visit.consent = true;
        visit.consentPage = html;
        answer = await this.post(new URL("/consent", url).href, { ...fields, decision: "approve" });
      } else {
        throw new Error(`unexpected page ${action.pathname}`);
      }
      if (answer.status !== 303) throw new Error(`form submission answered ${answer.status}`);
      url = new URL(answer.headers.get("location")!, url).href;
    }
    throw new Error("too many steps before the callback");
  };
}
