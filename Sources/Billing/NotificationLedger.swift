import AstroDomain
import Foundation
import Postgres
import UUIDText

/// What an App Store notification did to the ledger.
public struct NotificationEffect: Sendable, Hashable, Codable {
    /// `revoked`, `restored`, `superseded` (a refund notification older, by `signedDate`, than
    /// the latest one of its purchase: nothing changed), `consumption-answer-pending`,
    /// `consumption-declined-no-consent`, `consumption-already-answered`, `recorded`, or `duplicate`.
    public var action: String
    public var transactionID: String?
    public var userID: UserID?
    /// Credits revoked (REFUND/REVOKE) or given back (REFUND_REVERSED).
    public var credits: [CreditID] = []
    /// Consumed credits of a refunded purchase: the customer got the report and the money back.
    public var debts: [CreditID] = []
    /// Why nothing was done, when nothing was.
    public var note: String?

    enum CodingKeys: String, CodingKey {
        case action
        case transactionID = "transactionId"
        case userID = "userId"
        case credits, debts, note
    }
}

/// The refund notification that decides a purchase's refund state: the latest one by
/// `signedDate` of REFUND, REVOKE and REFUND_REVERSED about any transaction of the purchase.
public struct RefundStateNotification: Sendable, Hashable {
    public var notificationUUID: UUID
    /// `REFUND`, `REVOKE` or `REFUND_REVERSED`.
    public var type: String
    /// Its `signedDate` (when it had none, the time it was received).
    public var signedDate: Date

    /// REFUND or REVOKE: the purchase's credits are revoked; REFUND_REVERSED: they are not.
    public var revokes: Bool { type != NotificationLedger.refundReversed }
}

/// The ledger side of App Store Server Notifications V2, inside the job's transaction.
///
/// Refund notifications (REFUND, REVOKE, REFUND_REVERSED) set a purchase's refund state; Apple
/// may deliver them in any order (retries, the recovery's history), so the one with the latest
/// `signedDate` decides, whatever the arrival order: an older one is recorded as `superseded` and
/// changes nothing (`applyRefundState`). A purchase recorded after its refund arrived is refused
/// (`CreditLedger.recordPurchase`). On equal `signedDate`s a revocation wins over a reversal.
public enum NotificationLedger {
    /// The notification types that set a purchase's refund state.
    public static let refundStateTypes = ["REFUND", "REVOKE", refundReversed]
    static let refundReversed = "REFUND_REVERSED"

    /// The latest refund notification (by `signedDate`) received about the purchase
    /// `originalTransactionID`, this transaction's own included; nil when there is none.
    /// - Important: call it holding the purchase's lock (`CreditLedger.lockPurchase`), so no
    ///   other refund notification of the purchase commits between this and what is done with it.
    /// - Throws: `PostgresError`.
    public static func latestRefundState(
        originalTransactionID: String,
        database: PostgresConnection
    ) throws -> RefundStateNotification? {
        try database.query(
            """
            SELECT notification_uuid, notification_type, coalesce(signed_date, received_at) AS signed
            FROM store_notifications
            WHERE original_transaction_id = $1 AND notification_type IN ('REFUND', 'REVOKE', 'REFUND_REVERSED')
            ORDER BY coalesce(signed_date, received_at) DESC, notification_type = 'REFUND_REVERSED',
                notification_uuid DESC
            LIMIT 1
            """,
            [originalTransactionID]
        ).first.map {
            RefundStateNotification(
                notificationUUID: try $0.decode(UUID.self, "notification_uuid"),
                type: try $0.decode(String.self, "notification_type"),
                signedDate: try $0.decode(Date.self, "signed")
            )
        }
    }

