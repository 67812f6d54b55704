import Prometheus
import Synchronization

/// The gateway's metrics, in the Prometheus text format on `/metrics`: requests by route and
/// status class, their durations, and publishes by outcome.
public final class GatewayMetrics: Sendable {
    /// Where every metric of this gateway is registered.
    public let registry = PrometheusCollectorRegistry()
    private let duration: DurationHistogram

    /// A fresh registry with the request duration histogram.
    public init() {
        duration = registry.makeDurationHistogram(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "request_duration",
                unitName: "seconds",
                helpText: "Time from a request's head to its answer"
            ),
            buckets: [
                .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                .seconds(5), .seconds(10),
            ]
        )
    }

    /// Counts one answered request: its route pattern (never the raw path) and status.
    public func recordRequest(route: String, status: Int, duration elapsed: Duration) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "requests",
                unitName: "total",
                helpText: "Requests answered, by route and status class"
            ),
            labels: [("route", route), ("status", "\(status / 100)xx")]
        ).increment()
        duration.record(elapsed)
    }

    /// Counts one publish to the broker by outcome (`confirmed`, `failed`).
    public func recordPublish(outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "publishes",
                unitName: "total",
                helpText: "Jobs published to astro.gateway-requests, by outcome"
            ),
            labels: [("outcome", outcome)]
        ).increment()
    }

    /// Counts one App Store notification by outcome: `queued`, `malformed` (400) or
    /// `unverified` (403, its signature or chain does not verify).
    public func recordAppStoreNotification(outcome: String) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "appstore_notifications",
                unitName: "total",
                helpText: "App Store notifications received, by outcome (queued, malformed, unverified)"
            ),
            labels: [("outcome", outcome)]
        ).increment()
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> String { registry.emitToString() }
}
