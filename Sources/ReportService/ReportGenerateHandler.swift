import AstroDomain
import ChartEngine
import Foundation
import Postgres
import Reports
import WorkerRuntime

/// `report.generate`: the report a consumed credit paid for. Loads the profile's chart, writes
/// the report, and stores it in `report_purchases` with `report.completed`, in one transaction.
///
/// A report that cannot be written (no chart, an unreadable chart) ends `failed` with
/// `report.failed` and a `billing.refund-credit` for the credit, in the same transaction; a job
/// dead-lettered after its retries gets the same refund (`compensation`). Nothing is charged
/// for a report that was not delivered, and the same (profile, area, language) is never written
/// twice.
public struct ReportGenerateHandler: JobHandler {
    public let jobType = JobType.reportGenerate
    private let writer: BuiltInReportWriter
    private let pairWriter: PairReportWriter?
    private let llm: LLMSetup?

    /// The LLM writer, the pool it reads charts through (in `prepare`, outside any transaction),
    /// and the meter of its paid calls.
    public struct LLMSetup: Sendable {
        public var writer: LLMReportWriter
        public var pool: PostgresPool
        /// Meters every LLM call at once and bounds them (the daily budget, the user's calls);
        /// past a bound the built-in writers write the report. Nil: unmetered (tools, tests).
        public var paidCalls: PaidCallLedger?
        public init(writer: LLMReportWriter, pool: PostgresPool, paidCalls: PaidCallLedger? = nil) {
            self.writer = writer
            self.pool = pool
            self.paidCalls = paidCalls
        }
    }

    /// - Parameters:
    ///   - pairWriter: writes relationships reports for two (a request with a partner); without
    ///     one, such a request fails `pair-reports-unavailable` and its credit is refunded.
    ///   - llm: when given, reports are written by the LLM; otherwise by the built-in writers.
    public init(writer: BuiltInReportWriter, pairWriter: PairReportWriter? = nil, llm: LLMSetup? = nil) {
        self.writer = writer
        self.pairWriter = pairWriter
        self.llm = llm
    }

    public enum Prepared: Sendable {
        /// The built-in writer runs inside the transaction (it takes about a millisecond).
        case builtIn(ReportGenerateRequest)
        case written(ReportGenerateRequest, WrittenReport, ReportUsage)
        case failed(ReportGenerateRequest, JobError)

