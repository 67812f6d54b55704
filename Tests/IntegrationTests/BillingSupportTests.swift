import AMQP
import AppStoreServerAPI
import AppStoreServerFake
import AstroDomain
import Billing
import Crypto
import Foundation
import Postgres
import StoreKitVerification
import TestProcesses
import Testing
import WorkerRuntime

/// Support look-ups and missed notifications (issue 18, parts 3 and 4) against the App Store
/// fake, with real astroctl, billing-worker and gateway processes on the real broker and database.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct BillingSupportTests {
    let ledger: BillingLedgerIntegrationTests
    let fake: AppStoreServerFake
    let keyFile: URL

    init() async throws {
        ledger = try await BillingLedgerIntegrationTests()
        let key = P256.Signing.PrivateKey()
        fake = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "SUPPORT1",
            issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            publicKey: key.publicKey
        )
        keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("support-key-\(UUID()).p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
    }

    /// The billing-worker's App Store and verification settings, shared with astroctl.
    var appStoreEnvironment: [String: String] {
        [
            "BILLING_ENVIRONMENT": "Sandbox",
            "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
            "APPSTORE_API_KEY_ID": fake.keyID, "APPSTORE_API_ISSUER_ID": fake.issuerID,
            "APPSTORE_API_PRIVATE_KEY_FILE": keyFile.path, "APPSTORE_API_BASE_URL": fake.baseURL.absoluteString,
        ]
    }

    func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        // The test database as its owner, as an operator's astroctl connects.
        let database = try await RuntimeTestEnvironment.database()
        let url =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        return try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            arguments,
            environment: appStoreEnvironment.merging(["DATABASE_URL": url]) { _, new in new }
        )
    }

    static func json(_ result: ProcessRunner.Result) throws -> JSONValue {
        try JSONValue.parse(Data(result.output.utf8))
    }

    func close() async {
        fake.stop()
        await ledger.pool.close()
        try? FileManager.default.removeItem(at: keyFile)
    }

    // MARK: - Look-ups

    @Test func anOrderShowsWhereEachCreditWentAndRefundsAppleKnowsAloneAreFlagged() async throws {
        defer { Task { [self] in await close() } }
        let (user, profile) = try await ledger.userWithProfile()
        // A pack of five, one credit spent on a career report; a single credit Apple refunded
        // and we were told (REFUND); a single credit Apple refunded and we never heard of.
        let pack = try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        #expect(BillingLedgerIntegrationTests.credits(try await ledger.purchase(pack.jws, user: user)).count == 5)
        let spend = try await ledger.request(user, profile, .career)
        #expect(BillingLedgerIntegrationTests.failureCode(spend) == nil)
        let told = try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.single", user: user)
        _ = try await ledger.purchase(told.jws, user: user)
        _ = try await ledger.notify(try ledger.signedNotification("REFUND", about: told.jws))
        let untold = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user
        )
        _ = try await ledger.purchase(untold.jws, user: user)
        let stranger = DevTransactions.newTransactionID()

        // Look Up Order ID: the receipt's order holds the pack and the refunded single.
        fake.registerOrder("MK5TTTVWJH", signedTransactions: [pack.jws, told.jws])
        let order = try await astroctl(["billing", "order", "MK5TTTVWJH", "--json"])
        #expect(order.status == 0, "\(order.error)")
        let report = try Self.json(order)
        #expect(report["status"] == "valid")
        let transactions = try #require(report["transactions"]?.arrayValue)
        #expect(transactions.count == 2)
        let packLedger = try #require(
            transactions.first { $0["transactionID"]?.stringValue == pack.transactionID }?["ledger"]
        )
        #expect(packLedger["userID"]?.stringValue == user.description)
        #expect(packLedger["creditsGranted"] == 5)
        let states = (packLedger["credits"]?.arrayValue ?? []).compactMap { $0["state"]?.stringValue }
        #expect(states.sorted() == ["available", "available", "available", "available", "spent"], "\(states)")
        let toldLedger = try #require(
            transactions.first { $0["transactionID"]?.stringValue == told.transactionID }?["ledger"]
        )
        #expect(toldLedger["revokedAt"] != nil && toldLedger["revokedAt"] != .null)
        #expect((toldLedger["credits"]?.arrayValue ?? []).compactMap { $0["state"]?.stringValue } == ["revoked"])
        let human = try await astroctl(["billing", "order", "MK5TTTVWJH"])
        #expect(human.status == 0 && human.output.contains("credited to user \(user)"), "\(human.output)")

        // An order Apple does not know: status 1, exit 1; a malformed id never reaches Apple.
        let before = fake.requestCount
        let unknown = try await astroctl(["billing", "order", "ZZZZ9999", "--json"])
        #expect(unknown.status == 1)
        #expect(try Self.json(unknown)["status"] == "invalid")
        let malformed = try await astroctl(["billing", "order", "MK5-TTT;rm"])
        #expect(malformed.status != 0 && malformed.error.contains("order id"), "\(malformed.error)")
        #expect(fake.requestCount == before + 1)

        // The timeline, from our tables only.
        let history = try await astroctl(["billing", "history", "--user", user.description, "--json"])
        #expect(history.status == 0, "\(history.error)")
        let kinds = Set((try Self.json(history).arrayValue ?? []).compactMap { $0["kind"]?.stringValue })
        for kind in [
            "purchase", "purchase-revoked", "ledger:issued", "ledger:consumed", "ledger:revoked", "notification",
        ] {
            #expect(kinds.contains(kind), "\(kind) missing from \(kinds)")
        }
        let badUser = try await astroctl(["billing", "history", "--user", "not-a-uuid"])
        #expect(badUser.status != 0 && badUser.error.contains("--user"))

        // Get Refund History, two pages: the told refund is in the ledger; the untold one and a
        // transaction never redeemed here are flagged.
        let untoldRefund = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user,
            id: untold.transactionID,
            revoked: true
        )
        let toldRefund = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user,
            id: told.transactionID,
            revoked: true
        )
        let strangerRefund = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user,
            id: stranger,
            revoked: true
        )
        fake.setPageSize(2)
        fake.registerRefunds(
            [toldRefund.jws, untoldRefund.jws, strangerRefund.jws],
            forTransactionIDs: [pack.transactionID, told.transactionID, untold.transactionID]
        )
        let refunds = try await astroctl(["billing", "refunds", "--user", user.description, "--json"])
        #expect(refunds.status == 1, "flagged refunds exit 1: \(refunds.error)")
        let compared = try Self.json(refunds)
        #expect(compared["pages"] == 2)
        #expect(compared["flagged"] == 2)
        var statuses: [String: String] = [:]
        for line in compared["refunds"]?.arrayValue ?? [] {
            statuses[line["transactionID"]?.stringValue ?? "?"] = line["status"]?.stringValue
        }
        #expect(
            statuses == [
                told.transactionID: "in-ledger", untold.transactionID: "missing-in-ledger",
                stranger: "unknown-transaction",
            ],
            "\(statuses)"
        )
        let humanRefunds = try await astroctl(["billing", "refunds", "--user", user.description])
        #expect(humanRefunds.output.contains("FLAG missing-in-ledger"), "\(humanRefunds.output)")
    }

    // MARK: - Missed notifications and the test notification

    @Test func missedNotificationsAreAppliedOnceAfterDowntimeAndTheTestNotificationMakesTheRoundTrip() async throws {
        defer { Task { [self] in await close() } }
        let testStart = Date()
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [
            .billingStoreNotification, .billingRecoverNotifications,
        ])
        defer { Task { await publisher.close() } }
        let pool = ledger.pool

        // Two purchases. The first's REFUND reached us before the downtime; the second's did
        // not. A TEST reached us too, another did not, and a forged one sits in Apple's history.
        let (user, _) = try await ledger.userWithProfile()
        let seen = try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        let missed = try BillingLedgerIntegrationTests.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        _ = try await ledger.purchase(seen.jws, user: user)
        _ = try await ledger.purchase(missed.jws, user: user)
        let seenRefund = try ledger.signedNotification("REFUND", about: seen.jws)
        _ = try await ledger.notify(seenRefund)
        let signer = BillingLedgerIntegrationTests.pki.signer
        func test(_ uuid: UUID) throws -> String {
            try signer.sign(
                JSONValue.object([
                    "notificationType": "TEST", "notificationUUID": .string(uuid.uuidString.lowercased()),
                    "version": "2.0", "signedDate": .number((Date().timeIntervalSince1970 * 1000).rounded(.down)),
                    "data": ["bundleId": .string(BillingDefaults.bundleID), "environment": "Sandbox"],
                ])
            )
        }
        let seenTest = try test(UUID())
        _ = try await ledger.notify(seenTest)
        let missedRefundUUID = UUID()
        let missedRefund = try ledger.signedNotification("REFUND", about: missed.jws, uuid: missedRefundUUID)
        let missedTestUUID = UUID()
        let missedTest = try test(missedTestUUID)
        let start = Date().addingTimeInterval(-86_400)
        let forger = try DevPKI.generate(notValidBefore: start, notValidAfter: start.addingTimeInterval(86_400 * 30))
        let forged = try GatewayAppleTests.signedNotification(
            "REFUND",
            about: missed.jws,
            uuid: UUID(),
            signer: forger.signer
        )
        let sent = Date().addingTimeInterval(-240)
        for (index, jws) in [seenRefund, missedRefund, seenTest, missedTest, forged].enumerated() {
            fake.addNotificationHistory(signedPayload: jws, sentAt: sent.addingTimeInterval(Double(index)))
        }
        fake.setPageSize(3)

        // The billing-worker starts after the "downtime": its start-up recovery reads both pages.
        let worker = try await GatewayHarness.start(
            "billing-worker",
            environment: appStoreEnvironment.merging([
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .billingWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "BILLING_RECOVER_ON_START": "true",
            ]) { _, new in new },
            label: "support-billing"
        )
        let workerProcesses = GatewayHarness.Processes(processes: [worker])
        defer { workerProcesses.stop() }

        func recovery(trigger: String) async throws -> [String: Int]? {
            try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT pages, fetched, applied, already_seen, rejected FROM store_notification_recoveries
                    WHERE trigger = $1 AND finished_at >= $2 ORDER BY finished_at DESC LIMIT 1
                    """,
                    [trigger, testStart]
                ).first.map {
                    [
                        "pages": try $0.decode(Int.self, "pages"), "fetched": try $0.decode(Int.self, "fetched"),
                        "applied": try $0.decode(Int.self, "applied"),
                        "alreadySeen": try $0.decode(Int.self, "already_seen"),
                        "rejected": try $0.decode(Int.self, "rejected"),
                    ]
                }
            }
        }
        var startUp: [String: Int]?
        do {
            try await RuntimeTestEnvironment.eventually("the start-up recovery finishes", timeout: .seconds(45)) {
                startUp = try await recovery(trigger: "start-up")
                return startUp != nil
            }
        } catch {
            Issue.record("no start-up recovery:\n\(workerProcesses.output)")
            throw error
        }
        #expect(
            startUp == ["pages": 2, "fetched": 5, "applied": 2, "alreadySeen": 2, "rejected": 1],
            "\(String(describing: startUp))"
        )
        let tokens = fake.notificationHistoryTokens
        #expect(tokens.first == .some(nil) && Set(tokens.compactMap { $0 }).count == 1, "\(tokens)")
        let balance = try await ledger.balance(user)
        #expect(balance.revoked == 10 && balance.available == 0 && balance.balanced, "\(balance)")
        let processed = try await pool.withConnection { database in
            try database.query(
                "SELECT notification_uuid, outcome ->> 'action' AS action FROM store_notifications WHERE notification_uuid IN ($1, $2)",
                [missedRefundUUID, missedTestUUID]
            ).map { (try $0.decode(UUID.self, "notification_uuid"), try $0.decode(String.self, "action")) }
        }
        #expect(
            Dictionary(uniqueKeysWithValues: processed) == [missedRefundUUID: "revoked", missedTestUUID: "recorded"]
        )

        // On demand, the same window again: nothing is applied twice.
        let again = try await astroctl(["billing", "notifications", "recover", "--since", "1h", "--json"])
        #expect(again.status == 0, "\(again.output)\(again.error)\n\(workerProcesses.output)")
        let event = try Self.json(again)
        #expect(event["type"] == "billing.notifications-recovered")
        #expect(event["applied"] == 0 && event["alreadySeen"] == 4 && event["rejected"] == 1, "\(event)")
        let revokedEntries = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM credit_ledger WHERE user_id = $1 AND entry = 'revoked'",
                [user.uuid]
            ).first?.decode(Int.self, "n")
        }
        #expect(revokedEntries == 10)
        let badWindow = try await astroctl(["billing", "notifications", "recover", "--since", "yesterday-ish"])
        #expect(badWindow.status != 0 && badWindow.error.contains("--since"))

        // The test notification: Apple (the fake) posts a signed TEST to the real gateway, which
        // queues it for the billing-worker, which records it; astroctl sees it arrive.
        let gateway = try await GatewayHarness.launch(label: "support-gateway")
        defer { gateway.processes.stop() }
        let signTest: AppStoreServerFake.PayloadSigner = { try signer.sign(payload: $0) }
        fake.configureNotifications(
            url: URL(string: "\(gateway.base)/v1/appstore/notifications")!,
            bundleID: BillingDefaults.bundleID,
            environment: "Sandbox",
            signer: signTest
        )
        let roundTrip = try await astroctl(["billing", "notifications", "test", "--timeout", "30", "--json"])
        #expect(roundTrip.status == 0, "\(roundTrip.output)\(roundTrip.error)\n\(gateway.processes.output)")
        let verdict = try Self.json(roundTrip)
        #expect(verdict["received"] == true && verdict["action"] == "recorded", "\(verdict)")
        // The fake records the gateway's answer when its POST returns, which may be just after
        // the worker recorded the notification.
        try await RuntimeTestEnvironment.eventually("the fake saw the gateway's 200", timeout: .seconds(10)) {
            fake.testNotificationResults.values.contains(.some(200))
        }

        // Nothing listens at the URL: Apple's attempts say why, and astroctl fails.
        fake.configureNotifications(
            url: URL(string: "http://127.0.0.1:9/v1/appstore/notifications")!,
            bundleID: BillingDefaults.bundleID,
            environment: "Sandbox",
            signer: signTest
        )
        let broken = try await astroctl(["billing", "notifications", "test", "--timeout", "3"])
        #expect(broken.status == 1)
        #expect(broken.output.contains("NOT recorded") && broken.output.contains("NO_RESPONSE"), "\(broken.output)")
    }

    // MARK: - The recovery job's failures

    /// A refused request can never succeed (dead-lettered with a code); an outage is retried.
    @Test func recoveryFailuresAreClassifiedAtTheSource() async throws {
        defer { Task { [self] in await close() } }
        let key = try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: keyFile.path)
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
        func body(since: Date, until: Date) throws -> JSONValue {
            try JSONValue.parse(
                JSONCoding.encoder.encode(
                    RecoverNotificationsRequest(jobID: .random(), since: since, until: until, trigger: .operatorRequest)
                )
            )
        }
        let now = Date()
        let window = try body(since: now.addingTimeInterval(-3_600), until: now)
        let unconfigured = RecoverNotificationsHandler(verifier: BillingLedgerIntegrationTests.verifier, appStore: nil)
        let noKey = await #expect(throws: JobRejection.self) {
            try await ledger.run(unconfigured, window, type: .billingRecoverNotifications)
        }
        #expect(noKey?.code == "app-store-api-not-configured")
        let handler = RecoverNotificationsHandler(verifier: BillingLedgerIntegrationTests.verifier, appStore: client)
        let backwards = await #expect(throws: JobRejection.self) {
            try await ledger.run(
                handler,
                try body(since: now, until: now.addingTimeInterval(-60)),
                type: .billingRecoverNotifications
            )
        }
        #expect(backwards?.code == "invalid-window")
        fake.enqueueFailure(.serverError)
        let outage = await #expect(throws: AppStoreAPIError.self) {
            try await ledger.run(handler, window, type: .billingRecoverNotifications)
        }
        #expect(outage?.isTransient == true)
        fake.enqueueFailure(.appleError(status: 400, errorCode: 4_000_014, errorMessage: "Invalid pagination token."))
        let refused = await #expect(throws: JobRejection.self) {
            try await ledger.run(handler, window, type: .billingRecoverNotifications)
        }
        #expect(refused?.code == "appstore-invalid-request")
        // An empty window succeeds and is recorded.
        let empty = try await ledger.run(handler, window, type: .billingRecoverNotifications)
        #expect(empty.result?["fetched"] == 0 && empty.result?["pages"] == 1, "\(String(describing: empty.result))")
    }
}
