import AppStoreServerAPI
import AppStoreServerFake
import AstroDomain
import Billing
import Crypto
import Foundation
import Postgres
import StoreKitVerification
import Testing
import WorkerRuntime

/// Issue 29, F9: refund notifications (REFUND, REVOKE, REFUND_REVERSED) act by `signedDate`, not
/// by arrival: in every order, with duplicates, three interleaved, at once and through the
/// recovery's history, the credits and the ledger end as the latest-signed notification says,
/// and the ledger stays append-only and balanced. Real database; notifications signed with the
/// development PKI and run through the real handlers (BillingLedgerIntegrationTests' helpers).
@Suite(.timeLimit(.minutes(4)))
struct RefundOrderTests {
    /// Notifications about one purchase, signed one minute apart in the order of `types` (all at
    /// the same instant when `sameInstant`), delivered in the order of `arrivals` (indexes into
    /// `types`; an index twice is Apple delivering the same notification again).
    struct Order: Sendable, CustomTestStringConvertible {
        var types: [String]
        var arrivals: [Int]
        var sameInstant = false

        var testDescription: String {
            let signed = types.enumerated().map { "\($0.element)@t\(sameInstant ? 0 : $0.offset)" }
            return
                "signed \(signed.joined(separator: ", ")); arriving \(arrivals.map { "#\($0)" }.joined(separator: " "))"
        }

        /// What the latest-signed notification says: REFUND/REVOKE revoke, REFUND_REVERSED restores;
        /// on one instant a revocation wins.
        var endsRevoked: Bool {
            if sameInstant { return types.contains { $0 != "REFUND_REVERSED" } }
            return types.last != "REFUND_REVERSED"
        }

        /// Each arrival's expected action: a repeat is a duplicate; one signed before a
        /// notification that arrived earlier is superseded; the others act.
        var expectedActions: [String] {
            var seen: [Int] = []
            return arrivals.map { index in
                defer { if !seen.contains(index) { seen.append(index) } }
                if seen.contains(index) { return "duplicate" }
                let later = seen.contains { other in
                    sameInstant
                        ? (types[other] != "REFUND_REVERSED" && types[index] == "REFUND_REVERSED") : other > index
                }
                if later { return "superseded" }
                return types[index] == "REFUND_REVERSED" ? "restored" : "revoked"
            }
        }
    }

    static func permutations(_ items: [Int]) -> [[Int]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index in
            var rest = items
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }

    static let orders: [Order] = {
        var orders: [Order] = []
        // Two: a refund and its reversal, each way round, with redeliveries.
        for arrivals in [[0, 1], [1, 0], [0, 0, 1], [1, 0, 0], [1, 1, 0], [0, 1, 1, 0], [1, 0, 1]] {
            orders.append(Order(types: ["REFUND", "REFUND_REVERSED"], arrivals: arrivals))
        }
        // A reversal older than a refund (refunded again), and a Family Sharing REVOKE.
        for arrivals in [[0, 1], [1, 0]] {
            orders.append(Order(types: ["REFUND_REVERSED", "REFUND"], arrivals: arrivals))
            orders.append(Order(types: ["REVOKE", "REFUND_REVERSED"], arrivals: arrivals))
            // Signed in the same millisecond: the revocation wins, whichever arrives first.
            orders.append(Order(types: ["REFUND", "REFUND_REVERSED"], arrivals: arrivals, sameInstant: true))
        }
        // Three, every interleaving: refunded, reversed, refunded again; and refunded twice, then reversed.
        for arrivals in permutations([0, 1, 2]) {
            orders.append(Order(types: ["REFUND", "REFUND_REVERSED", "REFUND"], arrivals: arrivals))
            orders.append(Order(types: ["REFUND", "REFUND", "REFUND_REVERSED"], arrivals: arrivals))
        }
        // Three with a redelivery in the middle.
        orders.append(Order(types: ["REFUND", "REFUND_REVERSED", "REFUND"], arrivals: [2, 0, 2, 1, 0]))
        orders.append(Order(types: ["REFUND", "REFUND", "REFUND_REVERSED"], arrivals: [1, 2, 1, 0, 2]))
        return orders
    }()

    let ledger: BillingLedgerIntegrationTests

    init() async throws {
        ledger = try await BillingLedgerIntegrationTests()
    }

    /// The state a purchase's refund notifications left: credits, the audit, the record's mark.
    struct PurchaseState: Equatable, CustomStringConvertible {
        var available: Int
        var openDebts: Int
        var balanced: Bool
        var recordRevoked: Bool
        var description: String {
            "available \(available), open debts \(openDebts), balanced \(balanced), record revoked \(recordRevoked)"
        }
        /// A 5-credit pack with 2 credits spent: refunded, 3 revoked and 2 debts; else 3 available.
        static let revoked = PurchaseState(available: 0, openDebts: 2, balanced: true, recordRevoked: true)
        static let restored = PurchaseState(available: 3, openDebts: 0, balanced: true, recordRevoked: false)
    }