        var request: ReportGenerateRequest {
            switch self {
            case .builtIn(let request), .written(let request, _, _), .failed(let request, _): request
            }
        }
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(ReportGenerateRequest.self)
        guard let llm else { return .builtIn(request) }
        let (held, profiles, written) = try await llm.pool.withConnection { database in
            // A job whose credit says otherwise is refused before any token is paid for.
            let held = try Self.checkCredit(request, database: database)
            return (
                held,
                try Self.storedProfiles(request, database: database),
                try Self.existingReport(request, database: database) != nil
            )
        }
        // Already written (a redelivery): the transaction answers with it; no tokens spent. A
        // credit this request no longer holds (refunded, or never spent on it): the transaction
        // checks again under the credit's lock and fails the job `credit-not-held` before any
        // writer runs, so no tokens are spent on it either.
        if written || !held { return .builtIn(request) }
        let meter = llm.paidCalls?.meter(user: request.userID, job: job.jobID, consumptionJob: request.requestJobID)
        let stored: [StoredProfile]
        switch profiles {
        case .failure(let error): return .failed(request, error)
        case .success(let found): stored = found
        }
        if request.partnerProfileID != nil {
            let pair: PairSubjects
            switch Self.pair(stored) {
            case .failure(let error): return .failed(request, error)
            case .success(let loaded): pair = loaded
            }
            do {
                let (report, usage) = try await llm.writer.writePair(
                    chartA: pair.chartA,
                    chartB: pair.chartB,
                    synastry: pair.synastry,
                    score: pair.score,
                    couple: pair.couple,
                    language: request.language,
                    meter: meter
                )
                return .written(request, report, usage)
            } catch {
                // Past the budget or the user's bound the built-in writer writes it (in commit).
                if error.refusal != nil { return .builtIn(request) }
                guard error.isPermanent else { throw error }
                return .failed(request, JobError(code: error.code, message: error.message))
            }
        }
        let chart: NatalChart
        switch stored[0].natalChart() {
        case .failure(let error): return .failed(request, error)
        case .success(let decoded): chart = decoded
        }
        do {
            let (report, usage) = try await llm.writer.write(
                chart: chart,
                area: request.area,
                language: request.language,
                meter: meter
            )
            return .written(request, report, usage)
        } catch {
            if error.refusal != nil { return .builtIn(request) }
            // Rate limits, outages and timeouts: retried by the runtime; out of retries, refunded.
            guard error.isPermanent else { throw error }
            return .failed(request, JobError(code: error.code, message: error.message))
        }
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        var fields: [String: JSONValue] = [
            "userId": .string(request.userID.description),
            "profileId": .string(request.profileID.description),
            "area": .string(request.area.rawValue),
            "language": .string(request.language.rawValue),
            "creditId": .string(request.creditID.description),
            // The id the client published report.request with, so it can match this outcome.
            "requestJobId": .string(request.requestJobID.description),
        ]
        if let partner = request.partnerProfileID { fields["partnerProfileId"] = .string(partner.description) }
        try Self.checkCredit(request, database: database)
        if let existing = try Self.existingReport(request, database: database) {
            fields["reportId"] = .string(ReportID(try existing.decode(UUID.self, "id")).description)
            fields["alreadyWritten"] = true
            var messages = [
                try OutboxMessage.event(
                    JobEvent(jobID: request.jobID, userID: request.userID, type: .reportCompleted, fields: fields)
                )
            ]
            // Paid twice for one report (cannot happen through report.request): give this one back.
            if try existing.decode(UUID?.self, "credit_id") != request.creditID.uuid {
                messages.append(
                    try Self.refund(request, jobID: job.jobID, reason: ErrorCode.reportAlreadyWritten.rawValue)
                )
            }
            return JobOutcome(status: .succeeded, result: .object(fields), messages: messages)
        }
        // Shared with other reports, exclusive with a refund of this credit (migration 0004): the
        // credit cannot be given back between this check and the commit of the report it pays for.
        try database.execute("SELECT pg_advisory_xact_lock_shared(credit_lock_key($1))", [request.creditID.uuid])
        guard
            let credit = try database.query(
                """
                SELECT c.consumed_by_job, c.purchase_date, r.price_usd, r.credit_amount, r.transaction_id
                FROM purchase_credits c JOIN purchase_records r ON r.id = c.purchase_record_id
                WHERE c.id = $1 AND c.consumed
                """,
                [request.creditID.uuid]
            ).first, try credit.decode(UUID?.self, "consumed_by_job") == request.requestJobID.uuid
        else {
            // Refunded already (or never spent on this request): writing it would be free.
            let error = JobError(
                code: .creditNotHeld,
                message: "credit \(request.creditID) no longer pays for request \(request.requestJobID)"
            )
            return JobOutcome(
                status: .failed(error),
                result: .object(fields),
                messages: [
                    try .event(
                        JobEvent(
                            jobID: request.jobID,
                            userID: request.userID,
                            type: .reportFailed,
                            fields: fields,
                            error: error
                        )
                    )
                ]
            )
        }
        var usage: ReportUsage?
        let report: WrittenReport
        switch prepared {
        case .failed(_, let error):
            return try Self.failure(request, job: job, fields: fields, error)
        case .written(_, let written, let cost):
            report = written
            usage = cost
        case .builtIn where request.partnerProfileID != nil:
            guard let pairWriter else {
                return try Self.failure(
                    request,
                    job: job,
                    fields: fields,
                    JobError(
                        code: .pairReportsUnavailable,
                        message: "this report-worker has no synastry knowledge base"
                    )
                )
            }
            switch try Self.storedProfiles(request, database: database).flatMap(Self.pair) {
            case .failure(let error):
                return try Self.failure(request, job: job, fields: fields, error)
            case .success(let pair):
                report = pairWriter.write(
                    synastry: pair.synastry,
                    score: pair.score,
                    couple: pair.couple,
                    language: request.language
                )
            }
        case .builtIn:
            let chart: NatalChart
            switch try Self.storedProfiles(request, database: database).flatMap({ $0[0].natalChart() }) {
            case .failure(let error):
                return try Self.failure(request, job: job, fields: fields, error)
            case .success(let decoded):
                chart = decoded
            }
            report = writer.write(chart: chart, area: request.area, language: request.language)
        }
        // A profile deleted while the report was written (the gateway refuses that while a
        // report is being written, but an erasure or a race may still do it): a clear failure
        // instead of the foreign key's; the refund it asks for is bounded by the billing-worker
        // when the LLM was already paid.
        let present = try database.query(
            "SELECT count(*)::int AS n FROM user_profiles WHERE id IN ($1, $2)",
            [request.profileID.uuid, request.partnerProfileID?.uuid]
        ).first?.decode(Int.self, "n")
        if present != (request.partnerProfileID == nil ? 1 : 2) {
            return try Self.failure(
                request,
                job: job,
                fields: fields,
                JobError(code: .profileDeleted, message: "a profile of this report was deleted while it was written")
            )
        }
        let reportID = ReportID.random()
        // The price of one credit of the purchase, as the catalog priced it when it was bought.
        try database.execute(
            """
            INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count, price,
                currency, transaction_id, credit_id, purchase_date, generated_at, writer, prompt_version,
                llm_model, prompt_tokens, completion_tokens, cost_usd, partner_profile_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, round($8::numeric / $9, 2), 'USD', $10, $11, $12, now(), $13, $14,
                $15, $16, $17, $18, $19)
            """,
            [
                reportID.uuid, request.userID.uuid, request.profileID.uuid, request.area.rawValue,
                request.language.rawValue, report.text, report.wordCount, try credit.decode(Decimal.self, "price_usd"),
                max(try credit.decode(Int.self, "credit_amount"), 1), try credit.decode(String.self, "transaction_id"),
                request.creditID.uuid, try credit.decode(Date.self, "purchase_date"), report.writer, report.version,
                usage?.model, usage?.promptTokens, usage?.completionTokens, usage?.costUSD,
                request.partnerProfileID?.uuid,
            ]
        )
        fields["reportId"] = .string(reportID.description)
        fields["wordCount"] = .number(Double(report.wordCount))
        fields["writer"] = .string(report.writer)
        return JobOutcome(
            status: .succeeded,
            result: .object(fields),
            messages: [
                try .event(
                    JobEvent(jobID: request.jobID, userID: request.userID, type: .reportCompleted, fields: fields)
                )
            ],
            measurements: ReportMeasurements.written(request, writer: report.writer)
        )
    }

