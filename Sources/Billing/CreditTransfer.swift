import AstroDomain
import Foundation
import Postgres
import UUIDText

/// What a restore on a new device moved: the unspent credits of one purchase, from the users
/// who held them to the caller.
public struct CreditTransfer: Sendable, Hashable {
    /// The transfer's id (named by both ledger entries of every credit it moved).
    public var transferID: UUID
    /// The transaction that granted the credits (the purchase's granting record).
    public var transactionID: String
    /// The transaction the caller presented (the purchase itself, or a restore of it).
    public var presentedTransactionID: String
    public var productID: String
    public var userID: UserID
    /// Who held the credits before (usually one user: the buyer); empty when `alreadyTransferred`.
    public var fromUsers: [UserID]
    /// The credits that moved to `userID`.
    public var credits: [CreditID]
    public var area: ReportArea?
    /// This purchase had been transferred to this user before: nothing moved now; `credits`
    /// are the ones the first transfer moved.
    public var alreadyTransferred: Bool
}

// Why the proof is the signed transaction and not Apple's history: Get Transaction History (v2,
// `GET /inApps/v2/history/{transactionId}`, App Store Server API 1.12+, checked against Apple's
// documentation) lists every transaction of the customer, finished consumables included, 20 a
// page with `revision`/`hasMore`, but it is keyed by any transaction id of the customer, and an id
// proves nothing about who holds the purchase. The JWS the caller's StoreKit hands over is signed
// by Apple for this app and environment; verifying it is what restoring needs (README, "Restore on
// a new device").
extension CreditLedger {
    /// Moves the unspent credits of a verified purchase to the user restoring it on a new
    /// install, once per purchase and receiving user.
    ///
    /// The caller verified the signed transaction (our app, our environment, not revoked) and
    /// found its appAccountToken names `buyer`, another user. Here the ledger checks that
    /// `buyer` redeemed that purchase, then moves every credit of it that is neither spent nor
    /// revoked, from whoever holds it now, to `userID`: per credit, a `transferred` debit
    /// (`out`) for the old holder and a `transferred` credit (`in`) for the new one, so both
    /// users' audits balance. Spent credits, the reports they paid for and the purchase record
    /// stay with their owners.
    ///
    /// The transactions of one purchase serialize on the same advisory lock as
    /// `recordPurchase`, and `credit_transfers` is unique per (purchase, receiving user), so
    /// concurrent or repeated restores move each credit at most once; a repeat answers with
    /// what the first moved. Consumers racing the move lock the same credit rows, so each
    /// credit is either spent by its old holder or moved, never both.
    ///
    /// - Throws: `LedgerRejection` with `RestoreCode.purchaseUnknown` (never redeemed here by
    ///   `buyer`), `transaction-revoked` (refunded since), or `RestoreCode.nothingToTransfer`
    ///   (nothing unspent); `PostgresError` otherwise. A rejection changes nothing.
    public static func transfer(
        presentedTransactionID: String,
        originalTransactionID: String,
        buyer: UserID,
        to userID: UserID,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> CreditTransfer {
        try database.execute("INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [userID.uuid])
        try lockPurchase(originalTransactionID: originalTransactionID, database: database)
        // The presented transaction's own record knows its original; one never seen here (a
        // restore with a new id) is found by the original it names.
        guard
            let grant = try database.query(
                """
                SELECT transaction_id, user_id, product_id, revoked_at IS NOT NULL AS revoked FROM purchase_records
                WHERE restored_from IS NULL AND original_transaction_id = coalesce(
                    (SELECT original_transaction_id FROM purchase_records WHERE transaction_id = $1), $2)
                """,
                [presentedTransactionID, originalTransactionID]
            ).first,
            try grant.decode(UUID.self, "user_id") == buyer.uuid
        else {
            throw LedgerRejection(
                code: RestoreCode.purchaseUnknown.rawValue,
                message: "transaction \(presentedTransactionID) was not redeemed here by the account its "
                    + "appAccountToken names; there is nothing to restore"
            )
        }
        let grantID = try grant.decode(String.self, "transaction_id")
        let productID = try grant.decode(String.self, "product_id")
        if let earlier = try database.query(
            "SELECT id FROM credit_transfers WHERE transaction_id = $1 AND to_user_id = $2",
            [grantID, userID.uuid]
        ).first {
            let transferID = try earlier.decode(UUID.self, "id")
            let credits = try database.query(
                """
                SELECT l.credit_id, c.report_area FROM credit_ledger l JOIN purchase_credits c ON c.id = l.credit_id
                WHERE l.transfer_id = $1 AND l.transfer_direction = 'in' ORDER BY l.credit_id
                """,
                [transferID]
            )
            return CreditTransfer(
                transferID: transferID,
                transactionID: grantID,
                presentedTransactionID: presentedTransactionID,
                productID: productID,
                userID: userID,
                fromUsers: [],
                credits: try credits.map { CreditID(try $0.decode(UUID.self, "credit_id")) },
                area: try credits.first.flatMap { try $0.decode(String?.self, "report_area") }.flatMap(ReportArea.init),
                alreadyTransferred: true
            )
        }
        if try grant.decode(Bool.self, "revoked") {
            throw LedgerRejection(
                code: .transactionRevoked,
                message: "transaction \(grantID) was refunded or revoked by the App Store; nothing to restore"
            )
        }
        // Row locks, taken in id order like every other writer of a purchase's credits: a
        // consumption holding one finishes first, and the row is then re-read (spent: not moved).
        let movable = try database.query(
            """
            SELECT id, user_id, report_area FROM purchase_credits
            WHERE transaction_id = $1 AND user_id <> $2 AND NOT consumed AND NOT revoked
            ORDER BY id FOR UPDATE
            """,
            [grantID, userID.uuid]
        )
        guard !movable.isEmpty else {
            throw LedgerRejection(
                code: RestoreCode.nothingToTransfer.rawValue,
                message: "every credit of transaction \(grantID) is spent or revoked (or already this user's); "
                    + "nothing was moved"
            )
        }
        let credits = try movable.map { CreditID(try $0.decode(UUID.self, "id")) }
        let owners = try movable.map { UserID(try $0.decode(UUID.self, "user_id")) }
        let transferID = UUID()
        try database.execute(
            """
            INSERT INTO credit_transfers (id, transaction_id, presented_transaction_id, to_user_id, credits, job_id)
            VALUES ($1, $2, $3, $4, $5, $6)
            """,
            [transferID, grantID, presentedTransactionID, userID.uuid, credits.count, jobID.uuid]
        )
        let ids = credits.map { $0.uuid.lowercasedText }.joined(separator: ",")
        try database.execute(
            "UPDATE purchase_credits SET user_id = $2 WHERE id = ANY(string_to_array($1, ',')::uuid[])",
            [ids, userID.uuid]
        )
        // The debit from each old holder, then the credit to the new one, per credit.
        try database.execute(
            """
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, transfer_id,
                transfer_direction, reason)
            SELECT c.user_id, c.id, $2, 'transferred', $3, $4, 'out',
                   'moved to another install of the same App Store account (restore)'
            FROM unnest(string_to_array($1, ',')::uuid[], string_to_array($5, ',')::uuid[]) AS c (id, user_id)
            ORDER BY c.id
            """,
            [
                ids, grantID, jobID.uuid, transferID,
                owners.map { $0.uuid.lowercasedText }.joined(separator: ","),
            ]
        )
        try database.execute(
            """
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, transfer_id,
                transfer_direction, reason)
            SELECT $2, c.id, $3, 'transferred', $4, $5, 'in',
                   'restored from another install of the same App Store account'
            FROM unnest(string_to_array($1, ',')::uuid[]) AS c (id)
            ORDER BY c.id
            """,
            [ids, userID.uuid, grantID, jobID.uuid, transferID]
        )
        var fromUsers: [UserID] = []
        for owner in owners where !fromUsers.contains(owner) { fromUsers.append(owner) }
        return CreditTransfer(
            transferID: transferID,
            transactionID: grantID,
            presentedTransactionID: presentedTransactionID,
            productID: productID,
            userID: userID,
            fromUsers: fromUsers,
            credits: credits,
            area: try movable.first.flatMap { try $0.decode(String?.self, "report_area") }.flatMap(ReportArea.init),
            alreadyTransferred: false
        )
    }
}
