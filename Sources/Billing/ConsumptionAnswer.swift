import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import WorkerRuntime

/// What the ledger knows about the purchase a CONSUMPTION_REQUEST names: the facts the answer
/// is computed from (stored with it, so an answer can be explained later).
public struct ConsumptionFacts: Sendable, Hashable, Codable {
    /// The purchase was redeemed here (a granting record exists).
    public var granted: Bool
    /// Credits the purchase granted.
    public var credits: Int
    /// Credits spent now (a report was paid with them).
    public var spent: Int
    /// Spent credits whose report is stored: what the customer actually received.
    public var delivered: Int
    /// Credits given back after their report could not be written (`refunded` in the ledger)
    /// and not spent again.
    public var returned: Int

    public init(granted: Bool, credits: Int, spent: Int, delivered: Int, returned: Int) {
        self.granted = granted
        self.credits = credits
        self.spent = spent
        self.delivered = delivered
        self.returned = returned
    }

    /// Milliunits of the purchase consumed: the share of its credits whose report was delivered
    /// (a credit spent on a report not stored yet, or given back, is not consumption).
    public var consumptionPercentage: Int {
        guard granted, credits > 0 else { return 0 }
        let delivered = min(max(self.delivered, 0), credits)
        return delivered * ConsumptionRequestBody.fullConsumption / credits
    }
}

/// How the answer to a CONSUMPTION_REQUEST is made from the ledger's facts: which refund
/// preference to state, and whether the app shows sample content before a purchase.
///
/// Refund preference (`BILLING_CONSUMPTION_REFUND_PREFERENCE`):
/// - `by-delivery` (default): no report of the purchase delivered → `GRANT_FULL` (the customer
///   received nothing; the refund revokes the unspent credits); every credit's report delivered
///   → `DECLINE`; some → `GRANT_PRORATED` with the delivered share as `consumptionPercentage`.
/// - `decline-if-delivered`: any report delivered → `DECLINE`, else `GRANT_FULL`.
/// - `none`: no preference is stated (Apple decides from the other fields).
///
/// `deliveryStatus` is `DELIVERED` when the purchase's credits were granted here (what the app
/// sells is the credits; a credit whose report failed was given back), `UNDELIVERED_OTHER` when
/// the purchase was never redeemed here.
public struct ConsumptionPolicy: Sendable, Hashable {
    /// The refund preference rule.
    public enum RefundRule: String, Sendable, Hashable, CaseIterable {
        case byDelivery = "by-delivery"
        case declineIfDelivered = "decline-if-delivered"
        case none = "none"
    }

    public var refundRule: RefundRule
    /// `sampleContentProvided`: the app shows a free natal chart and describes each report
    /// before it is bought (`BILLING_CONSUMPTION_SAMPLE_CONTENT`, default true).
    public var sampleContentProvided: Bool

    public init(refundRule: RefundRule = .byDelivery, sampleContentProvided: Bool = true) {
        self.refundRule = refundRule
        self.sampleContentProvided = sampleContentProvided
    }

    /// The defaults: `by-delivery`, sample content provided.
    public static let `default` = ConsumptionPolicy()

    /// Reads `BILLING_CONSUMPTION_REFUND_PREFERENCE` (`by-delivery`, `decline-if-delivered`,
    /// `none`) and `BILLING_CONSUMPTION_SAMPLE_CONTENT` (`true`/`false`); unset means the default.
    /// - Throws: `ConfigurationError` naming the variable for any other value.
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> ConsumptionPolicy
    {
        var policy = ConsumptionPolicy.default
        let preferenceVariable = "BILLING_CONSUMPTION_REFUND_PREFERENCE"
        if let text = environment[preferenceVariable]?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            guard let rule = RefundRule(rawValue: text.lowercased()) else {
                throw ConfigurationError(
                    variable: preferenceVariable,
                    problem: "expected one of \(RefundRule.allCases.map(\.rawValue).joined(separator: ", "))"
                )
            }
            policy.refundRule = rule
        }
        let sampleVariable = "BILLING_CONSUMPTION_SAMPLE_CONTENT"
        if let text = environment[sampleVariable]?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
            switch text.lowercased() {
            case "1", "true", "yes", "on": policy.sampleContentProvided = true
            case "0", "false", "no", "off": policy.sampleContentProvided = false
            default: throw ConfigurationError(variable: sampleVariable, problem: "expected true or false")
            }
        }
        return policy
    }

    /// The ConsumptionRequest for `facts`: always one Apple accepts (the body's own checks).
    public func body(for facts: ConsumptionFacts) -> ConsumptionRequestBody {
        let delivered = facts.granted && facts.credits > 0
        let percentage = delivered ? facts.consumptionPercentage : 0
        let preference: ConsumptionRequestBody.RefundPreference?
        switch refundRule {
        case .none:
            preference = nil
        case .declineIfDelivered:
            preference = facts.delivered > 0 && delivered ? .decline : .grantFull
        case .byDelivery:
            if percentage == 0 {
                preference = .grantFull
            } else if percentage >= ConsumptionRequestBody.fullConsumption {
                preference = .decline
            } else {
                preference = .grantProrated
            }
        }
        do {
            return try ConsumptionRequestBody(
                consumptionPercentage: percentage,
                deliveryStatus: delivered ? .delivered : .undeliveredOther,
                refundPreference: preference,
                sampleContentProvided: sampleContentProvided
            )
        } catch {
            // Unreachable: the percentage is in range, zero unless delivered, and above zero with
            // GRANT_PRORATED. Fall back to the plainest valid body rather than trap.
            return try! ConsumptionRequestBody(
                consumptionPercentage: 0,
                deliveryStatus: delivered ? .delivered : .undeliveredOther,
                refundPreference: nil,
                sampleContentProvided: sampleContentProvided
            )
        }
    }
}

