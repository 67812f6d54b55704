import AstroDomain
import Foundation
import Testing

/// Issue 32: the OTLP exporter counts what it sends through swift-metrics' `MetricsSystem`, which
/// no executable bootstrapped, so `astro_trace_spans_*` never reached `/metrics` although the
/// README lists them. Each main now routes `MetricsSystem` into the registry its `/metrics` serves
/// (`MetricsSetup`); here a real gateway process exports its request spans and its metrics port
/// must show them counted — sent to a collector that accepts them, and to one that is not there.
@Suite(.timeLimit(.minutes(2)))
struct TraceMetricsTests {
    /// Requests whose spans the gateway exports (each is one server span; 401 without a token).
    static func sendRequests(_ base: String, count: Int = 5) async throws {
        for _ in 0..<count {
            _ = try await GatewayHarness.request("GET", "\(base)/v1/jobs/\(UUID().uuidString.lowercased())")
        }
    }

    static func value(_ metric: MetricName, in text: String) -> Double? {
        BusinessMetricsJourneyTests.value(metric.rawValue, in: text)
    }

    @Test func exportedSpansAreCountedOnTheGatewaysMetrics() async throws {
        let collector = try TraceJourneyTests.Receiver()
        defer { collector.server.stop() }
        let gateway = try await GatewayHarness.launch(
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.server.baseURL.absoluteString,
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            ],
            label: "trace-metrics-exported"
        )
        defer { gateway.processes.stop() }
        try await Self.sendRequests(gateway.base)
        // The counter moves once the collector answered: wait until it caught up with what the
        // collector holds (the metrics port itself makes no spans).
        let metrics = try await RuntimeTestEnvironment.eventually(
            "astro_trace_spans_exported_total on the gateway's /metrics equal to the spans the collector got",
            timeout: .seconds(15),
            observe: { try await GatewayHarness.rawGet(GatewayHarness.metricsURL(gateway.base)) },
            until: { text in
                let received = collector.all.count
                return received >= 5 && Self.value(.traceSpansExported, in: text) == Double(received)
            }
        )
        #expect(collector.rejected == 0)
        #expect(Self.value(.traceSpansFailed, in: metrics) == 0, "\(metrics)")
        #expect(Self.value(.traceSpansDropped, in: metrics) == 0, "\(metrics)")
    }

    @Test func spansThatCannotBeSentAreCountedAsFailed() async throws {
        // Port 1 on the loopback: nothing listens, every request is refused (then retried once).
        let gateway = try await GatewayHarness.launch(
            environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_BSP_SCHEDULE_DELAY": "100"],
            label: "trace-metrics-failed"
        )
        defer { gateway.processes.stop() }
        try await Self.sendRequests(gateway.base)
        let metrics = try await RuntimeTestEnvironment.eventually(
            "astro_trace_spans_failed_total >= 5 on the gateway's /metrics",
            timeout: .seconds(15),
            observe: { try await GatewayHarness.rawGet(GatewayHarness.metricsURL(gateway.base)) },
            until: { (Self.value(.traceSpansFailed, in: $0) ?? 0) >= 5 }
        )
        #expect(Self.value(.traceSpansExported, in: metrics) == 0, "\(metrics)")
    }
}