    /// A claimed REFUND, REVOKE or REFUND_REVERSED: applied (`revoke` or `restore`) when it is
    /// the latest refund notification of its purchase by `signedDate`, else recorded as
    /// `superseded` with the later one named. Applying is idempotent (a revoked credit is not
    /// revoked again, a credit not revoked is not restored), so the credits end as the latest
    /// notification says in every arrival order, and the ledger only gains entries.
    /// - Parameters:
    ///   - type: the notification's type, one of `refundStateTypes`.
    ///   - originalTransactionID: the purchase's original transaction, as claimed.
    /// - Throws: `PostgresError`.
    public static func applyRefundState(
        type: String,
        transactionID: String,
        originalTransactionID: String,
        notificationUUID: UUID,
        reason: String,
        revocationDate: Date?,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> NotificationEffect {
        try CreditLedger.lockPurchase(originalTransactionID: originalTransactionID, database: database)
        if let latest = try latestRefundState(originalTransactionID: originalTransactionID, database: database),
            latest.notificationUUID != notificationUUID
        {
            var effect = NotificationEffect(action: "superseded", transactionID: transactionID)
            effect.userID = try grantingRecord(
                of: transactionID,
                originalTransactionID: originalTransactionID,
                database: database
            )?.userID
            effect.note =
                "\(latest.type) \(latest.notificationUUID.lowercasedText) signed "
                + "\(ISO8601.string(from: latest.signedDate)) is later and decides; this one changes nothing"
            return effect
        }
        if type == refundReversed {
            return try restore(
                transactionID: transactionID,
                originalTransactionID: originalTransactionID,
                notificationUUID: notificationUUID,
                jobID: jobID,
                database: database
            )
        }
        return try revoke(
            transactionID: transactionID,
            originalTransactionID: originalTransactionID,
            notificationUUID: notificationUUID,
            reason: reason,
            revocationDate: revocationDate,
            jobID: jobID,
            database: database
        )
    }

    /// Claims a notification by its UUID. Returns the earlier outcome when it was processed
    /// before (Apple redelivers until it sees a 200); a concurrent duplicate waits for the first
    /// to commit.
    public static func claim(
        notificationUUID: UUID,
        type: String,
        subtype: String?,
        transactionID: String?,
        originalTransactionID: String?,
        environment: String?,
        signedDate: Date?,
        payloadJSON: String,
        transactionPayloadJSON: String?,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> NotificationEffect? {
        let inserted = try database.query(
            """
            INSERT INTO store_notifications (notification_uuid, notification_type, subtype, transaction_id,
                original_transaction_id, environment, signed_date, payload, transaction_payload, outcome, job_id)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '{"action": "processing"}', $10)
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING notification_uuid
            """,
            [
                notificationUUID, type, subtype, transactionID, originalTransactionID, environment, signedDate,
                PostgresRawJSON(payloadJSON), transactionPayloadJSON.map(PostgresRawJSON.init), jobID.uuid,
            ]
        )
        if !inserted.isEmpty { return nil }
        let earlier = try database.query(
            "SELECT outcome FROM store_notifications WHERE notification_uuid = $1",
            [notificationUUID]
        ).first
        var effect =
            try earlier?.decodeJSON(NotificationEffect.self, "outcome")
            ?? NotificationEffect(action: "recorded")
        effect.note = "notification \(notificationUUID.lowercasedText) was processed before (\(effect.action))"
        effect.action = "duplicate"
        return effect
    }

    /// Stores what was done about a claimed notification. (A CONSUMPTION_REQUEST's answer lives
    /// in `consumption_answers` since migration 0024; `consumption_info` keeps older rows only.)
    public static func finish(
        notificationUUID: UUID,
        effect: NotificationEffect,
        database: PostgresConnection
    ) throws {
        try database.execute(
            "UPDATE store_notifications SET outcome = $2 WHERE notification_uuid = $1",
            [notificationUUID, PostgresJSON(effect)]
        )
    }

    /// REFUND or REVOKE: revokes the purchase's unconsumed credits and records a debt for each
    /// consumed one. Credits being consumed right now are waited for (row locks), so each ends
    /// up exactly one of revoked or debt.
    ///
    /// The credits are those of the purchase's granting record, whichever of its transactions
    /// the notification names: a restore that reached us before its original purchase granted
    /// the credits itself, and the original was recorded as its restore.
    /// - Parameters:
    ///   - transactionID: the notification's transaction.
    ///   - originalTransactionID: its original transaction, for a transaction never seen here.
    static func revoke(
        transactionID: String,
        originalTransactionID: String?,
        notificationUUID: UUID,
        reason: String,
        revocationDate: Date?,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> NotificationEffect {
        guard
            let grant = try grantingRecord(
                of: transactionID,
                originalTransactionID: originalTransactionID,
                database: database
            )
        else {
            return NotificationEffect(
                action: "recorded",
                transactionID: transactionID,
                note: "transaction \(transactionID) was never redeemed here; nothing to revoke"
            )
        }
        let userID = grant.userID
        try database.execute(
            """
            UPDATE purchase_records SET revoked_at = coalesce($3, now()), revocation_reason = $4
            WHERE transaction_id IN ($1, $2)
            """,
            [transactionID, grant.transactionID, revocationDate, reason]
        )
        var effect = NotificationEffect(action: "revoked", transactionID: transactionID, userID: userID)
        if grant.transactionID != transactionID {
            effect.note =
                "the credits of \(transactionID)'s purchase were granted by transaction \(grant.transactionID)"
        }
        let credits = try database.query(
            """
            SELECT id, user_id, consumed, revoked,
                   EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'debt')
                   AND NOT EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'debt-cleared')
                       AS open_debt
            FROM purchase_credits c WHERE transaction_id = $1 AND forfeited_at IS NULL ORDER BY id FOR UPDATE
            """,
            [grant.transactionID]
        )
        for credit in credits {
            let id = try credit.decode(UUID.self, "id")
            // The credit's holder now, not the buyer: a restore on a new install may have moved it
            // (CreditTransfer.swift), and each user's audit must see its own credits' movements.
            let userID = UserID(try credit.decode(UUID.self, "user_id"))
            if try credit.decode(Bool.self, "revoked") { continue }
            if try credit.decode(Bool.self, "consumed") {
                if try credit.decode(Bool.self, "open_debt") { continue }
                try appendEntry(
                    "debt",
                    credit: id,
                    userID: userID,
                    transactionID: grant.transactionID,
                    jobID: jobID,
                    notificationUUID: notificationUUID,
                    reason: reason,
                    database: database
                )
                effect.debts.append(CreditID(id))
            } else {
                try database.execute(
                    "UPDATE purchase_credits SET revoked = true, revoked_at = now() WHERE id = $1",
                    [id]
                )
                try appendEntry(
                    "revoked",
                    credit: id,
                    userID: userID,
                    transactionID: grant.transactionID,
                    jobID: jobID,
                    notificationUUID: notificationUUID,
                    reason: reason,
                    database: database
                )
                effect.credits.append(CreditID(id))
            }
        }
        return effect
    }

    /// REFUND_REVERSED: gives back the credits the refund revoked and clears its debts (of the
    /// purchase's granting record, as `revoke`). A credit forfeited by its user's deletion stays
    /// revoked (un-revoking it would break `purchase_credits_forfeited_revoked`).
    static func restore(
        transactionID: String,
        originalTransactionID: String?,
        notificationUUID: UUID,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> NotificationEffect {
        guard
            let grant = try grantingRecord(
                of: transactionID,
                originalTransactionID: originalTransactionID,
                database: database
            )
        else {
            return NotificationEffect(
                action: "recorded",
                transactionID: transactionID,
                note: "transaction \(transactionID) was never redeemed here; nothing to restore"
            )
        }
        let userID = grant.userID
        try database.execute(
            """
            UPDATE purchase_records SET revoked_at = NULL, revocation_reason = NULL
            WHERE transaction_id IN ($1, $2)
            """,
            [transactionID, grant.transactionID]
        )
        var effect = NotificationEffect(action: "restored", transactionID: transactionID, userID: userID)
        if grant.transactionID != transactionID {
            effect.note =
                "the credits of \(transactionID)'s purchase were granted by transaction \(grant.transactionID)"
        }
        let reason = "refund reversed"
        let credits = try database.query(
            """
            SELECT id, user_id, revoked,
                   (SELECT count(*) FILTER (WHERE entry = 'debt') - count(*) FILTER (WHERE entry = 'debt-cleared')
                    FROM credit_ledger l WHERE l.credit_id = c.id)::int AS open_debts
            FROM purchase_credits c WHERE transaction_id = $1 AND forfeited_at IS NULL ORDER BY id FOR UPDATE
            """,
            [grant.transactionID]
        )
        for credit in credits {
            let id = try credit.decode(UUID.self, "id")
            // The credit's holder now, not the buyer: a restore on a new install may have moved it
            // (CreditTransfer.swift), and each user's audit must see its own credits' movements.
            let userID = UserID(try credit.decode(UUID.self, "user_id"))
            if try credit.decode(Bool.self, "revoked") {
                try database.execute(
                    "UPDATE purchase_credits SET revoked = false, revoked_at = NULL WHERE id = $1",
                    [id]
                )
                try appendEntry(
                    "restored",
                    credit: id,
                    userID: userID,
                    transactionID: grant.transactionID,
                    jobID: jobID,
                    notificationUUID: notificationUUID,
                    reason: reason,
                    database: database
                )
                effect.credits.append(CreditID(id))
            }
            if try credit.decode(Int.self, "open_debts") > 0 {
                try appendEntry(
                    "debt-cleared",
                    credit: id,
                    userID: userID,
                    transactionID: grant.transactionID,
                    jobID: jobID,
                    notificationUUID: notificationUUID,
                    reason: reason,
                    database: database
                )
                effect.debts.append(CreditID(id))
            }
        }
        return effect
    }

    /// The record that granted the credits of a transaction's purchase: the one record of its
    /// original transaction that is not a restore (migration 0011 allows no second). The
    /// original is the transaction's own record's, or, for a transaction never recorded here,
    /// the one the notification names.
    static func grantingRecord(
        of transactionID: String,
        originalTransactionID: String?,
        database: PostgresConnection
    ) throws -> (transactionID: String, userID: UserID)? {
        try database.query(
            """
            SELECT transaction_id, user_id FROM purchase_records
            WHERE restored_from IS NULL AND original_transaction_id = coalesce(
                (SELECT original_transaction_id FROM purchase_records WHERE transaction_id = $1), $2)
            ORDER BY created_at LIMIT 1
            """,
            [transactionID, originalTransactionID]
        ).first.map { (try $0.decode(String.self, "transaction_id"), UserID(try $0.decode(UUID.self, "user_id"))) }
    }

    private static func appendEntry(
        _ entry: String,
        credit: UUID,
        userID: UserID,
        transactionID: String,
        jobID: JobID,
        notificationUUID: UUID,
        reason: String,
        database: PostgresConnection
    ) throws {
        try database.execute(
            """
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, notification_uuid, reason)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """,
            [userID.uuid, credit, transactionID, entry, jobID.uuid, notificationUUID, reason]
        )
    }
}