/// The ledger side of Send Consumption Information, inside a job's transaction.
public enum ConsumptionLedger {
    /// What became of a CONSUMPTION_REQUEST when it was recorded.
    public enum Recorded: Sendable, Hashable {
        /// The answer is pending; publish this job to send it.
        case pending(SendConsumptionRequest, userID: UserID?)
        /// Nothing will be sent: the user has not consented (`reason`).
        case declinedNoConsent(reason: String, userID: UserID?)
        /// The transaction was answered (or is being answered) for an earlier request.
        case alreadyAnswered(notificationUUID: UUID, state: String)
    }

    /// The ledger's facts about a transaction's purchase (its granting record's credits).
    public static func facts(
        transactionID: String,
        originalTransactionID: String?,
        database: PostgresConnection
    ) throws -> (facts: ConsumptionFacts, userID: UserID?) {
        guard
            let grant = try NotificationLedger.grantingRecord(
                of: transactionID,
                originalTransactionID: originalTransactionID,
                database: database
            )
        else { return (ConsumptionFacts(granted: false, credits: 0, spent: 0, delivered: 0, returned: 0), nil) }
        let row = try database.query(
            """
            SELECT count(*)::int AS credits,
                   count(*) FILTER (WHERE c.consumed)::int AS spent,
                   count(*) FILTER (WHERE c.consumed AND EXISTS (
                       SELECT 1 FROM report_purchases r WHERE r.credit_id = c.id))::int AS delivered,
                   count(*) FILTER (WHERE NOT c.consumed AND EXISTS (
                       SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'refunded'))::int AS returned
            FROM purchase_credits c WHERE c.transaction_id = $1
            """,
            [grant.transactionID]
        ).first
        let facts = ConsumptionFacts(
            granted: true,
            credits: try row?.decode(Int.self, "credits") ?? 0,
            spent: try row?.decode(Int.self, "spent") ?? 0,
            delivered: try row?.decode(Int.self, "delivered") ?? 0,
            returned: try row?.decode(Int.self, "returned") ?? 0
        )
        return (facts, grant.userID)
    }

    /// The user's current consent (their latest answer): its row id and text version when they
    /// consented, nil when they declined, withdrew or never answered.
    public static func consent(userID: UserID, database: PostgresConnection) throws -> (id: Int64, version: String)? {
        guard
            let row = try database.query(
                """
                SELECT id, consented, text_version FROM consumption_consents
                WHERE user_id = $1 ORDER BY id DESC LIMIT 1
                """,
                [userID.uuid]
            ).first, try row.decode(Bool.self, "consented")
        else { return nil }
        return (try row.decode(Int64.self, "id"), try row.decode(String.self, "text_version"))
    }

    /// Records a CONSUMPTION_REQUEST's answer once per transaction: `pending` with a job to
    /// send it when the user consented, `declined-no-consent` otherwise; a transaction answered
    /// before keeps its first answer and gets no second job.
    public static func record(
        notificationUUID: UUID,
        transactionID: String,
        originalTransactionID: String?,
        policy: ConsumptionPolicy,
        parentJobID: JobID,
        database: PostgresConnection
    ) throws -> Recorded {
        if let earlier = try database.query(
            "SELECT notification_uuid, state FROM consumption_answers WHERE transaction_id = $1",
            [transactionID]
        ).first {
            return .alreadyAnswered(
                notificationUUID: try earlier.decode(UUID.self, "notification_uuid"),
                state: try earlier.decode(String.self, "state")
            )
        }
        let (facts, userID) = try Self.facts(
            transactionID: transactionID,
            originalTransactionID: originalTransactionID,
            database: database
        )
        let body = policy.body(for: facts)
        let consent = try userID.flatMap { try Self.consent(userID: $0, database: database) }
        let jobID = JobID.derived(from: parentJobID, purpose: "send-consumption")
        let reason: String? =
            consent != nil
            ? nil
            : userID == nil
                ? "transaction \(transactionID) was never redeemed here: no user whose consent could be asked"
                : "the user has not consented to sharing consumption data"
        struct RecordedFacts: Encodable {
            var facts: ConsumptionFacts
            var refundRule: String
        }
        let inserted = try database.query(
            """
            INSERT INTO consumption_answers (notification_uuid, transaction_id, user_id, state, request_body, facts,
                reason, consent_id, job_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (transaction_id) DO NOTHING
            RETURNING notification_uuid
            """,
            [
                notificationUUID, transactionID, userID?.uuid, consent == nil ? "declined-no-consent" : "pending",
                PostgresRawJSON(String(decoding: body.jsonData(), as: UTF8.self)),
                PostgresJSON(RecordedFacts(facts: facts, refundRule: policy.refundRule.rawValue)), reason, consent?.id,
                jobID.uuid,
            ]
        )
        guard !inserted.isEmpty else {
            // A concurrent request for the same transaction committed first (ON CONFLICT waited
            // for it): report that one.
            let winner = try database.query(
                "SELECT notification_uuid, state FROM consumption_answers WHERE transaction_id = $1",
                [transactionID]
            ).first
            return .alreadyAnswered(
                notificationUUID: try winner?.decode(UUID.self, "notification_uuid") ?? notificationUUID,
                state: try winner?.decode(String.self, "state") ?? "pending"
            )
        }
        if let reason { return .declinedNoConsent(reason: reason, userID: userID) }
        return .pending(
            SendConsumptionRequest(jobID: jobID, notificationUUID: notificationUUID, transactionID: transactionID),
            userID: userID
        )
    }
}
