import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import Synchronization

/// How much paid work may be done per day: a global budget per paid API, shared by every replica
/// (the database's figure, not one process's), and a bound of paid calls per user and purpose.
/// Past either, the built-in writer or illustrator does the work instead.
public struct PaidCallLimits: Sendable, Hashable {
    /// USD per UTC day per API (`LLM_DAILY_BUDGET_USD`, `IMAGE_DAILY_BUDGET_USD`); 0 makes no paid calls.
    public var dailyBudgetUSD: [PaidAPI: Decimal]
    /// Paid calls per user per UTC day per purpose (`REPORT_LLM_CALLS_PER_USER_DAY`,
    /// `STORY_LLM_CALLS_PER_USER_DAY`, `IMAGE_CALLS_PER_USER_DAY`); 0 makes none.
    public var perUserDaily: [PaidPurpose: Int]

    public init(
        dailyBudgetUSD: [PaidAPI: Decimal] = Self.defaultBudgets,
        perUserDaily: [PaidPurpose: Int] = Self.defaultPerUser
    ) {
        self.dailyBudgetUSD = dailyBudgetUSD
        self.perUserDaily = perUserDaily
    }

    /// 50 USD of LLM calls (the spend alert's figure) and 20 USD of pictures a day.
    public static let defaultBudgets: [PaidAPI: Decimal] = [.llm: 50, .images: 20]
    /// A report costs at most 2 calls (an answer rejected once is asked for again), a story too:
    /// 20 calls are 10 reports or stories a day; 60 pictures are about 7 fully redrawn stories.
    public static let defaultPerUser: [PaidPurpose: Int] = [.report: 20, .story: 20, .illustration: 60]

    /// The variables, with their defaults (the README's table mirrors them).
    public static let variables: [WorkerConfiguration.Variable] = [
        .init(name: "LLM_DAILY_BUDGET_USD", defaultValue: "50", meaning: "LLM spend per UTC day, all replicas"),
        .init(name: "IMAGE_DAILY_BUDGET_USD", defaultValue: "20", meaning: "images API spend per UTC day"),
        .init(name: "REPORT_LLM_CALLS_PER_USER_DAY", defaultValue: "20", meaning: "LLM calls for one user's reports"),
        .init(name: "STORY_LLM_CALLS_PER_USER_DAY", defaultValue: "20", meaning: "LLM calls for one user's stories"),
        .init(name: "IMAGE_CALLS_PER_USER_DAY", defaultValue: "60", meaning: "pictures drawn for one user"),
    ]

    /// Reads the limits; unset or empty variables keep their defaults.
    /// - Throws: `ConfigurationError` naming a variable that is not a number in range
    ///   (budgets 0…1,000,000 USD, calls 0…100,000).
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> PaidCallLimits {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return text
        }
        var limits = PaidCallLimits()
        for (api, name) in [(PaidAPI.llm, "LLM_DAILY_BUDGET_USD"), (.images, "IMAGE_DAILY_BUDGET_USD")] {
            guard let text = value(name) else { continue }
            guard let budget = Decimal(string: text), budget >= 0, budget <= 1_000_000 else {
                throw ConfigurationError(
                    variable: name,
                    problem: "expected USD from 0 to 1000000, got \(text.debugDescription)"
                )
            }
            limits.dailyBudgetUSD[api] = budget
        }
        for (purpose, name) in [
            (PaidPurpose.report, "REPORT_LLM_CALLS_PER_USER_DAY"), (.story, "STORY_LLM_CALLS_PER_USER_DAY"),
            (.illustration, "IMAGE_CALLS_PER_USER_DAY"),
        ] {
            guard let text = value(name) else { continue }
            guard let calls = Int(text), (0...100_000).contains(calls) else {
                throw ConfigurationError(
                    variable: name,
                    problem: "expected a whole number from 0 to 100000, got \(text.debugDescription)"
                )
            }
            limits.perUserDaily[purpose] = calls
        }
        return limits
    }

    /// Whether one more call may be made, given what the database says about today: the API's
    /// spend so far and the user's calls of this purpose so far. The budget is checked first: it
    /// is the one an operator must hear about.
    public func admission(
        _ purpose: PaidPurpose,
        spentTodayUSD: Decimal,
        userCallsToday: Int
    ) -> PaidCallAdmission {
        let budget = dailyBudgetUSD[purpose.api] ?? 0
        if spentTodayUSD >= budget { return .budgetReached }
        if userCallsToday >= perUserDaily[purpose] ?? 0 { return .userLimitReached }
        return .admitted
    }
}