    func state(_ user: UserID, transaction: String) async throws -> PurchaseState {
        let balance = try await ledger.balance(user)
        let revoked = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT revoked_at IS NOT NULL AS revoked FROM purchase_records WHERE transaction_id = $1",
                [transaction]
            ).first?.decode(Bool.self, "revoked")
        }
        return PurchaseState(
            available: balance.available,
            openDebts: balance.openDebts,
            balanced: balance.balanced,
            recordRevoked: revoked ?? false
        )
    }

    /// A user holding a 5-credit pack, 2 credits spent on reports.
    func purchaseWithTwoSpent() async throws -> (user: UserID, jws: String, transaction: String) {
        let (user, profile) = try await ledger.userWithProfile()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        #expect(BillingLedgerIntegrationTests.credits(try await ledger.purchase(jws, user: user)).count == 5)
        _ = try await ledger.request(user, profile, .career)
        _ = try await ledger.request(user, profile, .health)
        return (user, jws, id)
    }

    func ledgerEntries(_ user: UserID) async throws -> [String] {
        try await ledger.pool.withConnection { database in
            try database.query("SELECT entry FROM credit_ledger WHERE user_id = $1 ORDER BY id", [user.uuid])
                .map { try $0.decode(String.self, "entry") }
        }
    }

    @Test(arguments: orders)
    func theLatestSignedRefundNotificationDecidesInEveryArrivalOrder(_ order: Order) async throws {
        let (user, jws, transaction) = try await purchaseWithTwoSpent()
        let base = Date().addingTimeInterval(-3_600)
        let notifications = try order.types.enumerated().map { index, type in
            try ledger.signedNotification(
                type,
                about: jws,
                at: base.addingTimeInterval(order.sameInstant ? 0 : Double(index) * 60)
            )
        }
        var actions: [String] = []
        var entries = try await ledgerEntries(user)
        for index in order.arrivals {
            let outcome = try await ledger.notify(notifications[index])
            #expect(outcome.status == .succeeded)
            actions.append(outcome.result?["action"]?.stringValue ?? "?")
            // Append-only: every earlier entry is still there, unchanged, in its place.
            let now = try await ledgerEntries(user)
            #expect(Array(now.prefix(entries.count)) == entries, "the ledger lost or changed entries")
            entries = now
            #expect(try await ledger.balance(user).balanced, "unbalanced after #\(index)")
        }
        #expect(actions == order.expectedActions)
        let expected = order.endsRevoked ? PurchaseState.revoked : .restored
        #expect(try await state(user, transaction: transaction) == expected)
        // Each credit's own history ends where its state is: revocations and restorations
        // alternate, debts and their clearing too.
        let perCredit = try await ledger.pool.withConnection { database in
            try database.query(
                """
                SELECT credit_id, array_agg(entry ORDER BY id)::text AS entries FROM credit_ledger
                WHERE user_id = $1 AND entry IN ('revoked', 'restored', 'debt', 'debt-cleared') GROUP BY credit_id
                """,
                [user.uuid]
            ).map { try $0.decode(String.self, "entries") }
        }
        for history in perCredit {
            #expect(!history.contains("revoked,revoked") && !history.contains("restored,restored"), "\(history)")
            #expect(!history.contains("debt,debt,") && !history.hasSuffix("debt,debt}"), "\(history)")
        }
    }

    /// Three notifications of one purchase committed at once, by three connections: the purchase's
    /// lock orders them, and the credits still end as the latest-signed one says.
    @Test(arguments: [["REFUND", "REFUND_REVERSED", "REFUND"], ["REFUND", "REFUND", "REFUND_REVERSED"]])
    func refundNotificationsCommittedAtOnceEndAsTheLatestSays(_ types: [String]) async throws {
        for _ in 0..<4 {
            let (user, jws, transaction) = try await purchaseWithTwoSpent()
            let base = Date().addingTimeInterval(-3_600)
            let notifications = try types.enumerated().map { index, type in
                try ledger.signedNotification(type, about: jws, at: base.addingTimeInterval(Double(index) * 60))
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for notification in notifications.shuffled() {
                    group.addTask { _ = try await ledger.notify(notification) }
                }
                try await group.waitForAll()
            }
            let expected = types.last == "REFUND_REVERSED" ? PurchaseState.restored : .revoked
            #expect(try await state(user, transaction: transaction) == expected)
        }
    }

    /// A refund that reached us before its purchase was redeemed here: the purchase is refused
    /// while the latest word is the refund, and granted once a later reversal arrived.
    @Test func aPurchaseRedeemedAfterItsRefundArrivedIsRefusedUntilTheRefundIsReversed() async throws {
        let (user, _) = try await ledger.userWithProfile()
        let (jws, transaction) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        let base = Date().addingTimeInterval(-3_600)
        let refund = try await ledger.notify(try ledger.signedNotification("REFUND", about: jws, at: base))
        #expect(refund.result?["action"] == "recorded")
        let refused = try await ledger.purchase(jws, user: user)
        #expect(BillingLedgerIntegrationTests.failureCode(refused) == "transaction-revoked")
        #expect(try await ledger.balance(user).issued == 0)
        // The reversal, signed later, arrives: the purchase now counts.
        let reversal = try ledger.signedNotification("REFUND_REVERSED", about: jws, at: base.addingTimeInterval(60))
        #expect(try await ledger.notify(reversal).result?["action"] == "recorded")
        let granted = try await ledger.purchase(jws, user: user)
        #expect(BillingLedgerIntegrationTests.credits(granted).count == 5)
        // A redelivery of the older refund changes nothing now.
        let late = try await ledger.notify(
            try ledger.signedNotification("REFUND", about: jws, at: base.addingTimeInterval(-60))
        )
        #expect(late.result?["action"] == "superseded")
        #expect(try await state(user, transaction: transaction).available == 5)
    }

    /// Credits forfeited by the user's deletion stay revoked when a refund is reversed (they
    /// broke `purchase_credits_forfeited_revoked` before, and the notification dead-lettered).
    @Test func aReversalLeavesForfeitedCreditsRevoked() async throws {
        let (user, jws, transaction) = try await purchaseWithTwoSpent()
        // As user.delete forfeits the unspent credits.
        _ = try await ledger.pool.withTransaction { database in
            try database.execute(
                """
                WITH forfeited AS (
                    UPDATE purchase_credits SET revoked = true, revoked_at = now(), forfeited_at = now()
                    WHERE user_id = $1 AND NOT consumed AND NOT revoked RETURNING id, transaction_id
                )
                INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, reason)
                SELECT $1, id, transaction_id, 'forfeited', gen_random_uuid(), 'user-deleted' FROM forfeited
                """,
                [user.uuid]
            )
        }
        let base = Date().addingTimeInterval(-3_600)
        _ = try await ledger.notify(try ledger.signedNotification("REFUND", about: jws, at: base))
        let reversal = try await ledger.notify(
            try ledger.signedNotification("REFUND_REVERSED", about: jws, at: base.addingTimeInterval(60))
        )
        #expect(reversal.status == .succeeded && reversal.result?["action"] == "restored")
        let state = try await state(user, transaction: transaction)
        #expect(state.available == 0 && state.openDebts == 0 && state.balanced, "\(state)")
    }

    /// Get Notification History lists a reversal before the older refund it reverses, and a
    /// refund that was already applied live comes back with a reversal: the recovery applies
    /// them oldest first, and a live notification older than what was recovered is superseded.
    @Test func theRecoveryAppliesTheHistoryBySignedDate() async throws {
        let key = P256.Signing.PrivateKey()
        let fake = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "ORDER1",
            issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            publicKey: key.publicKey
        )
        defer { fake.stop() }
        let client = AppStoreServerAPIClient(
            configuration: try AppStoreServerAPIConfiguration(
                baseURL: fake.baseURL,
                keyID: fake.keyID,
                issuerID: fake.issuerID,
                bundleID: BillingDefaults.bundleID,
                signingKey: key,
                retryPolicy: .init(maxAttempts: 1)
            )
        )
        let handler = RecoverNotificationsHandler(verifier: BillingLedgerIntegrationTests.verifier, appStore: client)
        let (user, jws, transaction) = try await purchaseWithTwoSpent()
        let base = Date().addingTimeInterval(-1_800)
        let refund = try ledger.signedNotification("REFUND", about: jws, at: base)
        let reversal = try ledger.signedNotification("REFUND_REVERSED", about: jws, at: base.addingTimeInterval(60))
        // Listed newest first (as sent after retries): arrival order would end revoked.
        fake.addNotificationHistory(signedPayload: reversal, sentAt: base.addingTimeInterval(120))
        fake.addNotificationHistory(signedPayload: refund, sentAt: base.addingTimeInterval(180))
        let now = Date()
        let window = try JSONValue.parse(
            JSONCoding.encoder.encode(
                RecoverNotificationsRequest(
                    jobID: .random(),
                    since: now.addingTimeInterval(-3_600),
                    until: now,
                    trigger: .operatorRequest
                )
            )
        )
        let recovered = try await ledger.run(handler, window, type: .billingRecoverNotifications)
        #expect(recovered.result?["applied"] == 2, "\(String(describing: recovered.result))")
        let actions = recovered.result?["notifications"]?.arrayValue?.compactMap { $0["action"]?.stringValue }
        #expect(actions == ["revoked", "restored"])
        #expect(try await state(user, transaction: transaction) == .restored)
        // A refund signed before the reversal, delivered live only now: superseded.
        let stale = try await ledger.notify(
            try ledger.signedNotification("REFUND", about: jws, at: base.addingTimeInterval(30))
        )
        #expect(stale.result?["action"] == "superseded")
        #expect(stale.messages.map(\.routingKey) == ["billing.notification-recorded"])
        #expect(try await state(user, transaction: transaction) == .restored)
    }
}