    /// The report this request asks for, if it is stored: same profile, partner (or none), area
    /// and language.
    static func existingReport(_ request: ReportGenerateRequest, database: PostgresConnection) throws -> PostgresRow? {
        try database.query(
            """
            SELECT id, credit_id FROM report_purchases
            WHERE profile_id = $1 AND area = $2 AND language = $3 AND partner_profile_id IS NOT DISTINCT FROM $4
            """,
            [
                request.profileID.uuid, request.area.rawValue, request.language.rawValue,
                request.partnerProfileID?.uuid,
            ]
        ).first
    }

    /// What a report for two is written from: both charts, their synastry and score, the names.
    struct PairSubjects: Sendable {
        var chartA: NatalChart
        var chartB: NatalChart
        var synastry: Synastry
        var score: CompatibilityScore
        var couple: ReportCouple
    }

    /// A profile of the request as stored, after `ProfileChartRule`.
    struct StoredProfile: Sendable {
        var id: ProfileID
        var role: ProfileRole
        var name: String
        var chartText: String

        /// The stored chart, or `chart-unreadable` (`partner-chart-unreadable`).
        func natalChart() -> Result<NatalChart, JobError> {
            guard let chart = try? JSONCoding.decoder.decode(NatalChart.self, from: Data(chartText.utf8)) else {
                return .failure(
                    JobError(
                        code: role == .profile ? .chartUnreadable : .partnerChartUnreadable,
                        message: "the stored chart of profile \(id) cannot be read"
                    )
                )
            }
            return .success(chart)
        }
    }

