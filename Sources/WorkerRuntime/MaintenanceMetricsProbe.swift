import AstroDomain
import Foundation
import Postgres
import Synchronization

/// Retention's deletions, the dead letters dropped and the maintenance runs as metrics, read
/// from what the maintenance task recorded (migration 0022's `maintenance_totals`, and
/// `maintenance_runs` for the last success). The task is a short CronJob run that no scrape can
/// reliably catch, so a long-running worker (the billing-worker) exports its figures:
/// - `astro_retention_deleted_rows_total{table}`,
/// - `astro_dead_letters_dropped_total{queue, reason}`,
/// - `astro_maintenance_runs_total{outcome}`: running totals kept by the database, never reset,
///   so each is the same exact figure in every replica and after a restart (query them with
///   `max without (instance, pod)`, not `sum`);
/// - `astro_maintenance_last_success_timestamp_seconds`: when the last run that did not fail
///   finished (absent until one has).
///
/// Label values come from closed sets (`MetricLabel`); a recorded name outside them is `other`.
public enum MaintenanceMetricsProbe {
    /// The default time between readings: runs are hourly, so a minute is fresh enough.
    public static let defaultInterval = Duration.seconds(60)

    /// The probe. Counters are raised to the database's totals: each series appears only once it
    /// has been read (never at a provisional 0 that the first reading would turn into a jump
    /// Prometheus counts as an increase), and only ever goes up.
    public static func probe(interval: Duration = defaultInterval) -> MetricsProbe {
        let exported = Exported()
        return MetricsProbe(name: "maintenance", interval: interval) { pool, metrics in
            let (totals, lastSuccess) = try await pool.withConnection { database in
                let totals = try database.query(
                    "SELECT counter, subject, reason, total FROM maintenance_totals ORDER BY counter, subject, reason LIMIT 1000"
                ).map {
                    Total(
                        counter: try $0.decode(String.self, "counter"),
                        subject: try $0.decode(String.self, "subject"),
                        reason: try $0.decode(String.self, "reason"),
                        total: try $0.decode(Int64.self, "total")
                    )
                }
                let last = try database.query(
                    """
                    SELECT extract(epoch FROM max(finished_at))::float8 AS at FROM maintenance_runs
                    WHERE NOT dry_run AND outcome <> 'failed'
                    """
                ).first?.decode(Double?.self, "at")
                return (totals, last)
            }
            exported.raise(to: totals, metrics: metrics)
            if let lastSuccess { metrics.set(.maintenanceLastSuccess, to: lastSuccess) }
        }
    }

    struct Total: Sendable, Hashable {
        var counter: String
        var subject: String
        var reason: String
        var total: Int64
    }

    /// The series and labels a recorded total is exported as; nil for a counter of no metric.
    static func series(of total: Total) -> (metric: MetricName, labels: [String])? {
        switch total.counter {
        case "deleted_rows":
            return (.retentionDeletedRows, [MetricLabel.bounded(total.subject, among: MetricLabel.retentionTables)])
        case "dead_letters_dropped":
            return (
                .deadLettersDropped,
                [
                    MetricLabel.bounded(total.subject, among: MetricLabel.deadLetterQueues),
                    MetricLabel.bounded(total.reason, among: MetricLabel.deadLetterDropReasons),
                ]
            )
        case "runs":
            return (.maintenanceRuns, [MetricLabel.bounded(total.subject, among: MetricLabel.maintenanceOutcomes)])
        default:
            return nil
        }
    }

    /// What each counter series was raised to so far in this process.
    final class Exported: Sendable {
        private struct Key: Hashable {
            var metric: MetricName
            var labels: [String]
        }
        private let values = Mutex<[Key: Double]>([:])

        func raise(to totals: [Total], metrics: WorkerMetrics) {
            // Several recorded names can fall under `other`: their totals add up.
            var wanted: [Key: Double] = [:]
            for total in totals {
                guard let series = MaintenanceMetricsProbe.series(of: total) else { continue }
                wanted[Key(metric: series.metric, labels: series.labels), default: 0] += Double(max(total.total, 0))
            }
            let increments: [(Key, Double)] = values.withLock { values in
                var increments: [(Key, Double)] = []
                for (key, value) in wanted {
                    let delta = value - values[key, default: 0]
                    // A total never shrinks; one that did (restored database) is not followed down.
                    guard delta > 0 || values[key] == nil else { continue }
                    values[key] = max(value, values[key, default: 0])
                    increments.append((key, max(delta, 0)))
                }
                return increments
            }
            for (key, delta) in increments {
                metrics.record([BusinessMeasurement(key.metric, key.labels, amount: delta)])
            }
        }
    }
}
