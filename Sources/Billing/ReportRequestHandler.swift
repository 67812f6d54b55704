import AstroDomain
import Foundation
import Postgres
import WorkerRuntime

/// `report.request`: spend one credit on a report and hand the writing to the report-worker
/// (`report.generate`), in one transaction; see `CreditLedger.consume` for the rules.
///
/// Outcomes: `billing.credit-consumed` and a `report.generate` job; the existing report
/// (`report.completed` with `alreadyDelivered`); the credit already spent on the same report
/// (nothing new); or `failed` with `insufficient-credits` and `report.failed`.
public struct ReportRequestHandler: JobHandler {
    public let jobType = JobType.reportRequest

    public init() {}

    public func prepare(_ job: JobEnvelope) async throws -> ReportRequest {
        try job.decode(ReportRequest.self)
    }

    public func commit(_ request: ReportRequest, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let outcome: ConsumptionOutcome
        do {
            outcome = try CreditLedger.consume(request, database: database)
        } catch let rejection as LedgerRejection {
            throw JobRejection(code: rejection.code, message: rejection.message)
        }
        var fields: [String: JSONValue] = [
            "userId": .string(request.userID.description),
            "profileId": .string(request.profileID.description),
            "area": .string(request.area.rawValue),
            "language": .string(request.language.rawValue),
        ]
        if let partner = request.partnerProfileID { fields["partnerProfileId"] = .string(partner.description) }
        switch outcome {
        case .consumed(let credit):
            let generate = ReportGenerateRequest(
                jobID: Self.reportJobID(for: request.jobID),
                userID: request.userID,
                profileID: request.profileID,
                area: request.area,
                language: request.language,
                creditID: credit.creditID,
                transactionID: credit.transactionID,
                requestJobID: request.jobID,
                partnerProfileID: request.partnerProfileID
            )
            fields["creditId"] = .string(credit.creditID.description)
            fields["transactionId"] = .string(credit.transactionID)
            fields["reportJobId"] = .string(generate.jobID.description)
            return JobOutcome(
                status: .succeeded,
                result: .object(fields),
                messages: [
                    try .event(
                        JobEvent(
                            jobID: request.jobID,
                            userID: request.userID,
                            type: .billingCreditConsumed,
                            fields: fields
                        )
                    ),
                    .job(.reportGenerate, body: try JSONCoding.encoder.encode(generate)),
                ],
                measurements: BillingMeasurements.consumed(area: request.area)
            )
        case .existingReport(let reportID):
            fields["reportId"] = .string(reportID.description)
            fields["alreadyDelivered"] = .bool(true)
            return JobOutcome(
                status: .succeeded,
                result: .object(fields),
                messages: [
                    try .event(
                        JobEvent(jobID: request.jobID, userID: request.userID, type: .reportCompleted, fields: fields)
                    )
                ]
            )
        case .inProgress(let creditID, let requestJobID):
            fields["creditId"] = .string(creditID.description)
            fields["inProgress"] = .bool(true)
            fields["requestJobId"] = .string(requestJobID.description)
            fields["reportJobId"] = .string(Self.reportJobID(for: requestJobID).description)
            return JobOutcome(status: .succeeded, result: .object(fields))
        case .insufficientCredits(let available):
            let error = JobError(
                code: .insufficientCredits,
                message: available == 0
                    ? "no credits left; buy a report or a credit pack"
                    : "none of the \(available) available credits is for \(request.area.rawValue) or any area"
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
    }

    /// The `report.generate` job a request publishes: derived from the request's id, so a
    /// replayed transaction and every client compute the same one.
    public static func reportJobID(for requestJobID: JobID) -> JobID {
        JobID.derived(from: requestJobID, purpose: JobType.reportGenerate.rawValue)
    }
}

/// `billing.refund-credit`: the compensation when a paid report cannot be written. Idempotent:
/// a consumption is refunded at most once, whatever copies of the message arrive. A refund of a
/// report whose LLM calls were already paid is bounded per user and day (`CreditLedger.refund`).
public struct RefundCreditHandler: JobHandler {
    public let jobType = JobType.billingRefundCredit
    /// Refunds of already-paid reports a user gets per UTC day before they are withheld.
    public let paidRefundsPerUserDay: Int

    /// One a day: a report whose LLM answers were rejected twice is still refunded once; a
    /// second failed paid report on the same day keeps its credit spent.
    public static let defaultPaidRefundsPerUserDay = 1

    public init(paidRefundsPerUserDay: Int = Self.defaultPaidRefundsPerUserDay) {
        self.paidRefundsPerUserDay = paidRefundsPerUserDay
    }

    /// The handler with `PAID_REFUNDS_PER_USER_DAY` (0…100, default 1).
    /// - Throws: `ConfigurationError` when the value is not a whole number in range.
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> Self {
        let name = "PAID_REFUNDS_PER_USER_DAY"
        guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return Self() }
        guard let limit = Int(text), (0...100).contains(limit) else {
            throw ConfigurationError(
                variable: name,
                problem: "expected a whole number from 0 to 100, got \(text.debugDescription)"
            )
        }
        return Self(paidRefundsPerUserDay: limit)
    }

    public func prepare(_ job: JobEnvelope) async throws -> RefundCreditRequest {
        try job.decode(RefundCreditRequest.self)
    }

    public func commit(
        _ request: RefundCreditRequest,
        job: JobEnvelope,
        database: PostgresConnection
    ) throws -> JobOutcome {
        let outcome: RefundOutcome
        do {
            outcome = try CreditLedger.refund(request, paidRefundsPerUserDay: paidRefundsPerUserDay, database: database)
        } catch let rejection as LedgerRejection {
            throw JobRejection(code: rejection.code, message: rejection.message)
        }
        var fields: [String: JSONValue] = [
            "creditId": .string(request.creditID.description),
            "requestJobId": .string(request.requestJobID.description),
            "reason": .string(request.reason),
        ]
        switch outcome {
        case .alreadyRefunded:
            fields["alreadyRefunded"] = .bool(true)
            return JobOutcome(status: .succeeded, result: .object(fields))
        case .withheld(let userID, let refundsToday):
            // Not a failure of the job: the ledger records the decision, which an operator can
            // see (astroctl billing timeline) and overrule by hand.
            fields["userId"] = .string(userID.description)
            fields["refundWithheld"] = .bool(true)
            fields["paidRefundsToday"] = .number(Double(refundsToday))
            return JobOutcome(status: .succeeded, result: .object(fields))
        case .refunded(let userID, let revoked):
            fields["userId"] = .string(userID.description)
            if revoked { fields["revokedBecausePurchaseRefunded"] = .bool(true) }
            return JobOutcome(
                status: .succeeded,
                result: .object(fields),
                messages: [
                    try .event(
                        JobEvent(jobID: request.jobID, userID: userID, type: .billingCreditRefunded, fields: fields)
                    )
                ],
                measurements: BillingMeasurements.refunded(area: request.area, revoked: revoked)
            )
        }
    }
}