    /// The request's profile (and partner) with their names and stored charts, when
    /// `ProfileChartRule` holds for them: a profile or chart gone since the credit was spent is a
    /// failure with the rule's code (refunded).
    /// - Returns: the profile, then the partner when the request names one.
    /// - Throws: `PostgresError`.
    static func storedProfiles(
        _ request: ReportGenerateRequest,
        database: PostgresConnection
    ) throws -> Result<[StoredProfile], JobError> {
        let ids = [request.profileID] + (request.partnerProfileID.map { [$0] } ?? [])
        var found: [UUID: (facts: ProfileChartFacts, name: String, chart: String?)] = [:]
        for row in try database.query(
            """
            SELECT p.id, p.user_id, p.name, c.chart_data::text AS chart,
                coalesce(c.chart_data->>'zodiac', 'tropical') AS zodiac
            FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
            WHERE p.id = $1 OR p.id = $2
            """,
            [ids[0].uuid, ids[ids.count - 1].uuid]
        ) {
            let chart = try row.decode(String?.self, "chart")
            found[try row.decode(UUID.self, "id")] = (
                ProfileChartFacts(
                    owner: UserID(try row.decode(UUID.self, "user_id")),
                    chartZodiac: chart == nil ? nil : try row.decode(String.self, "zodiac")
                ),
                try row.decode(String.self, "name"),
                chart
            )
        }
        if let refusal = ProfileChartRule.check(
            caller: request.userID,
            profileID: request.profileID,
            profile: found[request.profileID.uuid]?.facts,
            partnerID: request.partnerProfileID,
            partner: request.partnerProfileID.flatMap { found[$0.uuid]?.facts }
        ) {
            return .failure(refusal.jobError)
        }
        var profiles: [StoredProfile] = []
        for (index, id) in ids.enumerated() {
            // The rule passed: each row is there with its chart.
            guard let row = found[id.uuid], let chart = row.chart else { continue }
            profiles.append(
                StoredProfile(id: id, role: index == 0 ? .profile : .partner, name: row.name, chartText: chart)
            )
        }
        return .success(profiles)
    }

    /// The charts of a report for two (A = the profile, B = the partner), their synastry and
    /// compatibility score, and the names.
    static func pair(_ profiles: [StoredProfile]) -> Result<PairSubjects, JobError> {
        guard profiles.count == 2 else {
            return .failure(JobError(code: .partnerNotFound, message: "the request names no partner"))
        }
        let a: NatalChart
        let b: NatalChart
        switch profiles[0].natalChart() {
        case .failure(let error): return .failure(error)
        case .success(let chart): a = chart
        }
        switch profiles[1].natalChart() {
        case .failure(let error): return .failure(error)
        case .success(let chart): b = chart
        }
        let synastry: Synastry
        do {
            synastry = try ChartEngine.synastry(a, b)
        } catch {
            return .failure(JobError(code: error.code, message: "no synastry of the two charts: \(error)"))
        }
        return .success(
            PairSubjects(
                chartA: a,
                chartB: b,
                synastry: synastry,
                score: CompatibilityScoring.score(synastry),
                couple: ReportCouple(nameA: profiles[0].name, nameB: profiles[1].name)
            )
        )
    }

    /// A report that will never be written: the credit goes back — unless the job was refused
    /// because its credit says otherwise (a forged or garbled job pays for nothing, so it is owed
    /// nothing).
    public func compensation(for job: JobEnvelope, error: JobError) -> [OutboxMessage] {
        guard !Self.forgeryCodes.contains(error.code),
            let request = try? JSONCoding.decoder.decode(ReportGenerateRequest.self, from: job.body)
        else {
            return []
        }
        return (try? [Self.refund(request, jobID: job.jobID, reason: error.code)]) ?? []
    }

