import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import UUIDText
import WorkerRuntime

/// `billing.send-consumption`: sends the recorded answer to one CONSUMPTION_REQUEST with Send
/// Consumption Information (App Store Server API 1.19+, `PUT /inApps/v2/transactions/
/// consumption/{transactionId}`), once.
///
/// The answer row (`consumption_answers`, written by `billing.store-notification`) is the
/// state machine: `pending` → `sent` (Apple answered 202), `declined-no-consent` (the user
/// withdrew consent before it was sent), or `failed` (Apple refused it: 400/404, or no App Store
/// API is configured). Only a `pending` row is sent, and the update that leaves `pending` names
/// it, so a redelivered job, a replay or a second job for the same transaction sends nothing.
/// Rate limits and server errors are retried by the client (honouring `Retry-After`), then by
/// the runtime's backoff (the job's transient failure); Apple's answer is stored with its time.
public struct SendConsumptionHandler: JobHandler {
    public let jobType = JobType.billingSendConsumption
    private let pool: PostgresPool
    private let appStore: AppStoreServerAPIClient?

    /// - Parameters:
    ///   - pool: the worker's pool, to read the answer row and the consent before sending.
    ///   - appStore: the App Store Server API client; nil when none is configured (every answer
    ///     then ends `failed` with `appstore-not-configured`).
    public init(pool: PostgresPool, appStore: AppStoreServerAPIClient?) {
        self.pool = pool
        self.appStore = appStore
    }

    public enum Prepared: Sendable {
        /// The row is no longer pending (or does not exist): nothing to do.
        case settled(state: String?)
        /// Apple accepted the answer.
        case sent(ConsumptionSendReceipt, userID: UserID?)
        /// Not sent, for good: the row's new state and why.
        case notSent(state: String, reason: String, error: AppStoreAPIError?, userID: UserID?)
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(SendConsumptionRequest.self)
        let uuid = request.notificationUUID
        let row = try await pool.withConnection { database -> AnswerRow? in
            try database.query(
                """
                SELECT a.state, a.transaction_id, a.user_id, a.request_body::text AS body,
                       coalesce((SELECT c.consented FROM consumption_consents c WHERE c.user_id = a.user_id
                                 ORDER BY c.id DESC LIMIT 1), false) AS consented
                FROM consumption_answers a WHERE a.notification_uuid = $1
                """,
                [uuid]
            ).first.map { row in
                AnswerRow(
                    state: try row.decode(String.self, "state"),
                    transactionID: try row.decode(String.self, "transaction_id"),
                    userID: try row.decode(UUID?.self, "user_id").map(UserID.init),
                    body: try row.decode(String.self, "body"),
                    consented: try row.decode(Bool.self, "consented")
                )
            }
        }
        guard let row, row.state == "pending" else { return .settled(state: row?.state) }
        let transactionID = row.transactionID
        let userID = row.userID
        guard transactionID == request.transactionID else {
            throw JobRejection(
                code: .invalidPayload,
                message: "transactionId \(request.transactionID) is not the transaction of request \(uuid)"
            )
        }
        guard row.consented else {
            return .notSent(
                state: "declined-no-consent",
                reason: "the user withdrew consent before the answer was sent",
                error: nil,
                userID: userID
            )
        }
        guard let appStore else {
            return .notSent(
                state: "failed",
                reason: ErrorCode.appStore("not-configured").rawValue
                    + ": no App Store Server API key (APPSTORE_API_KEY_ID)",
                error: nil,
                userID: userID
            )
        }
        let body: ConsumptionRequestBody
        do {
            body = try JSONDecoder().decode(ConsumptionRequestBody.self, from: Data(row.body.utf8))
        } catch {
            throw JobRejection(code: .storedDataUnreadable, message: "the stored ConsumptionRequest: \(error)")
        }
        let receipt: ConsumptionSendReceipt
        do {
            receipt = try await appStore.sendConsumptionInformation(transactionID: transactionID, body: body)
        } catch {
            // A transient error is thrown on: the runtime retries the job with backoff.
            if error.isTransient { throw error }
            return .notSent(
                state: "failed",
                reason: "\(error.code): \(error.description)",
                error: error,
                userID: userID
            )
        }
        return .sent(receipt, userID: userID)
    }

    /// The answer row as `prepare` reads it.
    struct AnswerRow: Sendable {
        var state: String
        var transactionID: String
        var userID: UserID?
        var body: String
        var consented: Bool
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = try job.decode(SendConsumptionRequest.self)
        var fields: [String: JSONValue] = [
            "notificationUUID": .string(request.notificationUUID.lowercasedText),
            "transactionId": .string(request.transactionID),
        ]
        let userID: UserID?
        switch prepared {
        case .settled(let state):
            fields["state"] = state.map(JSONValue.string) ?? .null
            fields["note"] = .string(
                state == nil ? "no recorded consumption request" : "already \(state ?? "settled"); nothing sent"
            )
            return JobOutcome(status: .succeeded, result: .object(fields))
        case .sent(let receipt, let user):
            userID = user
            let updated = try database.query(
                """
                UPDATE consumption_answers
                SET state = 'sent', apple_status = $2, attempts = attempts + $3, sent_at = now(), updated_at = now()
                WHERE notification_uuid = $1 AND state = 'pending'
                RETURNING sent_at
                """,
                [request.notificationUUID, receipt.httpStatus, receipt.attempts]
            )
            fields["state"] = "sent"
            fields["appleStatus"] = .number(Double(receipt.httpStatus))
            fields["attempts"] = .number(Double(receipt.attempts))
            if updated.isEmpty { fields["note"] = "settled concurrently; recorded once" }
        case .notSent(let state, let reason, let error, let user):
            userID = user
            let updated = try database.query(
                """
                UPDATE consumption_answers
                SET state = $2, reason = $3, apple_status = $4, apple_error_code = $5, attempts = attempts + $6,
                    updated_at = now()
                WHERE notification_uuid = $1 AND state = 'pending'
                RETURNING notification_uuid
                """,
                [
                    request.notificationUUID, state, String(reason.prefix(2000)), error?.httpStatus,
                    error?.errorCode.map(Int64.init), error?.attempts ?? 0,
                ]
            )
            fields["state"] = .string(state)
            fields["reason"] = .string(String(reason.prefix(500)))
            if let status = error?.httpStatus { fields["appleStatus"] = .number(Double(status)) }
            if let code = error?.errorCode { fields["appleErrorCode"] = .number(Double(code)) }
            if updated.isEmpty { fields["note"] = "settled concurrently; recorded once" }
        }
        return JobOutcome(
            status: .succeeded,
            result: .object(fields),
            messages: [
                try .event(
                    JobEvent(jobID: request.jobID, userID: userID, type: .billingConsumptionAnswered, fields: fields)
                )
            ]
        )
    }
}
