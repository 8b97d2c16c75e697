/**
 * OpenTelemetry installed after the authorization server started (src/shared/telemetry.ts runs
 * requests and store calls bare while no provider is registered): a meter provider alone brings
 * the request histogram without any tracer, and a tracer provider registered later still gets the
 * request and store spans from its first request on.
 */
import { metrics } from "@opentelemetry/api";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";
import { afterAll, describe, expect, it } from "vitest";
import { codeTokens, makeServer } from "./helpers.js";

const spans = new InMemorySpanExporter();
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({
  exporter: metricExporter,
  exportIntervalMillis: 3_600_000,
});
const tracerProvider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
const meterProvider = new MeterProvider({ readers: [reader] });

afterAll(async () => {
  await tracerProvider.shutdown();
  await meterProvider.shutdown();
});

async function tokenRequestsMeasured(): Promise<number> {
  await reader.forceFlush();
  // Cumulative temporality: the latest export holds the counts so far.
  return metricExporter
    .getMetrics()
    .slice(-1)
    .flatMap((r) => r.scopeMetrics)
    .flatMap((s) => s.metrics)
    .filter((m) => m.descriptor.name === "gatehouse.authorization_server.request.duration")
    .flatMap((m) => m.dataPoints as { attributes: Record<string, unknown>; value: { count: number } }[])
    .filter((p) => p.attributes["http.route"] === "/token")
    .reduce((sum, p) => sum + p.value.count, 0);
}

describe("OpenTelemetry registered after start-up", () => {
  it("no provider: flows work; a meter provider alone records requests; a later tracer provider gets spans", async () => {
    const t = await makeServer();
    await codeTokens(t);

    metrics.setGlobalMeterProvider(meterProvider);
    await codeTokens(t);
    expect(await tokenRequestsMeasured()).toBe(1);
    expect(spans.getFinishedSpans()).toHaveLength(0);

    tracerProvider.register();
    await codeTokens(t);
    const finished = spans.getFinishedSpans();
    const token = finished.find((s) => s.name === "POST /token");
    expect(token?.attributes["http.response.status_code"]).toBe(200);
    const storeOperations = finished
      .filter(
        (s) =>
          s.name.startsWith("gatehouse.store ") && s.spanContext().traceId === token?.spanContext().traceId,
      )
      .map((s) => s.attributes["db.operation.name"]);
    expect(storeOperations).toContain("redeemAuthorizationCode");
    expect(await tokenRequestsMeasured()).toBe(2);
  });
});
