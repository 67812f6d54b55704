import Foundation

/// The per-user bound on chart results computed (not found cached) by `chart.synastry`,
/// `chart.transits`, `chart.return` and `chart.render` (issue 29, F7): each costs up to a third of
/// a CPU-second and is stored, so one user at the request rate limit could otherwise fill the
/// database (a new transit range was ~412 KB; 90 GB a day).
///
/// A result counts when its job succeeded with `cached: false` within the last 24 hours
/// (`chart_results_computed`, migration 0034, the one query both sides run, on the `jobs` rows,
/// which stay when a profile or a result is deleted). The gateway checks it before publishing
/// (429 `chart-quota-exceeded` with `Retry-After`), the chart-worker again before computing and
/// before storing (the job is dead-lettered with the same code), so `astroctl` and direct
/// publishes are bounded too. A request whose result is already stored costs nothing and is
/// served by the worker whatever the count; the gateway, which cannot tell, refuses it too at
/// the quota (the stored result stays readable at `GET /v1/chart-results/{id}`).
public struct ChartResultQuota: Sendable, Hashable {
    /// The environment variable, read by the gateway and the chart-worker.
    public static let variable = "CHART_RESULT_DAILY_QUOTA"
    /// Computed results per user per 24 hours, unless configured.
    public static let defaultLimit = 50
    /// The accepted settings (or `off`).
    public static let bounds: ClosedRange<Int> = 1...100_000
    /// The window the results are counted in, in seconds.
    public static let windowSeconds = 86_400
    /// The code of a refusal.
    public static let code = ErrorCode.chartQuotaExceeded

    /// The most computed results per user within the window; `nil`: no quota.
    public var limit: Int?

    /// A quota of `limit` results per 24 hours (`nil`: none).
    public init(limit: Int? = ChartResultQuota.defaultLimit) {
        self.limit = limit
    }

    /// A setting that is neither a whole number within `bounds` nor `off`.
    public struct SettingError: Error, Sendable, Hashable {
        /// What was wrong and what is accepted.
        public var problem: String
    }

    /// The quota a setting names: unset or empty is the default, `off` is none.
    /// - Throws: `SettingError` for anything else than a whole number within `bounds` or `off`.
    public init(setting text: String?) throws(SettingError) {
        guard let text = text?.trimmingCharacters(in: .whitespaces), !text.isEmpty else {
            self.init()
            return
        }
        if text == "off" {
            self.init(limit: nil)
            return
        }
        guard text.utf8.count <= 9, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text),
            Self.bounds.contains(value)
        else {
            throw SettingError(
                problem: "expected a whole number in \(Self.bounds.lowerBound)…\(Self.bounds.upperBound) or off, "
                    + "got \(InputQuote.short(text))"
            )
        }
        self.init(limit: value)
    }

    /// Whether one more result may be computed after `computed` within the window.
    public func allowsAnother(computed: Int) -> Bool {
        guard let limit else { return true }
        return computed < limit
    }

    /// Whole seconds until the oldest counted result leaves the window (at least 1), for
    /// `Retry-After`.
    /// - Parameters:
    ///   - oldest: when the oldest result of the window was computed (`nil`: unknown, a whole window).
    ///   - now: the current time.
    public static func retryAfter(oldest: Date?, now: Date) -> Int {
        guard let oldest else { return windowSeconds }
        let seconds = oldest.timeIntervalSince(now) + Double(windowSeconds)
        return max(1, min(windowSeconds, Int(seconds.rounded(.up))))
    }

    /// The refusal, for a job's dead letter or the gateway's problem document.
    public func refusal(retryAfter seconds: Int) -> ChartJobError {
        ChartJobError(
            Self.code,
            field: "",
            message: "this user computed \(limit ?? 0) chart results within 24 hours, the most allowed; "
                + "stored results are still served; try again in \(seconds) s"
        )
    }
}
