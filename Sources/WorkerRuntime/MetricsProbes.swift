import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import ServiceLifecycle

/// A reading a worker takes periodically from its database and exposes as gauges: figures no job
/// produces (how old the oldest unsent outbox row is, whether the ledger balances).
///
/// A probe's query must cost the same whatever the tables' size, or run rarely enough that it
/// does not matter (its `interval`); a failed reading is logged and leaves the last value, and
/// `astro_probe_last_success_timestamp_seconds{probe}` shows how fresh the value is.
public struct MetricsProbe: Sendable {
    /// The probe's name: the `probe` label of its freshness gauge (a constant, never input).
    public var name: String
    /// Time between readings (at least one second).
    public var interval: Duration
    /// Takes one reading and sets the probe's gauges.
    public var read: @Sendable (PostgresPool, WorkerMetrics) async throws -> Void

    /// - Parameters:
    ///   - name: a constant naming the probe.
    ///   - interval: clamped to 1 s … 1 day.
    ///   - read: takes one reading; what it throws is logged and the next reading is tried later.
    public init(
        name: String,
        interval: Duration,
        read: @escaping @Sendable (PostgresPool, WorkerMetrics) async throws -> Void
    ) {
        self.name = name
        self.interval = min(max(interval, .seconds(1)), .seconds(86_400))
        self.read = read
    }

    /// The age of this worker's oldest unsent outbox row (`astro_outbox_oldest_unsent_age_seconds`,
    /// 0 when none). A worker's role sees only its own rows, so each worker reports the lag of
    /// what it produced; the alert takes the maximum. The partial index `outbox_pending_idx`
    /// (unsent rows, by id) makes it one index probe however large the outbox is.
    public static func outboxLag(interval: Duration = .seconds(15)) -> MetricsProbe {
        MetricsProbe(name: "outbox-lag", interval: interval) { pool, metrics in
            let age = try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS age
                    FROM (SELECT created_at FROM outbox WHERE sent_at IS NULL ORDER BY id LIMIT 1) AS oldest
                    """
                ).first?.decode(Double.self, "age") ?? 0
            }
            metrics.set(.outboxOldestUnsentAge, to: max(age, 0))
        }
    }
}

/// Runs a worker's probes, each on its own interval, until graceful shutdown.
final class ProbeService: Service, Sendable {
    private let probes: [MetricsProbe]
    private let pool: PostgresPool
    private let metrics: WorkerMetrics
    private let logger: Logger

    init(probes: [MetricsProbe], pool: PostgresPool, metrics: WorkerMetrics, logger: Logger) {
        self.probes = probes
        self.pool = pool
        self.metrics = metrics
        self.logger = logger
    }

    func run() async throws {
        let (pool, metrics, logger) = (self.pool, self.metrics, self.logger)
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                for probe in self.probes {
                    group.addTask {
                        while !Task.isCancelled {
                            do {
                                try await probe.read(pool, metrics)
                                metrics.set(
                                    .probeLastSuccess,
                                    [probe.name],
                                    to: Date().timeIntervalSince1970
                                )
                            } catch is CancellationError {
                                return
                            } catch {
                                logger.warning(
                                    "metrics probe failed; its gauges keep their last value",
                                    metadata: ["probe": "\(probe.name)", LogKey.reason: "\(error)"]
                                )
                            }
                            try? await Task.sleep(for: probe.interval)
                        }
                    }
                }
            }
        }
    }
}
