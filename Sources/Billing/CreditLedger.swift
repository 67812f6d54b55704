import AstroDomain
import Foundation
import Postgres
import UUIDText

/// The facts of a verified purchase the ledger records (from a verified StoreKit transaction).
public struct PurchaseFacts: Sendable, Hashable {
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var productType: String?
    public var purchaseDate: Date
    public var quantity: Int
    public var environment: String
    /// ISO 4217 code of the storefront's currency (`USD` when the transaction has none).
    public var currency: String
    /// The price the customer paid, in milli-units of `currency`, when the transaction says.
    public var priceMilli: Int64?
    /// The verified payload as JSON text, kept for audits and consumption requests.
    public var payloadJSON: String

    public init(
        transactionID: String,
        originalTransactionID: String,
        productID: String,
        productType: String?,
        purchaseDate: Date,
        quantity: Int,
        environment: String,
        currency: String,
        priceMilli: Int64?,
        payloadJSON: String
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.productType = productType
        self.purchaseDate = purchaseDate
        self.quantity = quantity
        self.environment = environment
        self.currency = currency
        self.priceMilli = priceMilli
        self.payloadJSON = payloadJSON
    }

    /// The customer's price as text (`"199.00 UAH"`), or empty when unknown.
    var localizedPrice: String {
        guard let priceMilli else { return "" }
        let value = Decimal(priceMilli) / 1000
        return "\(value) \(currency)"
    }
}

/// What a purchase granted.
public struct PurchaseGrant: Sendable, Hashable {
    public var transactionID: String
    public var userID: UserID
    public var productID: String
    /// The credits the purchase issued (empty for a restore).
    public var credits: [CreditID]
    public var area: ReportArea?
    /// The transaction had been recorded before: nothing was issued now; `credits` are the
    /// ones the first delivery issued.
    public var alreadyRecorded: Bool
    /// Set when this transaction restores an earlier purchase (same original transaction):
    /// recorded, but no new credits.
    public var restoredFrom: String?
}

/// A credit just spent on a report.
public struct ConsumedCredit: Sendable, Hashable {
    public var creditID: CreditID
    public var transactionID: String
    /// The credit's own area, `nil` for an any-area credit.
    public var creditArea: ReportArea?
}

/// What `report.request` found.
public enum ConsumptionOutcome: Sendable, Hashable {
    /// A credit was consumed for this request.
    case consumed(ConsumedCredit)
    /// The profile already has this report: nothing consumed.
    case existingReport(ReportID)
    /// A credit is already spent on this very report (an earlier request still being written):
    /// nothing consumed.
    case inProgress(creditID: CreditID, requestJobID: JobID)
    /// No available credit for the area or any area.
    case insufficientCredits(available: Int)
}

/// What `billing.refund-credit` did.
public enum RefundOutcome: Sendable, Hashable {
    /// The credit is available again (or, if its purchase was refunded by Apple meanwhile,
    /// revoked and its debt cleared).
    case refunded(userID: UserID, revokedBecausePurchaseRefunded: Bool)
    /// This consumption was refunded before: nothing changed.
    case alreadyRefunded
    /// The LLM was already paid for this report and the user's refunds of paid work today
    /// reached their bound: the credit stays spent, and the ledger records `refund-withheld`.
    case withheld(userID: UserID, refundsToday: Int)
}

/// One ledger movement.
public struct LedgerEntry: Sendable, Hashable, Codable {
    public var id: Int64
    public var entry: String
    public var creditID: CreditID
    public var transactionID: String
    public var jobID: JobID
    public var consumptionJobID: JobID?
    public var profileID: ProfileID?
    public var area: String?
    public var language: String?
    public var reason: String?
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case id, entry
        case creditID = "creditId"
        case transactionID = "transactionId"
        case jobID = "jobId"
        case consumptionJobID = "consumptionJobId"
        case profileID = "profileId"
        case area, language, reason, createdAt
    }
}

