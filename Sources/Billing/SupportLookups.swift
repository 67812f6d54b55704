import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import StoreKitVerification
import UUIDText

/// What support needs to answer a customer: an order from their receipt, a user's whole billing
/// timeline, and Apple's refunds compared with the ledger. Read-only; every signed answer from
/// Apple is verified before a field of it is shown.
public enum SupportLookups {
    /// One credit of a purchase and where it went.
    public struct CreditTrail: Sendable, Codable, Hashable {
        public var creditID: String
        /// `available`, `spent` or `revoked`.
        public var state: String
        /// The area the credit is for (`nil`: any area).
        public var area: String?
        /// The report it paid for, when it was spent and the report was delivered.
        public var reportID: String?
        public var reportArea: String?
        public var reportLanguage: String?
        public var profileID: String?
        /// Spent, but no report stored (being written, or failed and given back since).
        public var spentWithoutReport: Bool
        /// A refund of a spent credit left a debt that is still open.
        public var openDebt: Bool
        /// The ledger entries of this credit, oldest first (`issued 2026-…`, `consumed …`).
        public var entries: [String]
    }

    /// What our ledger knows about one App Store transaction.
    public struct LedgerTrail: Sendable, Codable, Hashable {
        /// The user the purchase was credited to.
        public var userID: String
        /// The record that granted the credits (this transaction, or the original a restore points to).
        public var grantedBy: String
        public var productID: String
        public var creditsGranted: Int
        public var revokedAt: Date?
        public var revocationReason: String?
        public var credits: [CreditTrail]
    }

    /// One signed transaction of an order, verified, with our side of it.
    public struct OrderTransaction: Sendable, Codable, Hashable {
        public var transactionID: String?
        public var originalTransactionID: String?
        public var productID: String?
        public var purchaseDate: Date?
        public var quantity: Int?
        public var revocationDate: Date?
        /// Nil when it verified; else the verifier's reason code (its fields are then not shown).
        public var verificationFailure: String?
        /// Nil when the ledger has no record of it (never redeemed here).
        public var ledger: LedgerTrail?
    }

    /// Look Up Order ID's answer, with the ledger's side.
    public struct OrderReport: Sendable, Codable, Hashable {
        public var orderID: String
        /// Apple's `OrderLookupStatus`: `valid` (0) or `invalid` (1, an unknown order id).
        public var status: String
        public var transactions: [OrderTransaction]
    }

    /// The order on a customer's receipt: Apple's transactions, each verified, and where each
    /// one's credits went.
    /// - Throws: `AppStoreAPIError` from the look-up, `PostgresError` from the ledger.
    public static func order(
        _ orderID: String,
        appStore: AppStoreServerAPIClient,
        verifier: SignedDataVerifier,
        pool: PostgresPool
    ) async throws -> OrderReport {
        let lookup = try await appStore.lookUpOrder(orderID: orderID)
        var transactions: [OrderTransaction] = []
        for signed in lookup.signedTransactions.prefix(100) {
            do {
                let verified = try await verifier.verifyTransaction(signed)
                let payload = verified.payload
                let id = verified.transactionID
                let original = payload.originalTransactionId
                let ledger = try await pool.withConnection { database in
                    try ledgerTrail(transactionID: id, originalTransactionID: original, database: database)
                }
                transactions.append(
                    OrderTransaction(
                        transactionID: id,
                        originalTransactionID: original,
                        productID: payload.productId,
                        purchaseDate: payload.purchaseDate,
                        quantity: payload.quantity,
                        revocationDate: payload.revocationDate,
                        verificationFailure: nil,
                        ledger: ledger
                    )
                )
            } catch let error as VerificationFailure {
                transactions.append(OrderTransaction(verificationFailure: error.reason.rawValue))
            }
        }
        return OrderReport(orderID: orderID, status: lookup.isValid ? "valid" : "invalid", transactions: transactions)
    }

