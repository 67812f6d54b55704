import AstroDomain
import Billing
import Foundation
import Postgres
import StoreKitVerification
import Testing
import WorkerRuntime

/// Restore on a new device (issue 18, part 2): a signed transaction bought by another of our
/// users, sent with `restore: true`, moves that purchase's unspent credits to the caller, once,
/// with `transferred` ledger entries that keep both users' audits balanced. The handlers run
/// against the real database exactly as the runtime runs them (BillingLedgerIntegrationTests'
/// helpers).
@Suite(.timeLimit(.minutes(2)))
struct RestoreTransferTests {
    let ledger: BillingLedgerIntegrationTests
    var pool: PostgresPool { ledger.pool }

    init() async throws {
        ledger = try await BillingLedgerIntegrationTests()
    }

    static let pack5 = "com.astrosvitla.report.credit.pack5"

    /// `billing.verify-purchase` with `restore: true` for `user`.
    func restore(_ jws: String, user: UserID, jobID: JobID = .random()) async throws -> JobOutcome {
        try await ledger.run(
            BillingLedgerIntegrationTests.verify,
            [
                "jobId": .string(jobID.description), "userId": .string(user.description),
                "signedTransaction": .string(jws), "restore": true,
            ],
            type: .billingVerifyPurchase
        )
    }

    /// A user who bought a 5-credit pack (with their own id as appAccountToken) and spent `spent`.
    func buyer(spent: Int) async throws -> (user: UserID, jws: String, transactionID: String) {
        let (user, profile) = try await ledger.userWithProfile()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(Self.pack5, user: user)
        #expect(try await ledger.purchase(jws, user: user).status == .succeeded)
        for area in ReportArea.allCases.prefix(spent) {
            #expect(try await ledger.request(user, profile, area).status == .succeeded)
        }
        return (user, jws, id)
    }

    func transfers(_ transactionID: String) async throws -> (rows: Int, entries: Int) {
        try await pool.withConnection { database in
            let rows =
                try database.query(
                    "SELECT count(*)::int AS n FROM credit_transfers WHERE transaction_id = $1",
                    [transactionID]
                ).first?.decode(Int.self, "n") ?? -1
            let entries =
                try database.query(
                    "SELECT count(*)::int AS n FROM credit_ledger WHERE transaction_id = $1 AND entry = 'transferred'",
                    [transactionID]
                ).first?.decode(Int.self, "n") ?? -1
            return (rows, entries)
        }
    }

