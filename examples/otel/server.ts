/**
 * Gatehouse's OpenTelemetry spans and metrics, exported to the console.
 *
 * Gatehouse depends on `@opentelemetry/api` only: without an SDK every span and metric is a no-op.
 * This example installs the SDK the way an application would (here `@opentelemetry/sdk-trace-node`
 * and `@opentelemetry/sdk-metrics` with console exporters; use OTLP exporters in production),
 * starts an authorization server on 127.0.0.1, sends one good and one refused token request, and
 * prints what was recorded: a span per request (`POST /token`, with `oauth.error` on the refusal),
 * a span per store operation in the same trace, and the request-duration histogram.
 *
 *   npm run build && node --import ./scripts/typescript.mjs examples/otel/server.ts
 */
import { createHash } from "node:crypto";
import { metrics } from "@opentelemetry/api";
import {
  ConsoleMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { ConsoleSpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { createAuthorizationServer } from "gatehouse-auth/authorization-server";
import { listen } from "gatehouse-auth/node";
import { createMemoryStore } from "gatehouse-auth/storage/memory";

// 1. Install the SDK before the server handles requests (the tracer provider also installs the
//    async context manager that parents store spans under the request span).
const tracerProvider = new NodeTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())],
});
tracerProvider.register();
const metricReader = new PeriodicExportingMetricReader({
  exporter: new ConsoleMetricExporter(),
  exportIntervalMillis: 60_000,
});
const meterProvider = new MeterProvider({ readers: [metricReader] });
metrics.setGlobalMeterProvider(meterProvider);

// 2. An authorization server with one confidential client (client credentials).
const CLIENT_ID = "reporting-job";
const CLIENT_SECRET = "example-secret-for-this-demo-only";
const RESOURCE = "http://127.0.0.1:9001/mcp";
let handler: (request: Request, info?: { clientAddress?: string }) => Promise<Response> = async () =>
  new Response(null, { status: 503 });
const http = await listen((request, info) => handler(request, info));
const server = await createAuthorizationServer({
  issuer: http.url,
  allowInsecureLoopback: true,
  store: createMemoryStore(),
  resources: [{ uri: RESOURCE, scopes: ["reports:read"] }],
  maintenanceIntervalMs: 0,
  clients: [
    {
      clientId: CLIENT_ID,
      source: "preregistered",
      redirectUris: [],
      grantTypes: ["client_credentials"],
      responseTypes: [],
      tokenEndpointAuthMethod: "client_secret_post",
      clientSecretHash: createHash("sha256").update(CLIENT_SECRET).digest("base64url"),
      metadata: {},
      createdAt: Date.now(),
    },
  ],
});
handler = server.fetch;

// 3. One token request that succeeds and one that is refused (wrong secret → invalid_client).
for (const secret of [CLIENT_SECRET, "a-wrong-secret"]) {
  const response = await fetch(`${http.url}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: CLIENT_ID,
      client_secret: secret,
      resource: RESOURCE,
    }),
  });
  console.log(`POST /token → ${response.status}`);
}

// 4. Flush the metrics to the console and stop.
await metricReader.forceFlush();
await server.close();
await http.close();
await tracerProvider.shutdown();
await meterProvider.shutdown();