    /// Rejections that mean the job does not match a credit.
    static let forgeryCodes: Set<String> = [ErrorCode.creditNotFound.rawValue, ErrorCode.creditMismatch.rawValue]

    /// Checks the job against the credit it names: the credit exists and was spent by this user
    /// on this profile, area and language, with this purchase. Only the billing-worker publishes
    /// report.generate, but a message on the queue proves nothing about who sent it.
    /// - Returns: whether the credit is spent on this request right now (not refunded meanwhile).
    /// - Throws: `JobRejection` (`credit-not-found`, `credit-mismatch`), dead-lettered without refund.
    @discardableResult
    static func checkCredit(_ request: ReportGenerateRequest, database: PostgresConnection) throws -> Bool {
        guard
            let credit = try database.query(
                """
                SELECT user_id, transaction_id, user_profile_id, consumed_area, consumed_language, consumed_by_job,
                    consumed_partner_profile_id
                FROM purchase_credits WHERE id = $1
                """,
                [request.creditID.uuid]
            ).first
        else {
            throw JobRejection(code: .creditNotFound, message: "there is no credit \(request.creditID)")
        }
        let spentOnThis =
            try credit.decode(UUID.self, "user_id") == request.userID.uuid
            && credit.decode(String.self, "transaction_id") == request.transactionID
        // A credit refunded meanwhile has no consumption fields any more: that is the
        // credit-not-held failure further on, not a mismatch.
        let consumedBy = try credit.decode(UUID?.self, "consumed_by_job")
        let partner = try credit.decode(UUID?.self, "consumed_partner_profile_id")
        let profile = try credit.decode(UUID?.self, "user_profile_id")
        let area = try credit.decode(String?.self, "consumed_area")
        let language = try credit.decode(String?.self, "consumed_language")
        let consumptionMatches =
            consumedBy != request.requestJobID.uuid
            || (profile == request.profileID.uuid && area == request.area.rawValue
                && language == request.language.rawValue && partner == request.partnerProfileID?.uuid)
        guard spentOnThis, consumptionMatches else {
            throw JobRejection(
                code: .creditMismatch,
                message: "credit \(request.creditID) was not spent by this user on this profile, area and language"
            )
        }
        return consumedBy == request.requestJobID.uuid
    }

    private static func failure(
        _ request: ReportGenerateRequest,
        job: JobEnvelope,
        fields: [String: JSONValue],
        _ error: JobError
    ) throws -> JobOutcome {
        JobOutcome(
            status: .failed(error),
            result: .object(fields),
            messages: [
                try refund(request, jobID: job.jobID, reason: error.code),
                try .event(
                    JobEvent(
                        jobID: request.jobID,
                        userID: request.userID,
                        type: .reportFailed,
                        fields: fields,
                        error: error
                    )
                ),
            ]
        )
    }

    /// The `billing.refund-credit` job for this report's credit; its id is derived from the
    /// report job's, so a replay publishes the same refund.
    static func refund(_ request: ReportGenerateRequest, jobID: JobID, reason: String) throws -> OutboxMessage {
        let refund = RefundCreditRequest(
            jobID: JobID.derived(from: jobID, purpose: JobType.billingRefundCredit.rawValue),
            creditID: request.creditID,
            requestJobID: request.requestJobID,
            userID: request.userID,
            profileID: request.profileID,
            area: request.area,
            language: request.language,
            reason: String(reason.prefix(200)),
            partnerProfileID: request.partnerProfileID
        )
        return .job(.billingRefundCredit, body: try JSONCoding.encoder.encode(refund))
    }
}

/// A writer's failure carries its own classification (from the LLM client's): the runtime
/// retries only what a retry can mend, under the writer's code.
extension ReportWriterError: RetryClassifiedError {
    public var failureCode: String { code }
    public var isTransient: Bool { !isPermanent }
}