    /// The ledger's record of a transaction's purchase and the trail of each of its credits.
    public static func ledgerTrail(
        transactionID: String,
        originalTransactionID: String?,
        database: PostgresConnection
    ) throws -> LedgerTrail? {
        guard
            let grant = try NotificationLedger.grantingRecord(
                of: transactionID,
                originalTransactionID: originalTransactionID,
                database: database
            ),
            let record = try database.query(
                """
                SELECT product_id, credit_amount, revoked_at, revocation_reason
                FROM purchase_records WHERE transaction_id = $1
                """,
                [grant.transactionID]
            ).first
        else { return nil }
        let rows = try database.query(
            """
            SELECT c.id, c.consumed, c.revoked, c.report_area, c.user_profile_id,
                   r.id AS report_id, r.area, r.language,
                   EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'debt')
                   AND NOT EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'debt-cleared')
                       AS open_debt,
                   coalesce((SELECT string_agg(l.entry || ' ' || to_char(l.created_at AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS"Z"') || coalesce(' (' || l.reason || ')', ''), '; ' ORDER BY l.id)
                       FROM credit_ledger l WHERE l.credit_id = c.id), '') AS entries
            FROM purchase_credits c LEFT JOIN report_purchases r ON r.credit_id = c.id
            WHERE c.transaction_id = $1 ORDER BY c.purchase_date, c.id LIMIT 1000
            """,
            [grant.transactionID]
        )
        let credits = try rows.map { row throws(PostgresError) -> CreditTrail in
            let consumed = try row.decode(Bool.self, "consumed")
            let revoked = try row.decode(Bool.self, "revoked")
            let reportID = try row.decode(UUID?.self, "report_id")
            let entries = try row.decode(String.self, "entries")
            return CreditTrail(
                creditID: try row.decode(UUID.self, "id").lowercasedText,
                state: revoked ? "revoked" : (consumed ? "spent" : "available"),
                area: try row.decode(String?.self, "report_area"),
                reportID: reportID?.lowercasedText,
                reportArea: try row.decode(String?.self, "area"),
                reportLanguage: try row.decode(String?.self, "language"),
                profileID: try row.decode(UUID?.self, "user_profile_id")?.lowercasedText,
                spentWithoutReport: consumed && reportID == nil,
                openDebt: try row.decode(Bool.self, "open_debt"),
                entries: entries.isEmpty ? [] : entries.components(separatedBy: "; ")
            )
        }
        return LedgerTrail(
            userID: grant.userID.description,
            grantedBy: grant.transactionID,
            productID: try record.decode(String.self, "product_id"),
            creditsGranted: try record.decode(Int.self, "credit_amount"),
            revokedAt: try record.decode(Date?.self, "revoked_at"),
            revocationReason: try record.decode(String?.self, "revocation_reason"),
            credits: credits
        )
    }

    // MARK: - The user's timeline

    /// One line of a user's billing timeline.
    public struct TimelineItem: Sendable, Codable, Hashable {
        public var at: Date
        /// `purchase`, `purchase-revoked`, a ledger entry (`ledger:issued`, `ledger:consumed`, …),
        /// `notification`, `consumption-info`, `consumption-sent` or `report-delivered`.
        public var kind: String
        public var transactionID: String?
        public var detail: String
    }

    /// The most timeline items one look-up returns.
    public static let maxTimelineItems = 5_000

    /// Everything our tables know about a user's purchases, in time order: purchases and their
    /// revocations, every ledger entry, the App Store notifications about their transactions (with
    /// what was done about each), consumption information recorded and sent, reports delivered.
    /// - Parameter limit: 1…`maxTimelineItems` (clamped); the newest are kept when there are more.
    public static func timeline(userID: UserID, limit: Int, database: PostgresConnection) throws -> [TimelineItem] {
        let limit = max(1, min(limit, maxTimelineItems))
        let rows = try database.query(
            """
            WITH mine AS (
                SELECT transaction_id, original_transaction_id FROM purchase_records WHERE user_id = $1
            ), items AS (
                SELECT p.created_at AS at, 'purchase' AS kind, p.transaction_id,
                       p.product_id || ', ' || p.credit_amount || ' credit(s), ' || p.environment
                       || coalesce(', restore of ' || p.restored_from, '') AS detail
                FROM purchase_records p WHERE p.user_id = $1
                UNION ALL
                SELECT p.revoked_at, 'purchase-revoked', p.transaction_id, coalesce(p.revocation_reason, '')
                FROM purchase_records p WHERE p.user_id = $1 AND p.revoked_at IS NOT NULL
                UNION ALL
                SELECT l.created_at, 'ledger:' || l.entry, l.transaction_id,
                       'credit ' || l.credit_id || coalesce(', ' || l.report_area || '/' || l.report_language, '')
                       || coalesce(', ' || l.reason, '')
                FROM credit_ledger l WHERE l.user_id = $1
                UNION ALL
                SELECT n.received_at, 'notification', n.transaction_id,
                       n.notification_type || coalesce('/' || n.subtype, '') || ' → '
                       || coalesce(n.outcome ->> 'action', '?') || coalesce(' (' || (n.outcome ->> 'note') || ')', '')
                FROM store_notifications n
                WHERE n.transaction_id IN (SELECT transaction_id FROM mine)
                   OR n.original_transaction_id IN (SELECT original_transaction_id FROM mine)
                UNION ALL
                SELECT n.received_at, 'consumption-info', n.transaction_id, n.consumption_info::text
                FROM store_notifications n
                WHERE n.consumption_info IS NOT NULL AND (n.transaction_id IN (SELECT transaction_id FROM mine)
                   OR n.original_transaction_id IN (SELECT original_transaction_id FROM mine))
                UNION ALL
                SELECT n.consumption_sent_at, 'consumption-sent', n.transaction_id, 'sent to Apple'
                FROM store_notifications n
                WHERE n.consumption_sent_at IS NOT NULL AND (n.transaction_id IN (SELECT transaction_id FROM mine)
                   OR n.original_transaction_id IN (SELECT original_transaction_id FROM mine))
                UNION ALL
                SELECT r.created_at, 'report-delivered', r.transaction_id,
                       'report ' || r.id || ', ' || r.area || '/' || r.language || coalesce(', credit ' || r.credit_id, '')
                FROM report_purchases r WHERE r.user_id = $1
            )
            SELECT * FROM (SELECT * FROM items ORDER BY at DESC, kind LIMIT $2) newest ORDER BY at, kind
            """,
            [userID.uuid, limit]
        )
        return try rows.map { row throws(PostgresError) in
            TimelineItem(
                at: try row.decode(Date.self, "at"),
                kind: try row.decode(String.self, "kind"),
                transactionID: try row.decode(String?.self, "transaction_id"),
                detail: try row.decode(String.self, "detail")
            )
        }
    }

