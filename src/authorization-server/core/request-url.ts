/**
 * The path and query of a request, read from `request.url` without parsing the URL again.
 *
 * Why: the router needs the path of every request and the authorization endpoint the query of
 * every GET; `new URL(request.url)` parses the whole string again (several µs with the long
 * authorization query, issue 11), though a Request's `url` is already a serialized URL.
 *
 * When the slicing is exact: `Request.prototype.url` returns the URL serializer's output (Fetch
 * §5.4, WHATWG URL §4.5). For http and https it is `scheme "://" [userinfo "@"] host [":" port]
 * path ["?" query] ["#" fragment]`, where userinfo percent-encodes "/", "?", "#" and "@", a host
 * cannot contain them, the path percent-encodes "?" and "#" and the query percent-encodes "#". So
 * the first "/" after "://" starts the path, the first "?" or "#" after it ends it, and the query
 * runs from that "?" to the next "#"; parsing the query with URLSearchParams is what
 * `URL.searchParams` does with it. Any other object (a subclass or an instance that defines its
 * own `url`, another scheme) goes through `new URL` exactly as before.
 */

const nativeUrlGetter = Object.getOwnPropertyDescriptor(Request.prototype, "url")?.get;

/** Per prototype: whether `url` resolves to Request.prototype's own getter (no override on the way). */
const prototypeHasNativeUrl = new WeakMap<object, boolean>();

function urlGetterOf(prototype: object | null): (() => unknown) | undefined {
  for (let p = prototype; p !== null; p = Object.getPrototypeOf(p)) {
    const descriptor = Object.getOwnPropertyDescriptor(p, "url");
    if (descriptor) return descriptor.get;
  }
  return undefined;
}

/** `request.url` when it is the platform's serialization of an http(s) URL, else undefined. */
function serializedHttpUrl(request: Request): { url: string; pathStart: number } | undefined {
  const prototype = Object.getPrototypeOf(request) as object | null;
  if (prototype === null) return undefined;
  let native = prototypeHasNativeUrl.get(prototype);
  if (native === undefined) {
    native = nativeUrlGetter !== undefined && urlGetterOf(prototype) === nativeUrlGetter;
    prototypeHasNativeUrl.set(prototype, native);
  }
  if (!native || Object.hasOwn(request, "url")) return undefined;
  const url = request.url;
  const authorityStart = url.startsWith("https://") ? 8 : url.startsWith("http://") ? 7 : -1;
  if (authorityStart < 0) return undefined;
  const pathStart = url.indexOf("/", authorityStart);
  return pathStart < 0 ? undefined : { url, pathStart };
}

/** Where the path ends: at the query's "?" or the fragment's "#", whichever comes first. */
function pathEnd(url: string, pathStart: number): number {
  for (let i = pathStart; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x3f /* ? */ || c === 0x23 /* # */) return i;
  }
  return url.length;
}

/** `new URL(request.url).pathname`; throws as it does for a URL that does not parse. */
export function requestPathname(request: Request): string {
  const serialized = serializedHttpUrl(request);
  if (!serialized) return new URL(request.url).pathname;
  const { url, pathStart } = serialized;
  return url.slice(pathStart, pathEnd(url, pathStart));
}

/** `new URL(request.url).searchParams`: the query's name/value pairs, in order. */
export function requestQuery(request: Request): URLSearchParams {
  const serialized = serializedHttpUrl(request);
  if (!serialized) return new URL(request.url).searchParams;
  const { url, pathStart } = serialized;
  const end = pathEnd(url, pathStart);
  if (end === url.length || url.charCodeAt(end) !== 0x3f) return new URLSearchParams();
  const fragment = url.indexOf("#", end + 1);
  // From the "?" itself: the constructor drops one leading "?", so a query that starts with "?"
  // keeps it, as `URL.searchParams` does.
  return new URLSearchParams(url.slice(end, fragment < 0 ? url.length : fragment));
}