/// A user's credits and the ledger's audit of them.
public struct CreditBalance: Sendable, Hashable, Encodable {
    public var userID: UserID
    /// Available credits per area; `any` for any-area credits.
    public var availableByArea: [String: Int]
    public var available: Int
    public var issued: Int
    public var consumed: Int
    public var refunded: Int
    public var revoked: Int
    public var restored: Int
    /// Credits moved to this user by restores on a new install (`transferred`, `in`).
    public var transferredIn: Int = 0
    /// Credits moved from this user to another install of the same App Store account.
    public var transferredOut: Int = 0
    public var openDebts: Int
    /// issued − consumed + refunded − revoked + restored + transferred in − transferred out,
    /// from the ledger alone.
    public var ledgerAvailable: Int
    /// The ledger and the credits table agree.
    public var balanced: Bool { ledgerAvailable == available }

    enum CodingKeys: String, CodingKey {
        case userID = "userId"
        case availableByArea, available, issued, consumed, refunded, revoked, restored
        case transferredIn, transferredOut
        case openDebts, ledgerAvailable, balanced
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userID, forKey: .userID)
        try container.encode(availableByArea, forKey: .availableByArea)
        try container.encode(available, forKey: .available)
        try container.encode(issued, forKey: .issued)
        try container.encode(consumed, forKey: .consumed)
        try container.encode(refunded, forKey: .refunded)
        try container.encode(revoked, forKey: .revoked)
        try container.encode(restored, forKey: .restored)
        try container.encode(transferredIn, forKey: .transferredIn)
        try container.encode(transferredOut, forKey: .transferredOut)
        try container.encode(openDebts, forKey: .openDebts)
        try container.encode(ledgerAvailable, forKey: .ledgerAvailable)
        try container.encode(balanced, forKey: .balanced)
    }
}

/// A ledger operation that cannot be done for this input; never retried.
public struct LedgerRejection: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable code: `transaction-owned-by-another-user`, `profile-not-found`, `chart-not-found`,
    /// `credit-not-found`, `credit-not-consumed-by-request`, `report-already-delivered`, and a
    /// restore's `RestoreCode`s.
    public var code: String
    public var message: String
    public var description: String { "\(code): \(message)" }
}

extension LedgerRejection {
    /// A refusal with a catalogued code.
    init(code: ErrorCode, message: String) {
        self.init(code: code.rawValue, message: message)
    }
}