/// The one metering path of every paid call (LLM chat for reports and stories, the images API):
/// each call the provider answered is counted in the metrics at once and recorded in
/// `paid_calls` (with the day's total in `paid_call_days`) in its own short transaction — not in
/// the job's, so a call still counts when the job then fails, retries, refunds, dead-letters or
/// the process dies before its commit. The same rows are the budget and the per-user bound,
/// checked before each call.
///
/// The spend it keeps is the figure of `astro_llm_cost_usd_total`, `astro_image_cost_usd_total`
/// and `astro_paid_spend_today_usd` (what the spend alerts read).
public final class PaidCallLedger: Sendable {
    public let limits: PaidCallLimits
    private let pool: PostgresPool
    private let metrics: WorkerMetrics
    private let logger: Logger
    /// When each API's "budget reached" warning was last logged: once a minute per replica is
    /// enough for a person to act, however many calls are refused.
    private let lastBudgetWarning = Mutex<[PaidAPI: ContinuousClock.Instant]>([:])
    /// The APIs whose calls came priced at 0 (said once per process).
    private let unpriced = Mutex<Set<PaidAPI>>([])

    /// - Parameters:
    ///   - pool: the worker's pool (the role needs INSERT on `paid_calls`, and INSERT and UPDATE
    ///     on `paid_call_days`: migration 0033).
    ///   - metrics: where the calls are counted when they are made.
    public init(limits: PaidCallLimits, pool: PostgresPool, metrics: WorkerMetrics, logger: Logger) {
        self.limits = limits
        self.pool = pool
        self.metrics = metrics
        self.logger = logger
        for api in PaidAPI.allCases {
            let budget = NSDecimalNumber(decimal: limits.dailyBudgetUSD[api] ?? 0).doubleValue
            metrics.set(.paidDailyBudget, [api.rawValue], to: budget)
        }
        metrics.declare(
            .paidCalls,
            labelSets: PaidPurpose.allCases.map { [$0.api.rawValue, $0.rawValue] }
        )
        metrics.declare(
            .paidCallsRefused,
            labelSets: PaidAPI.allCases.flatMap { api in MetricLabel.paidRefusalReasons.map { [api.rawValue, $0] } }
        )
    }

    /// A meter for one job's calls.
    /// - Parameters:
    ///   - user: whose bound the calls count against.
    ///   - job: the job making them.
    ///   - consumptionJob: for a report, the `report.request` that spent the credit (its refund
    ///     is then one of already-paid work).
    public func meter(user: UserID, job: JobID, consumptionJob: JobID? = nil) -> any PaidCallMeter {
        JobMeter(ledger: self, user: user, job: job, consumptionJob: consumptionJob)
    }

    struct JobMeter: PaidCallMeter {
        let ledger: PaidCallLedger
        let user: UserID
        let job: JobID
        let consumptionJob: JobID?

        func admit(_ purpose: PaidPurpose) async -> PaidCallAdmission {
            await ledger.admit(purpose, user: user)
        }

        func record(_ usage: PaidCallUsage) async {
            await ledger.record(usage, user: user, job: job, consumptionJob: consumptionJob)
        }
    }

    /// Today's spend of `api` and `user`'s calls of `purpose` today, then the decision.
    /// An unreadable database refuses the call (`budgetReached` is not claimed: the reason logged
    /// is the database's).
    func admit(_ purpose: PaidPurpose, user: UserID) async -> PaidCallAdmission {
        let api = purpose.api
        let admission: PaidCallAdmission
        do {
            let (spent, calls) = try await pool.withConnection { database in
                let row = try database.query(
                    """
                    SELECT coalesce((SELECT cost_usd FROM paid_call_days
                                     WHERE day = (now() AT TIME ZONE 'UTC')::date AND api = $1), 0) AS spent,
                        (SELECT count(*) FROM paid_calls WHERE user_id = $2 AND purpose = $3
                            AND called_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')::int AS calls
                    """,
                    [api.rawValue, user.uuid, purpose.rawValue]
                ).first
                return (try row?.decode(Decimal.self, "spent") ?? 0, try row?.decode(Int.self, "calls") ?? 0)
            }
            metrics.set(.paidSpendToday, [api.rawValue], to: NSDecimalNumber(decimal: spent).doubleValue)
            admission = limits.admission(purpose, spentTodayUSD: spent, userCallsToday: calls)
        } catch {
            logger.warning(
                "paid call not made: the spend could not be read",
                metadata: ["paid.api": "\(api.rawValue)", LogKey.reason: "\(error)"]
            )
            metrics.record([BusinessMeasurement(.paidCallsRefused, [api.rawValue, "budget"])])
            return .budgetReached
        }
        guard let reason = admission.refusalReason else { return admission }
        metrics.record([BusinessMeasurement(.paidCallsRefused, [api.rawValue, reason])])
        if admission == .budgetReached {
            let now = ContinuousClock.now
            let due = lastBudgetWarning.withLock { last -> Bool in
                if let previous = last[api], now - previous < .seconds(60) { return false }
                last[api] = now
                return true
            }
            if due {
                logger.warning(
                    "daily budget reached: the built-in writer or illustrator takes over",
                    metadata: [
                        "paid.api": "\(api.rawValue)",
                        "paid.budget_usd": "\(limits.dailyBudgetUSD[api] ?? 0)",
                    ]
                )
            }
        } else {
            logger.info(
                "a user's daily paid calls reached their bound: the built-in writer or illustrator takes over",
                metadata: ["paid.purpose": "\(purpose.rawValue)", "user.id": "\(user)"]
            )
        }
        return admission
    }

