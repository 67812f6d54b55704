import AstroDomain
import Foundation
import Postgres
import StoreKitVerification
import UUIDText
import WorkerRuntime

/// `billing.store-notification`: an App Store Server Notification V2. Verified like a
/// transaction (the notification and the transaction inside it); processed once per
/// `notificationUUID`. REFUND and REVOKE revoke the purchase's unspent credits and record a
/// debt for spent ones; REFUND_REVERSED gives them back; of these, only the purchase's latest by
/// `signedDate` acts, whatever the arrival order (`NotificationLedger.applyRefundState`: an older
/// one is recorded `superseded`). REFUND_DECLINED changes nothing and is recorded. CONSUMPTION_REQUEST records the answer
/// computed from the ledger (`ConsumptionLedger`) and, when the user consented, publishes
/// `billing.send-consumption` to send it; anything else is recorded.
///
/// A notification that does not verify is dead-lettered with the verifier's reason code.
public struct StoreNotificationHandler: JobHandler {
    public let jobType = JobType.billingStoreNotification
    private let verifier: SignedDataVerifier
    private let consumptionPolicy: ConsumptionPolicy

    /// - Parameters:
    ///   - verifier: verifies the notification and its transaction.
    ///   - consumptionPolicy: how a CONSUMPTION_REQUEST's answer is made.
    public init(verifier: SignedDataVerifier, consumptionPolicy: ConsumptionPolicy = .default) {
        self.verifier = verifier
        self.consumptionPolicy = consumptionPolicy
    }

    public struct Prepared: Sendable {
        var request: StoreNotificationRequest
        var notification: VerifiedNotification
        var notificationUUID: UUID
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(StoreNotificationRequest.self)
        let notification: VerifiedNotification
        do {
            notification = try await verifier.verifyNotification(request.signedPayload)
        } catch {
            throw JobRejection(code: error.reason.rawValue, message: error.detail)
        }
        guard let text = notification.payload.notificationUUID, let uuid = UUID(text: text) else {
            throw JobRejection(code: .malformedPayload, message: "the notification has no notificationUUID")
        }
        guard notification.payload.notificationType?.isEmpty == false else {
            throw JobRejection(code: .malformedPayload, message: "the notification has no notificationType")
        }
        return Prepared(request: request, notification: notification, notificationUUID: uuid)
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let payload = prepared.notification.payload
        let type = payload.notificationType ?? ""
        let transaction = prepared.notification.transaction
        let transactionID = transaction?.transactionID
        // As a purchase is recorded (VerifyPurchaseHandler): a transaction without an original is its own.
        let originalTransactionID = transaction.map { $0.payload.originalTransactionId ?? $0.transactionID }
        let jobID = prepared.request.jobID
        if let duplicate = try NotificationLedger.claim(
            notificationUUID: prepared.notificationUUID,
            type: type,
            subtype: payload.subtype,
            transactionID: transactionID,
            originalTransactionID: originalTransactionID,
            environment: payload.data?.environment,
            signedDate: payload.signedDate,
            payloadJSON: String(decoding: prepared.notification.rawPayload, as: UTF8.self),
            transactionPayloadJSON: transaction.map { String(decoding: $0.rawPayload, as: UTF8.self) },
            jobID: jobID,
            database: database
        ) {
            return JobOutcome(status: .succeeded, result: try Self.fields(duplicate, prepared))
        }
        var effect: NotificationEffect
        var followUps: [OutboxMessage] = []
        var event: EventType = .billingNotificationRecorded
        switch (type, transactionID) {
        case (let type, let id?) where NotificationLedger.refundStateTypes.contains(type):
            var reason = type
            if let code = transaction?.payload.revocationReason { reason += " (revocationReason \(code))" }
            effect = try NotificationLedger.applyRefundState(
                type: type,
                transactionID: id,
                originalTransactionID: originalTransactionID ?? id,
                notificationUUID: prepared.notificationUUID,
                reason: reason,
                revocationDate: transaction?.payload.revocationDate,
                jobID: jobID,
                database: database
            )
            switch effect.action {
            case "revoked": event = .billingCreditsRevoked
            case "restored": event = .billingCreditsRestored
            default: break
            }
        case ("CONSUMPTION_REQUEST", let id?):
            let recorded = try ConsumptionLedger.record(
                notificationUUID: prepared.notificationUUID,
                transactionID: id,
                originalTransactionID: transaction?.payload.originalTransactionId,
                policy: consumptionPolicy,
                parentJobID: jobID,
                database: database
            )
            switch recorded {
            case .pending(let send, let userID):
                effect = NotificationEffect(action: "consumption-answer-pending", transactionID: id, userID: userID)
                effect.note = "billing.send-consumption \(send.jobID) sends the answer"
                // The send job commits with the request: it is published exactly when the
                // answer row exists.
                followUps.append(.job(.billingSendConsumption, body: try JSONCoding.encoder.encode(send)))
            case .declinedNoConsent(let reason, let userID):
                effect = NotificationEffect(
                    action: "consumption-declined-no-consent",
                    transactionID: id,
                    userID: userID
                )
                effect.note = reason
                followUps.append(
                    try .event(
                        JobEvent(
                            jobID: jobID,
                            userID: userID,
                            type: .billingConsumptionAnswered,
                            fields: [
                                "notificationUUID": .string(prepared.notificationUUID.lowercasedText),
                                "transactionId": .string(id), "state": "declined-no-consent", "reason": .string(reason),
                            ]
                        )
                    )
                )
            case .alreadyAnswered(let earlier, let state):
                effect = NotificationEffect(action: "consumption-already-answered", transactionID: id)
                effect.note =
                    "transaction \(id) was answered for request \(earlier.lowercasedText) (\(state)); not sent twice"
            }
            event = .billingConsumptionRequested
        default:
            effect = NotificationEffect(action: "recorded", transactionID: transactionID)
        }
        try NotificationLedger.finish(
            notificationUUID: prepared.notificationUUID,
            effect: effect,
            database: database
        )
        let fields = try Self.fields(effect, prepared)
        guard case .object(let object) = fields else { return JobOutcome(result: fields) }
        return JobOutcome(
            status: .succeeded,
            result: fields,
            messages: [try .event(JobEvent(jobID: jobID, userID: effect.userID, type: event, fields: object))]
                + followUps,
            measurements: BillingMeasurements.notification(effect)
        )
    }

    private static func fields(_ effect: NotificationEffect, _ prepared: Prepared) throws -> JSONValue {
        var fields: [String: JSONValue] = [
            "notificationUUID": .string(prepared.notificationUUID.lowercasedText),
            "notificationType": .string(prepared.notification.payload.notificationType ?? ""),
            "action": .string(effect.action),
            "credits": .array(effect.credits.map { .string($0.description) }),
            "debts": .array(effect.debts.map { .string($0.description) }),
        ]
        if let subtype = prepared.notification.payload.subtype { fields["subtype"] = .string(subtype) }
        if let id = effect.transactionID ?? prepared.notification.transaction?.transactionID {
            fields["transactionId"] = .string(id)
        }
        if let user = effect.userID { fields["userId"] = .string(user.description) }
        if let note = effect.note { fields["note"] = .string(note) }
        return .object(fields)
    }
}