/// The credit ledger's SQL. Every method runs inside the caller's transaction on the caller's
/// connection (the job's transaction), so a ledger movement, the job's status and its events
/// commit together.
public enum CreditLedger {
    /// Records a verified purchase and issues its credits, once per transaction id.
    ///
    /// A transaction already recorded for the same user issues nothing and returns what the
    /// first delivery issued; concurrent deliveries of one transaction serialize on the unique
    /// `transaction_id` (the loser's insert waits, then finds the row).
    ///
    /// - Throws: `LedgerRejection` (`transaction-owned-by-another-user`) when another user
    ///   recorded it first, `transaction-revoked` when a new purchase's latest refund
    ///   notification (by `signedDate`) revoked it; `PostgresError` otherwise.
    public static func recordPurchase(
        _ facts: PurchaseFacts,
        product: Product,
        userID: UserID,
        jobID: JobID,
        database: PostgresConnection
    ) throws -> PurchaseGrant {
        try database.execute("INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", [userID.uuid])
        // The transactions of one original purchase (the purchase and its restores, in any
        // order, even at once) serialize here, so exactly one of them grants; the others are
        // restores of it. A unique index (migration 0011) backs this up.
        try lockPurchase(originalTransactionID: facts.originalTransactionID, database: database)
        let restoredFrom = try database.query(
            """
            SELECT transaction_id FROM purchase_records
            WHERE (transaction_id = $1 OR original_transaction_id = $1) AND transaction_id <> $2
                AND restored_from IS NULL
            ORDER BY created_at, transaction_id LIMIT 1
            """,
            [facts.originalTransactionID, facts.transactionID]
        ).first.map { try $0.decode(String.self, "transaction_id") }
        // A refund that reached us before the purchase found nothing to revoke: the purchase is
        // refused now if the App Store's latest word on it (by signedDate) is a refund, whatever
        // the transaction the app sent says. A transaction recorded already answers as before.
        if restoredFrom == nil,
            let latest = try NotificationLedger.latestRefundState(
                originalTransactionID: facts.originalTransactionID,
                database: database
            ), latest.revokes,
            try database.query("SELECT 1 FROM purchase_records WHERE transaction_id = $1", [facts.transactionID])
                .isEmpty
        {
            throw LedgerRejection(
                code: .transactionRevoked,
                message: "transaction \(facts.transactionID) was refunded or revoked by the App Store "
                    + "(\(latest.type) notification \(latest.notificationUUID.lowercasedText))"
            )
        }
        // The handler checked the quantity against the product (at most 100), so this cannot overflow.
        let units = min(max(facts.quantity, 1), 100)
        let creditCount = restoredFrom == nil ? product.credits * units : 0
        let recordID = UUID()
        let inserted = try database.query(
            """
            INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                purchase_date, price_usd, localized_price, currency_code, credit_amount, environment,
                restored_date, restored_from, transaction_payload, product_type, verified_by_job)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
                CASE WHEN $12::text IS NULL THEN NULL ELSE now() END, $12, $13, $14, $15)
            ON CONFLICT (transaction_id) DO NOTHING
            RETURNING id
            """,
            [
                recordID, userID.uuid, facts.transactionID, facts.originalTransactionID, facts.productID,
                facts.purchaseDate, product.priceUSD * Decimal(units), facts.localizedPrice,
                facts.currency, creditCount, facts.environment, restoredFrom, PostgresRawJSON(facts.payloadJSON),
                facts.productType, jobID.uuid,
            ]
        )
        guard !inserted.isEmpty else {
            return try existingGrant(transactionID: facts.transactionID, userID: userID, database: database)
        }
        guard creditCount > 0 else {
            return PurchaseGrant(
                transactionID: facts.transactionID,
                userID: userID,
                productID: facts.productID,
                credits: [],
                area: product.area,
                alreadyRecorded: false,
                restoredFrom: restoredFrom
            )
        }
        let credits = try database.query(
            """
            WITH new_credits AS (
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, report_area, purchase_date)
                SELECT gen_random_uuid(), $1, $2, $3, $4, $5 FROM generate_series(1, $6)
                RETURNING id, user_id, transaction_id
            ), issued AS (
                INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id)
                SELECT user_id, id, transaction_id, 'issued', $7 FROM new_credits
            )
            SELECT id FROM new_credits ORDER BY id
            """,
            [
                recordID, facts.transactionID, userID.uuid, product.area?.rawValue, facts.purchaseDate, creditCount,
                jobID.uuid,
            ]
        ).map { CreditID(try $0.decode(UUID.self, "id")) }
        return PurchaseGrant(
            transactionID: facts.transactionID,
            userID: userID,
            productID: facts.productID,
            credits: credits,
            area: product.area,
            alreadyRecorded: false,
            restoredFrom: nil
        )
    }