    /// Counts the call in the metrics, then records it in the database (twice at most: a lost
    /// row under-counts the budget, so a failure is logged as an error).
    func record(_ usage: PaidCallUsage, user: UserID, job: JobID, consumptionJob: JobID?) async {
        metrics.record(Self.measurements(usage))
        let api = usage.purpose.api
        if usage.costUSD == 0, unpriced.withLock({ $0.insert(api).inserted }) {
            logger.warning(
                "a paid call was priced at 0 USD: the daily budget cannot bound this API (set its prices)",
                metadata: ["paid.api": "\(api.rawValue)"]
            )
        }
        let model = String(usage.model.prefix(256)).isEmpty ? "unknown" : String(usage.model.prefix(256))
        for attempt in 1...2 {
            do {
                let spent = try await pool.withConnection { database in
                    try database.query(
                        """
                        WITH call AS (
                            INSERT INTO paid_calls (api, purpose, user_id, job_id, consumption_job, model,
                                prompt_tokens, completion_tokens, images, cost_usd)
                            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                            RETURNING api, cost_usd
                        )
                        INSERT INTO paid_call_days (day, api, calls, cost_usd)
                        SELECT (now() AT TIME ZONE 'UTC')::date, api, 1, cost_usd FROM call
                        ON CONFLICT (day, api) DO UPDATE
                            SET calls = paid_call_days.calls + 1, cost_usd = paid_call_days.cost_usd + EXCLUDED.cost_usd
                        RETURNING cost_usd
                        """,
                        [
                            usage.purpose.api.rawValue, usage.purpose.rawValue, user.uuid, job.uuid,
                            consumptionJob?.uuid,
                            model, usage.promptTokens, usage.completionTokens, usage.images, usage.costUSD,
                        ]
                    ).first?.decode(Decimal.self, "cost_usd")
                }
                if let spent {
                    metrics.set(
                        .paidSpendToday,
                        [usage.purpose.api.rawValue],
                        to: NSDecimalNumber(decimal: spent).doubleValue
                    )
                }
                return
            } catch {
                if attempt == 2 {
                    logger.error(
                        "a paid call was not recorded in the database: the daily budget under-counts it",
                        metadata: [
                            "paid.api": "\(usage.purpose.api.rawValue)", LogKey.jobID: "\(job)",
                            LogKey.reason: "\(error)",
                        ]
                    )
                }
            }
        }
    }

    /// What one answered call adds to the metrics: the call, and its tokens and cost (LLM) or
    /// its cost (images).
    public static func measurements(_ usage: PaidCallUsage) -> [BusinessMeasurement] {
        let cost = NSDecimalNumber(decimal: usage.costUSD).doubleValue
        var measurements = [BusinessMeasurement(.paidCalls, [usage.purpose.api.rawValue, usage.purpose.rawValue])]
        switch usage.purpose.api {
        case .llm:
            measurements += BusinessMeasurement.llmUsage(
                purpose: usage.purpose.rawValue,
                promptTokens: usage.promptTokens,
                completionTokens: usage.completionTokens,
                costUSD: cost
            )
        case .images:
            if cost > 0 { measurements.append(BusinessMeasurement(.imageCost, amount: cost)) }
        }
        return measurements
    }
}
