/**
 * OpenTelemetry through `@opentelemetry/api` only (DESIGN.md "Observability"): spans and metrics
 * are no-ops until the application installs an SDK, and then go wherever it exports them. Nothing
 * here reads a request body or a header value: attributes are routes, methods, statuses, OAuth
 * error codes, store operation names and hosts, never a credential.
 */
import {
  type Attributes,
  createNoopMeter,
  type Histogram,
  type MeterProvider,
  metrics,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

/** The instrumentation scope every Gatehouse span and metric is reported under. */
export const INSTRUMENTATION_SCOPE = "gatehouse";

/** Attribute carrying the OAuth error code (RFC 6749 §5.2 `error`) of a refused request. */
export const OAUTH_ERROR_ATTRIBUTE = "oauth.error";

// Looked up on each use, not cached at import: an SDK registered after this module loaded still
// receives the spans (the global tracer provider is a proxy, so this is a map lookup).
const tracer = () => trace.getTracer(INSTRUMENTATION_SCOPE);

/**
 * Whether the application has installed a tracer or meter provider. Without one every span and
 * histogram is a no-op, yet making them (attributes, closures, context, a span per store call) cost
 * about a tenth of a token request; so the request and store wrappers run their work bare until a
 * provider appears. Asked on every call, like {@link tracer}: an SDK registered after start-up is
 * seen from its first request on.
 *
 * A tracer provider is registered when the API's global proxy has a delegate (`getDelegateTracer`
 * answers undefined otherwise); a global provider of another shape (another copy of the API)
 * counts as registered. A meter provider is registered when its meter is not the API's no-op meter.
 */
export function telemetryInstalled(): boolean {
  const tracerProvider = trace.getTracerProvider();
  if (!(tracerProvider instanceof ProxyTracerProvider)) return true;
  if (tracerProvider.getDelegateTracer(INSTRUMENTATION_SCOPE) !== undefined) return true;
  return metrics.getMeterProvider().getMeter(INSTRUMENTATION_SCOPE) !== createNoopMeter();
}

interface Instruments {
  requestDuration: Histogram;
  storeDuration: Histogram;
  fetchDuration: Histogram;
}

/**
 * The histograms, made once per meter provider: the metrics API has no proxy provider, so
 * instruments made before the application registered its SDK would stay no-ops forever.
 */
let instruments: { provider: MeterProvider; made: Instruments } | undefined;

function histograms(): Instruments {
  const provider = metrics.getMeterProvider();
  if (instruments?.provider === provider) return instruments.made;
  const meter = provider.getMeter(INSTRUMENTATION_SCOPE);
  const made = {
    requestDuration: meter.createHistogram("gatehouse.authorization_server.request.duration", {
      unit: "ms",
      description: "Authorization server requests, by route, method, status and OAuth error code",
    }),
    storeDuration: meter.createHistogram("gatehouse.store.operation.duration", {
      unit: "ms",
      description: "Authorization store operations, by operation and outcome",
    }),
    fetchDuration: meter.createHistogram("gatehouse.outbound_fetch.duration", {
      unit: "ms",
      description: "Outbound fetches (client metadata documents), by host and outcome",
    }),
  };
  instruments = { provider, made };
  return made;
}

function endWithError(span: Span, error: unknown): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : "error" });
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") span.setAttribute("error.type", code);
  span.end();
}

/**
 * Runs one authorization-server request in a server span named after its route; `finish` reports
 * the response's status and OAuth error code (when refused), and the duration histogram records the
 * same attributes.
 */
export async function traceRequest(
  route: string,
  method: string,
  run: (finish: (status: number, oauthError?: string) => void) => Promise<Response>,
): Promise<Response> {
  if (!telemetryInstalled()) return run(ignoreFinish);
  const started = performance.now();
  return tracer().startActiveSpan(
    `${method} ${route}`,
    { kind: SpanKind.SERVER, attributes: { "http.route": route, "http.request.method": method } },
    async (span) => {
      const attributes: Attributes = { "http.route": route, "http.request.method": method };
      try {
        const response = await run((status, oauthError) => {
          attributes["http.response.status_code"] = status;
          if (oauthError !== undefined) attributes[OAUTH_ERROR_ATTRIBUTE] = oauthError;
        });
        span.setAttributes(attributes);
        if ((attributes["http.response.status_code"] as number) >= 500) {
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
        return response;
      } catch (error) {
        endWithError(span, error);
        throw error;
      } finally {
        histograms().requestDuration.record(performance.now() - started, attributes);
      }
    },
  );
}

function ignoreFinish(): void {}

/** Runs one store operation in a client span (`gatehouse.store <operation>`). */
export function traceStoreOperation<T>(operation: string, run: () => Promise<T>): Promise<T> {
  return clientSpan(
    `gatehouse.store ${operation}`,
    { "db.operation.name": operation },
    () => histograms().storeDuration,
    run,
  );
}

/** Runs one outbound fetch in a client span; `host` only, never the path or query. */
export function traceOutboundFetch<T>(purpose: string, host: string, run: () => Promise<T>): Promise<T> {
  return clientSpan(
    `GET ${purpose}`,
    { "gatehouse.fetch.purpose": purpose, "server.address": host },
    () => histograms().fetchDuration,
    run,
  );
}

/** One outgoing call in a client span, its duration recorded with its outcome (`ok` or `error`). */
async function clientSpan<T>(
  name: string,
  attributes: Attributes,
  histogram: () => { record(value: number, attributes: Attributes): void },
  run: () => Promise<T>,
): Promise<T> {
  if (!telemetryInstalled()) return run();
  const started = performance.now();
  const span = tracer().startSpan(name, { kind: SpanKind.CLIENT, attributes });
  let outcome = "ok";
  try {
    const result = await run();
    span.end();
    return result;
  } catch (error) {
    outcome = "error";
    endWithError(span, error);
    throw error;
  } finally {
    histogram().record(performance.now() - started, { ...attributes, outcome });
  }
}

/**
 * The store with every method call in a span (traceStoreOperation). Methods are wrapped once, on
 * first use; properties that are not functions pass through.
 */
export function tracedStore<S extends object>(store: S): S {
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function" || typeof property !== "string") return value;
      let wrapper = wrapped.get(property);
      if (wrapper === undefined) {
        wrapper = (...args: unknown[]) => {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          // Only asynchronous operations are store round trips; a synchronous helper is returned as
          // is, and so is everything while no telemetry is installed.
          return result instanceof Promise && telemetryInstalled()
            ? traceStoreOperation(property, () => result)
            : result;
        };
        wrapped.set(property, wrapper);
      }
      return wrapper;
    },
  });
}
