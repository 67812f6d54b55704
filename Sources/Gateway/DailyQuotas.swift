import AstroDomain
import Foundation
import WorkerRuntime

/// Per-user daily quotas on the requests that make paid work (issue 29, F2): story generations
/// (each makes one or two LLM calls) and forced redraws of illustrations (each page one images
/// API call). Counted per UTC day from the gateway's own record of accepted jobs
/// (`gateway_jobs.quota_units`), so every replica shares them; a request past its quota is
/// answered 429 with its code and `Retry-After` (seconds to the next UTC midnight), and nothing
/// is published. The workers bound the same work again (`PaidCallLedger`), for jobs that do not
/// come through the gateway.
public struct DailyQuotas: Sendable, Hashable {
    /// `POST /v1/stories` per user per day (`STORY_GENERATIONS_PER_DAY`).
    public var storyGenerations = 20
    /// Pages redrawn with `force` per user per day (`ILLUSTRATION_REDRAWS_PER_DAY`).
    public var illustrationRedraws = 30

    public init() {}

    /// The variables, with their defaults (the README's table mirrors them).
    public static let variables: [ConfigurationVariable] = [
        .init(
            name: "STORY_GENERATIONS_PER_DAY",
            defaultValue: "20",
            meaning: "stories one user may ask for per UTC day"
        ),
        .init(
            name: "ILLUSTRATION_REDRAWS_PER_DAY",
            defaultValue: "30",
            meaning: "pages one user may have redrawn with force per UTC day"
        ),
    ]

    /// Reads the quotas (0…10,000 each; 0 refuses every such request).
    /// - Throws: `ConfigurationError` naming a variable that is not a whole number in range.
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> DailyQuotas {
        let reader = EnvironmentReader(environment)
        var quotas = DailyQuotas()
        quotas.storyGenerations = try reader.int(
            "STORY_GENERATIONS_PER_DAY",
            default: quotas.storyGenerations,
            range: 0...10_000
        )
        quotas.illustrationRedraws = try reader.int(
            "ILLUSTRATION_REDRAWS_PER_DAY",
            default: quotas.illustrationRedraws,
            range: 0...10_000
        )
        return quotas
    }

    /// What one accepted request counts against its kind's quota.
    struct Charge: Sendable, Hashable {
        /// The quota of the user's jobs of this kind today.
        var limit: Int
        /// What this request adds (a story: 1; a forced redraw: its pages).
        var units: Int
        /// The problem code when it would go past the quota.
        var code: ErrorCode
    }

    /// The charge of a story generation.
    var storyGeneration: Charge { Charge(limit: storyGenerations, units: 1, code: .storyQuotaExceeded) }

    /// The charge of a forced redraw of `pages` pages.
    func redraw(pages: Int) -> Charge {
        Charge(limit: illustrationRedraws, units: pages, code: .redrawQuotaExceeded)
    }

    /// Seconds until the next UTC midnight, when the quotas start again (at least 1).
    static func secondsUntilReset(now: Date = Date()) -> Int {
        let seconds = now.timeIntervalSince1970
        let next = (seconds / 86_400).rounded(.down) * 86_400 + 86_400
        return max(1, Int((next - seconds).rounded(.up)))
    }
}

/// A request would go past the user's daily quota of its kind: nothing was recorded.
struct QuotaExceeded: Error, Sendable {
    var charge: DailyQuotas.Charge
    /// What the user has used today.
    var used: Int

    /// The 429 problem, with `Retry-After` at the next UTC midnight.
    var problem: Problem {
        Problem(
            charge.code,
            "\(used) of \(charge.limit) used today (UTC); this request needs \(charge.units)",
            retryAfter: DailyQuotas.secondsUntilReset()
        )
    }
}
