import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import StoreKitVerification
import WorkerRuntime

/// The billing-worker's business measurements, counted by the runtime once the job's transaction
/// committed (`JobOutcome.measurements`), with label values from closed sets.
enum BillingMeasurements {
    /// A purchase recorded for the first time: its credits issued. A restore or a repeated
    /// delivery issues nothing and counts nothing.
    static func verified(_ grant: PurchaseGrant) -> [BusinessMeasurement] {
        guard !grant.alreadyRecorded else { return [] }
        var measurements = [BusinessMeasurement(.purchasesVerified)]
        if !grant.credits.isEmpty {
            let area = MetricLabel.bounded(grant.area?.rawValue ?? "any", among: MetricLabel.creditAreas)
            measurements.append(BusinessMeasurement(.creditsIssued, [area], amount: Double(grant.credits.count)))
        }
        return measurements
    }

    /// A purchase refused, by reason: the handler's own codes as they are, StoreKit verification
    /// failures as `verification`, App Store Server API failures as `appstore`, anything else `other`.
    static func rejected(code: String) -> [BusinessMeasurement] {
        [BusinessMeasurement(.purchasesRejected, [rejectionReason(code)])]
    }

    /// The `reason` label of a rejected purchase's code.
    static func rejectionReason(_ code: String) -> String {
        if MetricLabel.purchaseRejectionReasons.contains(code) { return code }
        if VerificationFailureReason(rawValue: code) != nil { return "verification" }
        if AppStoreAPIError.Kind(rawValue: code) != nil { return "appstore" }
        return MetricLabel.other
    }

    /// One credit spent on a report of `area`.
    static func consumed(area: ReportArea) -> [BusinessMeasurement] {
        [BusinessMeasurement(.creditsConsumed, [MetricLabel.bounded(area.rawValue, among: MetricLabel.creditAreas)])]
    }

    /// One credit given back for an unwritten report of `area`; `revoked` when the App Store had
    /// refunded its purchase meanwhile, so the credit went straight out again.
    static func refunded(area: ReportArea, revoked: Bool) -> [BusinessMeasurement] {
        var measurements = [
            BusinessMeasurement(.creditsRefunded, [MetricLabel.bounded(area.rawValue, among: MetricLabel.creditAreas)])
        ]
        if revoked { measurements.append(BusinessMeasurement(.creditsRevoked)) }
        return measurements
    }

    /// What an App Store notification did to credits: revoked (REFUND, REVOKE) or restored
    /// (REFUND_REVERSED).
    static func notification(_ effect: NotificationEffect) -> [BusinessMeasurement] {
        guard !effect.credits.isEmpty else { return [] }
        switch effect.action {
        case "revoked": return [BusinessMeasurement(.creditsRevoked, amount: Double(effect.credits.count))]
        case "restored": return [BusinessMeasurement(.creditsRestored, amount: Double(effect.credits.count))]
        default: return []
        }
    }
}

/// The ledger audit as a metric: every `interval`, the number of users whose ledger and credits
/// table disagree (`astro_ledger_unbalanced_users`; 0 is the only healthy value).
///
/// The `credit_audit` view aggregates the whole ledger, so its cost grows with the ledger: the
/// default interval is 5 minutes (`LEDGER_AUDIT_INTERVAL_SECONDS`, 10 s … 1 day), and the query
/// runs under a statement timeout so a huge ledger cannot hold a connection for long.
public enum LedgerAuditProbe {
    /// The default time between audits.
    public static let defaultInterval = Duration.seconds(300)

    /// The audit probe, its interval from `LEDGER_AUDIT_INTERVAL_SECONDS` (unset: 300).
    /// - Throws: `ConfigurationError` when the value is not whole seconds in 10…86400.
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> MetricsProbe {
        guard let text = environment["LEDGER_AUDIT_INTERVAL_SECONDS"], !text.isEmpty else {
            return probe(interval: defaultInterval)
        }
        guard let seconds = Int(text), (10...86_400).contains(seconds) else {
            throw ConfigurationError(
                variable: "LEDGER_AUDIT_INTERVAL_SECONDS",
                problem: "expected whole seconds from 10 to 86400, got \(text.prefix(40))"
            )
        }
        return probe(interval: .seconds(seconds))
    }

    /// The audit probe with this interval.
    public static func probe(interval: Duration) -> MetricsProbe {
        MetricsProbe(name: "ledger-audit", interval: interval) { pool, metrics in
            let unbalanced = try await pool.withConnection { database in
                try database.execute("BEGIN")
                defer { _ = try? database.execute("ROLLBACK") }
                try database.execute("SET LOCAL statement_timeout = '30s'")
                return try database.query(
                    "SELECT count(*)::int AS n FROM credit_audit WHERE ledger_available <> available"
                ).first?.decode(Int.self, "n") ?? 0
            }
            metrics.set(.ledgerUnbalancedUsers, to: Double(unbalanced))
        }
    }
}