    @Test func aRestoreMovesTheUnspentCreditsOnceUnderAHundredConcurrentDeliveries() async throws {
        let old = try await buyer(spent: 2)
        let (newUser, _) = try await ledger.userWithProfile()
        let outcomes = try await withThrowingTaskGroup(of: JobOutcome.self) { group in
            for _ in 0..<100 {
                group.addTask { try await restore(old.jws, user: newUser) }
            }
            var all: [JobOutcome] = []
            for try await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.allSatisfy { $0.status == .succeeded })
        #expect(outcomes.allSatisfy { $0.result?["transferred"] == true })
        #expect(outcomes.allSatisfy { $0.messages.map(\.routingKey) == ["billing.credits-issued"] })
        let first = outcomes.filter { $0.result?["alreadyProcessed"] == false }
        #expect(first.count == 1, "\(first.count) deliveries moved credits")
        let moved = Set(BillingLedgerIntegrationTests.credits(try #require(first.first)))
        #expect(moved.count == 3)
        #expect(outcomes.allSatisfy { Set(BillingLedgerIntegrationTests.credits($0)) == moved })
        let oldBalance = try await ledger.balance(old.user)
        #expect(oldBalance.available == 0 && oldBalance.consumed == 2 && oldBalance.transferredOut == 3)
        #expect(oldBalance.balanced, "\(oldBalance)")
        let newBalance = try await ledger.balance(newUser)
        #expect(newBalance.available == 3 && newBalance.transferredIn == 3 && newBalance.issued == 0)
        #expect(newBalance.balanced, "\(newBalance)")
        let (rows, entries) = try await transfers(old.transactionID)
        #expect(rows == 1 && entries == 6)
        // Spent credits, their reports and the purchase record stay with the buyer.
        let owners = try await pool.withConnection { database in
            try database.query(
                """
                SELECT (SELECT user_id FROM purchase_records WHERE transaction_id = $1) AS buyer,
                       (SELECT count(*)::int FROM purchase_credits WHERE transaction_id = $1 AND consumed AND user_id = $2)
                           AS spent_by_buyer
                """,
                [old.transactionID, old.user.uuid]
            ).first
        }
        #expect(try owners?.decode(UUID.self, "buyer") == old.user.uuid)
        #expect(try owners?.decode(Int.self, "spent_by_buyer") == 2)
    }

    @Test func aSecondRestoreMovesNothingMoreAndAThirdInstallTakesWhatIsLeft() async throws {
        let old = try await buyer(spent: 0)
        let (second, profile) = try await ledger.userWithProfile()
        let first = try await restore(old.jws, user: second)
        #expect(BillingLedgerIntegrationTests.credits(first).count == 5)
        #expect(try await ledger.request(second, profile, .career).status == .succeeded)
        let again = try await restore(old.jws, user: second)
        #expect(again.status == .succeeded && again.result?["alreadyProcessed"] == true)
        #expect(Set(BillingLedgerIntegrationTests.credits(again)) == Set(BillingLedgerIntegrationTests.credits(first)))
        #expect(try await ledger.balance(second).available == 4)
        // The same App Store account on a third install: the 4 unspent credits follow it.
        let (third, _) = try await ledger.userWithProfile()
        #expect(BillingLedgerIntegrationTests.credits(try await restore(old.jws, user: third)).count == 4)
        // And the second install restoring once more gets nothing back: one transfer per user.
        #expect(try await restore(old.jws, user: second).result?["alreadyProcessed"] == true)
        for (user, available) in [(old.user, 0), (second, 0), (third, 4)] {
            let balance = try await ledger.balance(user)
            #expect(balance.available == available && balance.balanced, "\(balance)")
        }
        let moved = try await transfers(old.transactionID)
        #expect(moved.rows == 2 && moved.entries == 18)
    }

    @Test func aForgedForeignRefundedOrSpentTransactionTransfersNothing() async throws {
        let old = try await buyer(spent: 0)
        let (newUser, _) = try await ledger.userWithProfile()
        let foreign = try DevPKI.generate(
            commonNamePrefix: "Foreign",
            notValidBefore: Date().addingTimeInterval(-86_400),
            notValidAfter: Date().addingTimeInterval(86_400 * 30)
        )
        func token(
            bundle: String = BillingDefaults.bundleID,
            environment: String = "Sandbox",
            revoked: Bool = false
        )
            throws -> String
        {
            try BillingLedgerIntegrationTests.pki.signer.sign(
                DevTransactions.transaction(
                    id: old.transactionID,
                    originalID: old.transactionID,
                    productID: Self.pack5,
                    userID: old.user.description,
                    quantity: 1,
                    environment: environment,
                    bundleID: bundle,
                    at: Date(),
                    revoked: revoked
                )
            )
        }
        let (neverRedeemed, _) = try BillingLedgerIntegrationTests.signedPurchase(Self.pack5, user: old.user)
        let cases: [(String, String)] = [
            (
                try BillingLedgerIntegrationTests.signedPurchase(
                    Self.pack5,
                    user: old.user,
                    id: old.transactionID,
                    signer: foreign.signer
                ).jws, "untrusted-certificate-chain"
            ),
            (try token(bundle: "com.example.other"), "bundle-id-mismatch"),
            (try token(environment: "Production"), "environment-mismatch"),
            (try token(revoked: true), "transaction-revoked"),
            (neverRedeemed, RestoreCode.purchaseUnknown.rawValue),
        ]
        for (jws, code) in cases {
            let outcome = try await restore(jws, user: newUser)
            #expect(BillingLedgerIntegrationTests.failureCode(outcome) == code)
            #expect(outcome.messages.map(\.routingKey) == ["billing.purchase-rejected"])
        }
        // Without `restore` the old rule holds: another account's transaction is refused.
        #expect(
            BillingLedgerIntegrationTests.failureCode(try await ledger.purchase(old.jws, user: newUser))
                == "account-mismatch"
        )
        #expect(try await ledger.balance(newUser).available == 0)
        #expect(try await ledger.balance(old.user).available == 5)
        let untouched = try await transfers(old.transactionID)
        #expect(untouched.rows == 0 && untouched.entries == 0)

        // Every credit spent: nothing left to move.
        let spent = try await buyer(spent: 5)
        let outcome = try await restore(spent.jws, user: newUser)
        #expect(BillingLedgerIntegrationTests.failureCode(outcome) == RestoreCode.nothingToTransfer.rawValue)
        let spentMoves = try await transfers(spent.transactionID)
        #expect(spentMoves.rows == 0 && spentMoves.entries == 0)

        // Refunded by Apple after the purchase (the notification revoked the credits).
        let refunded = try await buyer(spent: 0)
        _ = try await ledger.notify(try ledger.signedNotification("REFUND", about: refunded.jws))
        let afterRefund = try await restore(refunded.jws, user: newUser)
        #expect(BillingLedgerIntegrationTests.failureCode(afterRefund) == "transaction-revoked")
        let refundedMoves = try await transfers(refunded.transactionID)
        #expect(refundedMoves.rows == 0 && refundedMoves.entries == 0)
        let balance = try await ledger.balance(newUser)
        #expect(balance.available == 0 && balance.transferredIn == 0 && balance.balanced)
    }

    @Test func aRefundAfterARestoreRevokesFromTheNewOwnerAndAReversalGivesThemBack() async throws {
        let old = try await buyer(spent: 1)
        let (newUser, profile) = try await ledger.userWithProfile()
        #expect(BillingLedgerIntegrationTests.credits(try await restore(old.jws, user: newUser)).count == 4)
        #expect(try await ledger.request(newUser, profile, .career).status == .succeeded)
        let refund = try await ledger.notify(try ledger.signedNotification("REFUND", about: old.jws))
        #expect(refund.result?["action"] == "revoked")
        #expect(refund.result?["credits"]?.arrayValue?.count == 3)
        #expect(refund.result?["debts"]?.arrayValue?.count == 2)
        var oldBalance = try await ledger.balance(old.user)
        var newBalance = try await ledger.balance(newUser)
        #expect(oldBalance.openDebts == 1 && oldBalance.revoked == 0 && oldBalance.balanced, "\(oldBalance)")
        #expect(
            newBalance.available == 0 && newBalance.revoked == 3 && newBalance.openDebts == 1 && newBalance.balanced,
            "\(newBalance)"
        )
        let reversed = try await ledger.notify(try ledger.signedNotification("REFUND_REVERSED", about: old.jws))
        #expect(reversed.result?["credits"]?.arrayValue?.count == 3)
        oldBalance = try await ledger.balance(old.user)
        newBalance = try await ledger.balance(newUser)
        #expect(oldBalance.openDebts == 0 && oldBalance.available == 0 && oldBalance.balanced, "\(oldBalance)")
        #expect(newBalance.available == 3 && newBalance.restored == 3 && newBalance.balanced, "\(newBalance)")
    }