    /// Serializes everything that changes one original purchase (its grant, restores, transfers
    /// and refund notifications) until the caller's transaction ends.
    /// - Throws: `PostgresError`.
    static func lockPurchase(originalTransactionID: String, database: PostgresConnection) throws {
        try database.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 13))",
            ["purchase:" + originalTransactionID]
        )
    }

    private static func existingGrant(
        transactionID: String,
        userID: UserID,
        database: PostgresConnection
    ) throws -> PurchaseGrant {
        guard
            let record = try database.query(
                "SELECT user_id, product_id, restored_from FROM purchase_records WHERE transaction_id = $1",
                [transactionID]
            ).first
        else {
            // The conflicting row vanished (a concurrent transaction rolled back): retry the job.
            throw PostgresError(kind: .server, message: "purchase record \(transactionID) changed concurrently")
        }
        let owner = UserID(try record.decode(UUID.self, "user_id"))
        guard owner == userID else {
            throw LedgerRejection(
                code: .transactionOwnedByAnotherUser,
                message: "transaction \(transactionID) was already redeemed by another user; nothing was granted"
            )
        }
        let rows = try database.query(
            "SELECT id, report_area FROM purchase_credits WHERE transaction_id = $1 ORDER BY id",
            [transactionID]
        )
        let area = try rows.first.flatMap { try $0.decode(String?.self, "report_area") }.flatMap(ReportArea.init)
        return PurchaseGrant(
            transactionID: transactionID,
            userID: userID,
            productID: try record.decode(String.self, "product_id"),
            credits: try rows.map { CreditID(try $0.decode(UUID.self, "id")) },
            area: area,
            alreadyRecorded: true,
            restoredFrom: try record.decode(String?.self, "restored_from")
        )
    }

    /// Spends one credit on a report, atomically: the oldest available credit of the area,
    /// else the oldest any-area credit, locked with `SKIP LOCKED` so concurrent consumers take
    /// different credits instead of queueing on one row.
    ///
    /// Nothing is consumed when the profile already has the report, or a credit is already
    /// spent on it (requests for one report serialize on an advisory lock of the transaction).
    ///
    /// - Throws: `LedgerRejection` (`ProfileChartRule`'s `profile-not-found`, `chart-not-found`,
    ///   and for a partner `partner-not-allowed`, `same-profile`, `partner-not-found`,
    ///   `partner-chart-not-found`, `zodiac-mismatch`); `PostgresError`.
    public static func consume(_ request: ReportRequest, database: PostgresConnection) throws -> ConsumptionOutcome {
        let profile = request.profileID.uuid
        let partner = try checkProfiles(request, database: database)
        let area = request.area.rawValue
        let language = request.language.rawValue
        // A report for two locks its own key: it is a different report from the profile's own.
        let partnerKey = partner.map { ":" + $0.lowercasedText } ?? ""
        try database.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))",
            ["report:\(profile.lowercasedText):\(area):\(language)\(partnerKey)"]
        )
        if let report = try database.query(
            """
            SELECT id FROM report_purchases
            WHERE profile_id = $1 AND area = $2 AND language = $3 AND partner_profile_id IS NOT DISTINCT FROM $4
            """,
            [profile, area, language, partner]
        ).first {
            return .existingReport(ReportID(try report.decode(UUID.self, "id")))
        }
        if let pending = try database.query(
            """
            SELECT id, consumed_by_job FROM purchase_credits
            WHERE user_profile_id = $1 AND consumed_area = $2 AND consumed_language = $3 AND consumed
                AND consumed_partner_profile_id IS NOT DISTINCT FROM $4
            """,
            [profile, area, language, partner]
        ).first {
            return .inProgress(
                creditID: CreditID(try pending.decode(UUID.self, "id")),
                requestJobID: JobID(try pending.decode(UUID.self, "consumed_by_job"))
            )
        }
        let parameters: [any PostgresBindable] = [
            request.userID.uuid, area, profile, request.jobID.uuid, language, partner,
        ]
        // First pass skips credits other transactions hold; if that finds none, a second pass
        // waits for them, so a holder that rolls back does not make us answer "no credits".
        for sql in [consumeSkippingLocked, consumeWaiting] {
            if let row = try database.query(sql, parameters).first {
                return .consumed(
                    ConsumedCredit(
                        creditID: CreditID(try row.decode(UUID.self, "id")),
                        transactionID: try row.decode(String.self, "transaction_id"),
                        creditArea: try row.decode(String?.self, "report_area").flatMap(ReportArea.init)
                    )
                )
            }
        }
        let available =
            try database.query(
                "SELECT count(*)::int AS n FROM purchase_credits WHERE user_id = $1 AND NOT consumed AND NOT revoked",
                [request.userID.uuid]
            ).first?.decode(Int.self, "n") ?? 0
        return .insufficientCredits(available: available)
    }

    /// Checks a request's profiles before anything is spent: a partner is allowed only for
    /// `relationships`, and `ProfileChartRule` holds for the profile and the partner.
    ///
    /// - Returns: the partner's id, or `nil` for a report about one profile.
    /// - Throws: `LedgerRejection` with a `PartnerRule` or `ProfileChartRule` code.
    static func checkProfiles(_ request: ReportRequest, database: PostgresConnection) throws -> UUID? {
        if let code = request.partnerRejection {
            throw LedgerRejection(
                code: code.rawValue,
                message: code == PartnerRule.sameProfile
                    ? "the partner profile is the report's own profile"
                    : "a partner profile is allowed only for a relationships report"
            )
        }
        let ids = [request.profileID] + (request.partnerProfileID.map { [$0] } ?? [])
        var facts: [UUID: ProfileChartFacts] = [:]
        for row in try database.query(
            """
            SELECT p.id, p.user_id, CASE WHEN c.profile_id IS NULL THEN NULL
                ELSE coalesce(c.chart_data->>'zodiac', 'tropical') END AS zodiac
            FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
            WHERE p.id = $1 OR p.id = $2
            """,
            [ids[0].uuid, ids.last!.uuid]
        ) {
            facts[try row.decode(UUID.self, "id")] = ProfileChartFacts(
                owner: UserID(try row.decode(UUID.self, "user_id")),
                chartZodiac: try row.decode(String?.self, "zodiac")
            )
        }
        if let refusal = ProfileChartRule.check(
            caller: request.userID,
            profileID: request.profileID,
            profile: facts[request.profileID.uuid],
            partnerID: request.partnerProfileID,
            partner: request.partnerProfileID.flatMap { facts[$0.uuid] }
        ) {
            throw LedgerRejection(code: refusal.code, message: refusal.message)
        }
        return request.partnerProfileID?.uuid
    }

    // The area's own credits first, then any-area ones, each an index scan that stops at the
    // first free row: ordering both kinds in one ORDER BY would sort every available credit of
    // the user on each request (a user holding thousands of credits made that the bottleneck).
    private static let consumeSkippingLocked: SQL = """
        WITH area_credit AS (
            SELECT id FROM purchase_credits
            WHERE user_id = $1 AND NOT consumed AND NOT revoked AND report_area = $2
            ORDER BY purchase_date, id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ), any_credit AS (
            SELECT id FROM purchase_credits
            WHERE user_id = $1 AND NOT consumed AND NOT revoked AND report_area IS NULL
                AND NOT EXISTS (SELECT 1 FROM area_credit)
            ORDER BY purchase_date, id
            LIMIT 1
            FOR UPDATE SKIP LOCKED
        ), candidate AS (
            SELECT id FROM area_credit UNION ALL SELECT id FROM any_credit
        ), spent AS (
            UPDATE purchase_credits c
            SET consumed = true, consumed_date = now(), user_profile_id = $3, consumed_by_job = $4,
                consumed_area = $2, consumed_language = $5, consumed_partner_profile_id = $6::uuid
            FROM candidate WHERE c.id = candidate.id
            RETURNING c.id, c.user_id, c.transaction_id, c.report_area
        ), entry AS (
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, consumption_job,
                profile_id, report_area, report_language, partner_profile_id)
            SELECT user_id, id, transaction_id, 'consumed', $4, $4, $3, $2, $5, $6::uuid FROM spent
        )
        SELECT id, transaction_id, report_area FROM spent
        """

    private static let consumeWaiting: SQL = """
        WITH area_credit AS (
            SELECT id FROM purchase_credits
            WHERE user_id = $1 AND NOT consumed AND NOT revoked AND report_area = $2
            ORDER BY purchase_date, id
            LIMIT 1
            FOR UPDATE
        ), any_credit AS (
            SELECT id FROM purchase_credits
            WHERE user_id = $1 AND NOT consumed AND NOT revoked AND report_area IS NULL
                AND NOT EXISTS (SELECT 1 FROM area_credit)
            ORDER BY purchase_date, id
            LIMIT 1
            FOR UPDATE
        ), candidate AS (
            SELECT id FROM area_credit UNION ALL SELECT id FROM any_credit
        ), spent AS (
            UPDATE purchase_credits c
            SET consumed = true, consumed_date = now(), user_profile_id = $3, consumed_by_job = $4,
                consumed_area = $2, consumed_language = $5, consumed_partner_profile_id = $6::uuid
            FROM candidate WHERE c.id = candidate.id AND NOT c.consumed AND NOT c.revoked
            RETURNING c.id, c.user_id, c.transaction_id, c.report_area
        ), entry AS (
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, consumption_job,
                profile_id, report_area, report_language, partner_profile_id)
            SELECT user_id, id, transaction_id, 'consumed', $4, $4, $3, $2, $5, $6::uuid FROM spent
        )
        SELECT id, transaction_id, report_area FROM spent
        """

    /// Gives back the credit a `report.request` consumed, once. If Apple refunded the purchase
    /// meanwhile (a debt was recorded), the credit comes back revoked and the debt is cleared.
    ///
    /// A refund of a report whose LLM calls were already paid (`paid_calls` names its
    /// consumption) is bounded: past `paidRefundsPerUserDay` such refunds of the user today (UTC)
    /// it is withheld — the credit stays spent and the ledger says `refund-withheld` with the
    /// reason — so failing a paid report on purpose (F1: deleting its profile while it is
    /// written) cannot buy unlimited LLM calls with one credit.
    ///
    /// - Throws: `LedgerRejection` (`credit-not-found`, `credit-mismatch`,
    ///   `credit-not-consumed-by-request`, `report-already-delivered`); `PostgresError`.
    public static func refund(
        _ request: RefundCreditRequest,
        paidRefundsPerUserDay: Int = RefundCreditHandler.defaultPaidRefundsPerUserDay,
        database: PostgresConnection
    ) throws -> RefundOutcome {
        // Waits for a report-worker storing a report paid by this credit (it holds the lock shared),
        // so the report_purchases check below sees that report (migration 0004).
        try database.execute("SELECT pg_advisory_xact_lock(credit_lock_key($1))", [request.creditID.uuid])
        guard
            let credit = try database.query(
                """
                SELECT c.user_id, c.transaction_id, c.consumed, c.consumed_by_job, c.user_profile_id,
                       c.consumed_area, c.consumed_language, c.consumed_partner_profile_id,
                       r.revoked_at IS NOT NULL AS purchase_revoked
                FROM purchase_credits c JOIN purchase_records r ON r.id = c.purchase_record_id
                WHERE c.id = $1 FOR UPDATE OF c
                """,
                [request.creditID.uuid]
            ).first
        else {
            throw LedgerRejection(code: .creditNotFound, message: "there is no credit \(request.creditID)")
        }
        // The refund must name what the credit was spent on: only the report-worker publishes
        // billing.refund-credit, but a message on the queue proves nothing about who sent it.
        guard try credit.decode(UUID.self, "user_id") == request.userID.uuid else {
            throw LedgerRejection(
                code: .creditMismatch,
                message: "credit \(request.creditID) does not belong to user \(request.userID)"
            )
        }
        let requestJob = request.requestJobID.uuid
        let consumedBy = try credit.decode(UUID?.self, "consumed_by_job")
        if consumedBy == requestJob {
            let matches =
                try credit.decode(UUID?.self, "user_profile_id") == request.profileID.uuid
                && credit.decode(String?.self, "consumed_area") == request.area.rawValue
                && credit.decode(String?.self, "consumed_language") == request.language.rawValue
                && credit.decode(UUID?.self, "consumed_partner_profile_id") == request.partnerProfileID?.uuid
            guard matches else {
                throw LedgerRejection(
                    code: .creditMismatch,
                    message: "credit \(request.creditID) was not spent on this profile, partner, area and language"
                )
            }
        }
        guard try credit.decode(Bool.self, "consumed"), consumedBy == requestJob else {
            let wasConsumed = try database.query(
                """
                SELECT bool_or(entry = 'refunded') AS refunded, count(*)::int AS n FROM credit_ledger
                WHERE consumption_job = $1 AND credit_id = $2
                """,
                [requestJob, request.creditID.uuid]
            ).first
            if try wasConsumed?.decode(Bool?.self, "refunded") == true { return .alreadyRefunded }
            throw LedgerRejection(
                code: .creditNotConsumedByRequest,
                message: "credit \(request.creditID) was not spent by request \(request.requestJobID)"
            )
        }
        if try !database.query("SELECT 1 FROM report_purchases WHERE credit_id = $1", [request.creditID.uuid])
            .isEmpty
        {
            throw LedgerRejection(
                code: .reportAlreadyDelivered,
                message: "credit \(request.creditID) paid for a report that was delivered; it is not refunded"
            )
        }
        let userID = try credit.decode(UUID.self, "user_id")
        let transactionID = try credit.decode(String.self, "transaction_id")
        // Serialises this user's refunds, so two at once cannot both pass the bound.
        try database.execute("SELECT pg_advisory_xact_lock(hashtext('paid-refunds'), hashtext($1::text))", [userID])
        let paid = try database.query(
            """
            SELECT EXISTS (SELECT 1 FROM paid_calls WHERE consumption_job = $1) AS paid,
                EXISTS (SELECT 1 FROM credit_ledger WHERE consumption_job = $1 AND entry = 'refund-withheld') AS withheld,
                (SELECT count(*)::int FROM credit_ledger l
                 WHERE l.user_id = $2 AND l.entry = 'refunded'
                     AND l.created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                     AND EXISTS (SELECT 1 FROM paid_calls p WHERE p.consumption_job = l.consumption_job)) AS today
            """,
            [requestJob, userID]
        ).first
        let refundsToday = try paid?.decode(Int.self, "today") ?? 0
        // Once withheld, always withheld: a copy of the refund arriving on a later day does not
        // pay the credit back after all.
        if try paid?.decode(Bool.self, "withheld") == true {
            return .withheld(userID: UserID(userID), refundsToday: refundsToday)
        }
        if try paid?.decode(Bool.self, "paid") == true, refundsToday >= paidRefundsPerUserDay {
            try database.execute(
                """
                INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, consumption_job,
                    profile_id, report_area, report_language, reason, partner_profile_id)
                VALUES ($1, $2, $3, 'refund-withheld', $4, $5, $6, $7, $8, $9, $10)
                ON CONFLICT DO NOTHING
                """,
                [
                    userID, request.creditID.uuid, transactionID, request.jobID.uuid, requestJob,
                    try credit.decode(UUID?.self, "user_profile_id"), try credit.decode(String?.self, "consumed_area"),
                    try credit.decode(String?.self, "consumed_language"),
                    String(
                        "\(request.reason): the LLM was already paid and \(refundsToday) refund(s) of paid work "
                            + "were given today (limit \(paidRefundsPerUserDay))".prefix(500)
                    ),
                    try credit.decode(UUID?.self, "consumed_partner_profile_id"),
                ]
            )
            return .withheld(userID: UserID(userID), refundsToday: refundsToday)
        }
        let purchaseRevoked = try credit.decode(Bool.self, "purchase_revoked")
        try database.execute(
            """
            UPDATE purchase_credits
            SET consumed = false, consumed_date = NULL, user_profile_id = NULL, consumed_by_job = NULL,
                consumed_area = NULL, consumed_language = NULL, consumed_partner_profile_id = NULL,
                revoked = $2, revoked_at = CASE WHEN $2 THEN now() END
            WHERE id = $1
            """,
            [request.creditID.uuid, purchaseRevoked]
        )
        try database.execute(
            """
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, consumption_job,
                profile_id, report_area, report_language, reason, partner_profile_id)
            VALUES ($1, $2, $3, 'refunded', $4, $5, $6, $7, $8, $9, $10)
            """,
            [
                userID, request.creditID.uuid, transactionID, request.jobID.uuid, requestJob,
                try credit.decode(UUID?.self, "user_profile_id"), try credit.decode(String?.self, "consumed_area"),
                try credit.decode(String?.self, "consumed_language"), request.reason,
                try credit.decode(UUID?.self, "consumed_partner_profile_id"),
            ]
        )
        if purchaseRevoked {
            try database.execute(
                """
                INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, reason)
                SELECT $1, $2, $3, e, $4, 'the purchase was refunded by the App Store while the report was pending'
                FROM unnest(ARRAY['revoked', 'debt-cleared']) AS e
                """,
                [userID, request.creditID.uuid, transactionID, request.jobID.uuid]
            )
        }
        return .refunded(userID: UserID(userID), revokedBecausePurchaseRefunded: purchaseRevoked)
    }

    /// The user's available credits and the ledger's audit of them.
    public static func balance(userID: UserID, database: PostgresConnection) throws -> CreditBalance {
        let audit = try database.query(
            """
            SELECT issued::int, consumed::int, refunded::int, revoked::int, restored::int, open_debts::int,
                   ledger_available::int, available::int, transferred_in::int, transferred_out::int
            FROM credit_audit WHERE user_id = $1
            """,
            [userID.uuid]
        ).first
        var byArea: [String: Int] = [:]
        for row in try database.query(
            """
            SELECT coalesce(report_area, 'any') AS area, count(*)::int AS n FROM purchase_credits
            WHERE user_id = $1 AND NOT consumed AND NOT revoked GROUP BY 1
            """,
            [userID.uuid]
        ) {
            byArea[try row.decode(String.self, "area")] = try row.decode(Int.self, "n")
        }
        func count(_ column: String) throws -> Int { try audit?.decode(Int.self, column) ?? 0 }
        return CreditBalance(
            userID: userID,
            availableByArea: byArea,
            available: try count("available"),
            issued: try count("issued"),
            consumed: try count("consumed"),
            refunded: try count("refunded"),
            revoked: try count("revoked"),
            restored: try count("restored"),
            transferredIn: try count("transferred_in"),
            transferredOut: try count("transferred_out"),
            openDebts: try count("open_debts"),
            ledgerAvailable: try count("ledger_available")
        )
    }

    /// The user's ledger, oldest first.
    public static func entries(userID: UserID, limit: Int, database: PostgresConnection) throws -> [LedgerEntry] {
        try database.query(
            """
            SELECT id, entry, credit_id, transaction_id, job_id, consumption_job, profile_id, report_area,
                   report_language, reason, created_at
            FROM credit_ledger WHERE user_id = $1 ORDER BY id LIMIT $2
            """,
            [userID.uuid, limit]
        ).map { row in
            LedgerEntry(
                id: try row.decode(Int64.self, "id"),
                entry: try row.decode(String.self, "entry"),
                creditID: CreditID(try row.decode(UUID.self, "credit_id")),
                transactionID: try row.decode(String.self, "transaction_id"),
                jobID: JobID(try row.decode(UUID.self, "job_id")),
                consumptionJobID: try row.decode(UUID?.self, "consumption_job").map(JobID.init),
                profileID: try row.decode(UUID?.self, "profile_id").map(ProfileID.init),
                area: try row.decode(String?.self, "report_area"),
                language: try row.decode(String?.self, "report_language"),
                reason: try row.decode(String?.self, "reason"),
                createdAt: try row.decode(Date.self, "created_at")
            )
        }
    }
}