    // MARK: - Refunds: Apple's history against the ledger

    /// One refund Apple reports, and whether the ledger knows it.
    public struct RefundLine: Sendable, Codable, Hashable {
        public var transactionID: String
        public var originalTransactionID: String?
        public var productID: String?
        public var revocationDate: Date?
        public var revocationReason: Int?
        /// `in-ledger` (the purchase is revoked here too), `missing-in-ledger` (we still count
        /// it as paid: a notification was missed), or `unknown-transaction` (never redeemed here).
        public var status: String
        public var ledgerRevokedAt: Date?
        public var ledgerUserID: String?
        public var flagged: Bool { status != "in-ledger" }
    }

    /// Get Refund History compared with the ledger.
    public struct RefundReport: Sendable, Codable, Hashable {
        public var userID: String
        /// The transaction id the history was asked with.
        public var askedWith: String
        public var pages: Int
        public var refunds: [RefundLine]
        /// Purchases of the user revoked here that Apple's refund history does not list (a
        /// `REVOKE`, e.g. Family Sharing ended, rather than a refund).
        public var revokedHereOnly: [String]
        /// Signed transactions that did not verify (their reasons), not compared.
        public var unverified: [String]
        public var flagged: Int
    }

    /// The most pages of refund history read (20 refunds each).
    public static let maxRefundPages = 50

    /// Apple's refund history for the user (asked with `transactionID`, default the user's
    /// newest purchase), page by page, each refund verified and compared with the ledger.
    /// - Returns: nil when the user has no purchase to ask with.
    /// - Throws: `AppStoreAPIError`, `PostgresError`.
    public static func refunds(
        userID: UserID,
        transactionID: String?,
        appStore: AppStoreServerAPIClient,
        verifier: SignedDataVerifier,
        pool: PostgresPool
    ) async throws -> RefundReport? {
        let asked: String?
        if let transactionID {
            asked = transactionID
        } else {
            asked = try await pool.withConnection { database in
                try database.query(
                    "SELECT transaction_id FROM purchase_records WHERE user_id = $1 ORDER BY purchase_date DESC LIMIT 1",
                    [userID.uuid]
                ).first.map { try $0.decode(String.self, "transaction_id") }
            }
        }
        guard let asked else { return nil }
        var revision: String?
        var pages = 0
        var signed: [String] = []
        repeat {
            let page = try await appStore.refundHistory(transactionID: asked, revision: revision)
            pages += 1
            signed += page.signedTransactions
            revision = page.hasMore && pages < maxRefundPages ? page.revision : nil
        } while revision != nil
        var refunds: [RefundLine] = []
        var unverified: [String] = []
        for jws in signed {
            do {
                let verified = try await verifier.verifyTransaction(jws)
                refunds.append(
                    RefundLine(
                        transactionID: verified.transactionID,
                        originalTransactionID: verified.payload.originalTransactionId,
                        productID: verified.payload.productId,
                        revocationDate: verified.payload.revocationDate,
                        revocationReason: verified.payload.revocationReason,
                        status: "unknown-transaction"
                    )
                )
            } catch {
                unverified.append(error.reason.rawValue)
            }
        }
        let compared = refunds
        let (pageCount, unverifiedReasons) = (pages, unverified)
        return try await pool.withConnection { database in
            var lines: [RefundLine] = []
            for var line in compared {
                if let row = try database.query(
                    "SELECT user_id, revoked_at FROM purchase_records WHERE transaction_id = $1",
                    [line.transactionID]
                ).first {
                    line.ledgerUserID = try row.decode(UUID.self, "user_id").lowercasedText
                    line.ledgerRevokedAt = try row.decode(Date?.self, "revoked_at")
                    line.status = line.ledgerRevokedAt == nil ? "missing-in-ledger" : "in-ledger"
                }
                lines.append(line)
            }
            let listed = Set(lines.map(\.transactionID))
            let revokedHere = try database.query(
                """
                SELECT transaction_id FROM purchase_records
                WHERE user_id = $1 AND revoked_at IS NOT NULL ORDER BY revoked_at LIMIT 1000
                """,
                [userID.uuid]
            ).map { row throws(PostgresError) in try row.decode(String.self, "transaction_id") }
            return RefundReport(
                userID: userID.description,
                askedWith: asked,
                pages: pageCount,
                refunds: lines,
                revokedHereOnly: revokedHere.filter { !listed.contains($0) },
                unverified: unverifiedReasons,
                flagged: lines.filter(\.flagged).count
            )
        }
    }
}