    /// StoreKit may hand the new install a restore transaction (a new id, the purchase's
    /// original id): it moves the credits the original granted.
    @Test func aRestoreTransactionWithANewIdMovesTheOriginalsCredits() async throws {
        let (buyer, _) = try await ledger.userWithProfile()
        let product = "com.astrosvitla.astroinsight.report.career"
        let (original, originalID) = try BillingLedgerIntegrationTests.signedPurchase(product, user: buyer)
        #expect(try await ledger.purchase(original, user: buyer).status == .succeeded)
        let (restoreJWS, restoreID) = try BillingLedgerIntegrationTests.signedPurchase(
            product,
            user: buyer,
            originalID: originalID
        )
        let (newUser, _) = try await ledger.userWithProfile()
        let outcome = try await restore(restoreJWS, user: newUser)
        #expect(outcome.status == .succeeded, "\(String(describing: outcome.result))")
        #expect(outcome.result?["transactionId"]?.stringValue == restoreID)
        #expect(outcome.result?["restoredFrom"]?.stringValue == originalID)
        #expect(outcome.result?["area"] == "career")
        #expect(try await ledger.balance(newUser).availableByArea == ["career": 1])
        let moved = try await transfers(originalID)
        #expect(moved.rows == 1 && moved.entries == 2)
    }

