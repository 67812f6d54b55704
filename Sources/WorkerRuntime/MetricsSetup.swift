import Logging
import Metrics
import Prometheus
import Synchronization

/// Routes the process's swift-metrics into the registry its `/metrics` serves, once.
///
/// Our own metrics are registered on a registry passed explicitly (`WorkerMetrics`,
/// `GatewayMetrics`), so tests can run several runtimes in one process. What records through
/// the global `MetricsSystem` instead — the OTLP exporter's `astro_trace_spans_*` counters, and
/// any library's metrics — was lost (swift-metrics' default is a no-op) until a process
/// bootstrapped it: every executable that serves `/metrics` calls this first, before making the
/// exporter, whose counters bind to the factory in force when they are made.
public enum MetricsSetup {
    private static let done = Mutex(false)

    /// Bootstraps `MetricsSystem` with a `PrometheusMetricsFactory` on `registry`. swift-metrics
    /// traps on a second bootstrap, so only the first call in a process does it (a test that runs
    /// a main twice keeps the first registry); later calls log that and do nothing.
    /// - Returns: whether this call bootstrapped the metrics system.
    @discardableResult
    public static func bootstrap(registry: PrometheusCollectorRegistry, logger: Logger) -> Bool {
        let first = done.withLock { done -> Bool in
            defer { done = true }
            return !done
        }
        guard first else {
            logger.notice("metrics were already set up in this process; keeping the first registry")
            return false
        }
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return true
    }
}
