import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** One registry per process: services in the same process report into it with a `service` label. */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: "gyre_" });

export const httpRequests = new Counter({
  name: "gyre_http_requests_total",
  help: "HTTP requests by service, operation and status.",
  labelNames: ["service", "operation", "status"] as const,
  registers: [metricsRegistry],
});

export const httpDuration = new Histogram({
  name: "gyre_http_request_duration_seconds",
  help: "HTTP request duration by service and operation.",
  labelNames: ["service", "operation"] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [metricsRegistry],
});

export async function renderMetrics(): Promise<{ contentType: string; text: string }> {
  return { contentType: metricsRegistry.contentType, text: await metricsRegistry.metrics() };
}