    /// The buyer spends while the new install restores: every credit ends up either spent by the
    /// buyer or moved, never both, and both audits balance.
    @Test func spendingAndRestoringAtOnceNeverBothSpendAndMoveACredit() async throws {
        let (buyer, profile) = try await ledger.userWithProfile()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack10",
            user: buyer
        )
        #expect(try await ledger.purchase(jws, user: buyer).status == .succeeded)
        let (newUser, _) = try await ledger.userWithProfile()
        var requests: [(ReportArea, ReportLanguage)] = []
        for area in ReportArea.allCases {
            for language in ReportLanguage.allCases { requests.append((area, language)) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (area, language) in requests {
                group.addTask { _ = try await ledger.request(buyer, profile, area, language) }
            }
            for _ in 0..<5 { group.addTask { _ = try await restore(jws, user: newUser) } }
            try await group.waitForAll()
        }
        let old = try await ledger.balance(buyer)
        let new = try await ledger.balance(newUser)
        #expect(old.consumed + new.transferredIn == 10, "\(old) \(new)")
        #expect(old.transferredOut == new.transferredIn)
        #expect(old.available == 0 && new.available == new.transferredIn)
        #expect(old.balanced && new.balanced, "\(old) \(new)")
        let misplaced = try await pool.withConnection { database in
            try database.query(
                """
                SELECT count(*)::int AS n FROM purchase_credits c
                WHERE c.transaction_id = $1 AND (
                    (c.consumed AND c.user_id <> $2)
                    OR (NOT c.consumed AND c.user_id <> $3)
                    OR EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'consumed')
                        = EXISTS (SELECT 1 FROM credit_ledger l WHERE l.credit_id = c.id AND l.entry = 'transferred'))
                """,
                [id, buyer.uuid, newUser.uuid]
            ).first?.decode(Int.self, "n")
        }
        #expect(misplaced == 0)
    }

    /// The schema refuses a second move of one credit in one transfer, and a `transferred`
    /// entry that names no transfer, whatever the code does.
    @Test func theLedgerRefusesAnInconsistentTransferEntry() async throws {
        let old = try await buyer(spent: 0)
        let (newUser, _) = try await ledger.userWithProfile()
        _ = try await restore(old.jws, user: newUser)
        await #expect(throws: PostgresError.self) {
            try await pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id, transfer_id,
                        transfer_direction)
                    SELECT user_id, credit_id, transaction_id, entry, job_id, transfer_id, transfer_direction
                    FROM credit_ledger WHERE transaction_id = $1 AND entry = 'transferred' LIMIT 1
                    """,
                    [old.transactionID]
                )
            }
        }
        await #expect(throws: PostgresError.self) {
            try await pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id)
                    SELECT user_id, credit_id, transaction_id, 'transferred', job_id
                    FROM credit_ledger WHERE transaction_id = $1 LIMIT 1
                    """,
                    [old.transactionID]
                )
            }
        }
    }
}
