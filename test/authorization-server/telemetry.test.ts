/**
 * OpenTelemetry (src/shared/telemetry.ts) with a real SDK installed the way an application would:
 * a span per request named by route with the OAuth error code of a refusal, spans for store
 * operations in the same trace, a span for an outbound metadata-document fetch, the request
 * duration histogram with the same attributes, and no credential in any attribute.
 */
import { metrics } from "@opentelemetry/api";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  codeTokens,
  formRequest,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  REDIRECT,
  RESOURCE,
} from "./helpers.js";

const spans = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({
  exporter: metricExporter,
  exportIntervalMillis: 3_600_000,
});
const tracerProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const meterProvider = new MeterProvider({ readers: [reader] });

beforeAll(() => {
  tracerProvider.register();
  metrics.setGlobalMeterProvider(meterProvider);
});

afterAll(async () => {
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
});

describe("OpenTelemetry", () => {
  it("traces requests, store operations and outbound fetches, with the OAuth error code", async () => {
    const t = await makeServer({
      clientMetadataDocuments: { timeoutMs: 1000 },
    });
    const secrets: string[] = [];
    const tokens = await codeTokens(t);
    secrets.push(String(tokens.access_token), String(tokens.refresh_token));
    const replayed = await issueCode(t);
    secrets.push(replayed.code, replayed.verifier);
    const refused = await t.server.fetch(
      formRequest("/token", {
        grant_type: "authorization_code",
        code: "not-a-code-we-issued-0123456789",
        code_verifier: replayed.verifier,
        client_id: PUBLIC_CLIENT,
        redirect_uri: REDIRECT,
        resource: RESOURCE,
      }),
    );
    expect(refused.status).toBe(400);
    // A URL client id whose document cannot be fetched: an outbound fetch span with an error.
    await t.server.fetch(
      new Request(
        `https://as.example.test/authorize?${new URLSearchParams({
          response_type: "code",
          client_id: "https://gatehouse-test.invalid/client.json",
          redirect_uri: "https://gatehouse-test.invalid/cb",
          code_challenge: "x".repeat(43),
          code_challenge_method: "S256",
          resource: RESOURCE,
        })}`,
      ),
    );

    const finished = spans.getFinishedSpans();
    const tokenSpans = finished.filter((s) => s.name === "POST /token");
    expect(tokenSpans).toHaveLength(2);
    const [ok, bad] = tokenSpans;
    expect(ok?.attributes).toMatchObject({ "http.route": "/token", "http.response.status_code": 200 });
    expect(ok?.attributes["oauth.error"]).toBeUndefined();
    expect(bad?.attributes).toMatchObject({
      "http.response.status_code": 400,
      "oauth.error": "invalid_grant",
    });
    const storeSpans = finished.filter(
      (s) => s.name.startsWith("gatehouse.store ") && s.spanContext().traceId === ok?.spanContext().traceId,
    );
    expect(storeSpans.map((s) => s.attributes["db.operation.name"])).toContain("redeemAuthorizationCode");
    const fetchSpan = finished.find((s) => s.name === "GET client_metadata_document");
    expect(fetchSpan?.attributes["server.address"]).toBe("gatehouse-test.invalid");
    expect(fetchSpan?.status.code).toBe(2); // SpanStatusCode.ERROR

    await reader.forceFlush();
    const durations = metricExporter
      .getMetrics()
      .flatMap((r) => r.scopeMetrics)
      .flatMap((s) => s.metrics)
      .filter((m) => m.descriptor.name === "gatehouse.authorization_server.request.duration");
    const points = durations.flatMap((m) => m.dataPoints as { attributes: Record<string, unknown> }[]);
    expect(points.some((p) => p.attributes["oauth.error"] === "invalid_grant")).toBe(true);

    const everything = JSON.stringify(finished.map((s) => [s.name, s.attributes])) + JSON.stringify(points);
    for (const secret of secrets) expect(everything.includes(secret)).toBe(false);
  });
});
