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

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Send Consumption Information end to end: the user's consent through the real gateway
/// (`PUT /v1/consent`), CONSUMPTION_REQUESTs posted to the gateway as Apple posts them, a real
/// billing-worker (its own broker user and database role) that answers from the ledger and
/// sends through `billing.send-consumption` to the App Store fake. Each answer is checked as
/// Apple received it: credit unspent, spent with the report delivered, spent with the report
/// failed and refunded, a pack partly used; no consent → nothing sent and the reason recorded;
/// a 429 retried then sent; a second request (and a replayed send job) → no second send.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ConsumptionAnswerTests {
    static let billingQueues: [JobType] = [
        .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
        .billingSendConsumption,
    ]

    struct Answer {
        var state: String
        var reason: String?
        var body: JSONValue?
        var facts: JSONValue?
        var appleStatus: Int?
        var attempts: Int
    }

    @Test func consumptionRequestsAreAnsweredFromTheLedgerOnceAndOnlyWithConsent() async throws {
        let ledger = try await BillingLedgerIntegrationTests()
        let pool = ledger.pool
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: Self.billingQueues)
        defer { Task { await publisher.close() } }

        // The App Store fake and the key the billing-worker signs its tokens with.
        let key = P256.Signing.PrivateKey()
        let fake = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "CONSUMPTN1",
            issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            publicKey: key.publicKey
        )
        defer { fake.stop() }
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("consumption-\(UUID()).p8")
        try Data(key.pemRepresentation.utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }

        let billing = try await GatewayHarness.start(
            "billing-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .billingWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "BILLING_ENVIRONMENT": "Sandbox",
                "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
                "APPSTORE_API_KEY_ID": fake.keyID, "APPSTORE_API_ISSUER_ID": fake.issuerID,
                "APPSTORE_API_PRIVATE_KEY_FILE": keyFile.path, "APPSTORE_API_BASE_URL": fake.baseURL.absoluteString,
                "BILLING_CONSUMPTION_REFUND_PREFERENCE": "by-delivery",
            ],
            label: "consumption-billing"
        )
        let billingProcess = GatewayHarness.Processes(processes: [billing])
        defer { billingProcess.stop() }
        let gateway = try await GatewayHarness.launch(label: "consumption-gateway")
        defer { gateway.processes.stop() }
        func output() -> String { gateway.processes.output + "\n" + billingProcess.output }
        try await ChildProcess.eventually(
            "the billing-worker consumes billing.send-consumption",
            on: [billing]
        ) {
            try await publisher.queueState(JobType.billingSendConsumption.rawValue).consumerCount >= 1
        }

        // A user of the gateway, with a profile that has a chart, who answered the consent question.
        func user(consenting: Bool?) async throws -> (UserID, ProfileID) {
            let (text, token) = try await GatewayHarness.register(gateway.base)
            let user = try #require(UserID(text))
            let profile = ProfileID.random()
            try await pool.withTransaction { database in
                try database.execute(
                    """
                    INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                    VALUES ($1, $2, 'Me', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                    """,
                    [profile.uuid, user.uuid]
                )
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, '{}', 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid]
                )
            }
            if let consenting {
                let body: JSONValue = [
                    "consented": .bool(consenting), "textVersion": "2026-11",
                    "answeredAt": .string(ISO8601.string(from: Date().addingTimeInterval(-60))),
                ]
                let answer = try await GatewayHarness.request(
                    "PUT",
                    "\(gateway.base)/v1/consent",
                    token: token,
                    body: body
                )
                #expect(answer.status == 200, "\(String(describing: answer.json))")
                #expect(answer.json?["consented"] == .bool(consenting))
                // The same answer again (a retried PUT) adds no row.
                let retried = try await GatewayHarness.request(
                    "PUT",
                    "\(gateway.base)/v1/consent",
                    token: token,
                    body: body
                )
                #expect(retried.status == 200 && retried.json?["recordedAt"] == answer.json?["recordedAt"])
                let rows = try await pool.withConnection { database in
                    try database.query(
                        "SELECT count(*)::int AS n FROM consumption_consents WHERE user_id = $1",
                        [user.uuid]
                    ).first?.decode(Int.self, "n")
                }
                #expect(rows == 1)
                let current = try await GatewayHarness.request("GET", "\(gateway.base)/v1/consent", token: token)
                #expect(current.status == 200 && current.json?["textVersion"] == "2026-11")
            } else {
                let none = try await GatewayHarness.request("GET", "\(gateway.base)/v1/consent", token: token)
                #expect(none.status == 404)
            }
            return (user, profile)
        }

        /// Buys `product`, registering the transaction with the fake (Apple knows it).
        func buy(_ product: String, _ user: UserID) async throws -> (jws: String, id: String) {
            let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(product, user: user)
            _ = try await ledger.purchase(jws, user: user)
            fake.register(signedTransaction: jws, forTransactionID: id)
            return (jws, id)
        }

        /// Spends a credit on a report of `area`; stores the report when `delivered`.
        func spend(
            _ user: UserID,
            _ profile: ProfileID,
            _ area: ReportArea,
            delivered: Bool
        ) async throws
            -> (credit: String, job: JobID)
        {
            let job = JobID.random()
            let outcome = try await ledger.request(user, profile, area, jobID: job)
            let credit = try #require(outcome.result?["creditId"]?.stringValue)
            let transaction = try #require(outcome.result?["transactionId"]?.stringValue)
            if delivered {
                _ = try await pool.withConnection { database in
                    try database.execute(
                        """
                        INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count,
                            price, currency, transaction_id, credit_id, purchase_date, generated_at, writer)
                        VALUES ($1, $2, $3, $4, 'en', 'text', 1, 9.99, 'USD', $5, $6::uuid, now(), now(), 'test')
                        """,
                        [UUID(), user.uuid, profile.uuid, area.rawValue, transaction, credit]
                    )
                }
            }
            return (credit, job)
        }

        /// Posts a CONSUMPTION_REQUEST to the gateway as Apple would; returns the notification's job id.
        func consumptionRequest(_ jws: String, uuid: UUID) async throws -> String {
            let signed = try GatewayAppleTests.signedNotification("CONSUMPTION_REQUEST", about: jws, uuid: uuid)
            let answer = try await GatewayAppleTests.post(
                "\(gateway.base)/v1/appstore/notifications",
                body: GatewayAppleTests.notificationBody(signed)
            )
            #expect(answer.status == 200)
            return try #require(answer.json?["jobId"]?.stringValue)
        }

        func answer(_ uuid: UUID) async throws -> Answer? {
            try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT state, reason, request_body::text AS body, facts::text AS facts, apple_status, attempts
                    FROM consumption_answers WHERE notification_uuid = $1
                    """,
                    [uuid]
                ).first.map {
                    Answer(
                        state: try $0.decode(String.self, "state"),
                        reason: try $0.decode(String?.self, "reason"),
                        body: try JSONValue.parse(Data(try $0.decode(String.self, "body").utf8)),
                        facts: try JSONValue.parse(Data(try $0.decode(String.self, "facts").utf8)),
                        appleStatus: try $0.decode(Int?.self, "apple_status"),
                        attempts: try $0.decode(Int.self, "attempts")
                    )
                }
            }
        }

        /// Waits until the request's answer left `pending`.
        func settled(_ uuid: UUID) async throws -> Answer {
            var last: Answer?
            do {
                try await RuntimeTestEnvironment.eventually("request \(uuid) is answered", timeout: .seconds(40)) {
                    last = try await answer(uuid)
                    return last.map { $0.state != "pending" } ?? false
                }
            } catch {
                Issue.record("request \(uuid): \(String(describing: last))\n\(output())")
                throw error
            }
            return last!
        }

        /// What the fake received for a transaction, decoded.
        func received(_ id: String) -> [JSONValue] {
            fake.consumptionRequests.filter { $0.transactionID == id }.compactMap {
                try? JSONValue.parse(Data($0.body.utf8))
            }
        }

        func expectSent(
            _ uuid: UUID,
            _ id: String,
            percentage: Double,
            preference: String,
            _ comment: Comment
        ) async throws {
            let settledAnswer = try await settled(uuid)
            #expect(settledAnswer.state == "sent", "\(comment): \(settledAnswer)")
            #expect(settledAnswer.appleStatus == 202, comment)
            let bodies = received(id)
            #expect(bodies.count == 1, "\(comment): \(bodies)")
            let body = try #require(bodies.first)
            #expect(body["customerConsented"] == .bool(true), comment)
            #expect(body["deliveryStatus"] == "DELIVERED", comment)
            #expect(body["consumptionPercentage"] == .number(percentage), comment)
            #expect(body["refundPreference"] == .string(preference), comment)
            #expect(body["sampleContentProvided"] == .bool(true), comment)
        }

        // 1. A credit never spent: nothing consumed, prefer a full refund.
        let (unspentUser, _) = try await user(consenting: true)
        let unspent = try await buy("com.astrosvitla.report.credit.single", unspentUser)
        let unspentRequest = UUID()
        _ = try await consumptionRequest(unspent.jws, uuid: unspentRequest)
        try await expectSent(unspentRequest, unspent.id, percentage: 0, preference: "GRANT_FULL", "unspent")

        // 2. Spent, and the report delivered: all of it consumed, prefer to decline.
        let (readerUser, readerProfile) = try await user(consenting: true)
        let read = try await buy("com.astrosvitla.report.credit.single", readerUser)
        _ = try await spend(readerUser, readerProfile, .career, delivered: true)
        let readRequest = UUID()
        _ = try await consumptionRequest(read.jws, uuid: readRequest)
        try await expectSent(readRequest, read.id, percentage: 100_000, preference: "DECLINE", "delivered")

        // 3. Spent, the report failed and the credit was refunded: nothing consumed.
        let (failedUser, failedProfile) = try await user(consenting: true)
        let failed = try await buy("com.astrosvitla.report.credit.single", failedUser)
        let (failedCredit, failedJob) = try await spend(failedUser, failedProfile, .health, delivered: false)
        _ = try await ledger.refund(failedCredit, requestJob: failedJob)
        let failedRequest = UUID()
        _ = try await consumptionRequest(failed.jws, uuid: failedRequest)
        try await expectSent(failedRequest, failed.id, percentage: 0, preference: "GRANT_FULL", "failed and refunded")
        #expect(try await answer(failedRequest)?.facts?["facts"]?["returned"] == .number(1))

        // 4. A pack of five, two reports delivered: 40 %, prefer a prorated refund.
        let (packUser, packProfile) = try await user(consenting: true)
        let pack = try await buy("com.astrosvitla.report.credit.pack5", packUser)
        _ = try await spend(packUser, packProfile, .career, delivered: true)
        _ = try await spend(packUser, packProfile, .finances, delivered: true)
        let packRequest = UUID()
        _ = try await consumptionRequest(pack.jws, uuid: packRequest)
        try await expectSent(packRequest, pack.id, percentage: 40_000, preference: "GRANT_PRORATED", "pack")

        // 5. No consent (declined in the app, and never asked): nothing sent, the reason recorded.
        for consenting in [false, nil] as [Bool?] {
            let (refuser, _) = try await user(consenting: consenting)
            let refused = try await buy("com.astrosvitla.report.credit.single", refuser)
            let refusedRequest = UUID()
            let job = try await consumptionRequest(refused.jws, uuid: refusedRequest)
            let settledAnswer = try await settled(refusedRequest)
            #expect(settledAnswer.state == "declined-no-consent")
            #expect(
                settledAnswer.reason?.contains("not consented") == true,
                "\(String(describing: settledAnswer.reason))"
            )
            let action = try await pool.withConnection { database in
                try database.query("SELECT result->>'action' AS action FROM jobs WHERE id = $1::uuid", [job]).first?
                    .decode(String?.self, "action")
            }
            #expect(action == "consumption-declined-no-consent")
            #expect(received(refused.id).isEmpty)
            #expect(fake.requestCount(path: AppStoreServerFake.consumptionPath(transactionID: refused.id)) == 0)
        }

        // 6. Apple rate-limits the first attempt (Retry-After: 1): retried, then sent once.
        let (limitedUser, _) = try await user(consenting: true)
        let limited = try await buy("com.astrosvitla.report.credit.single", limitedUser)
        fake.enqueueFailure(.rateLimited(retryAfter: 1))
        let limitedRequest = UUID()
        _ = try await consumptionRequest(limited.jws, uuid: limitedRequest)
        try await expectSent(limitedRequest, limited.id, percentage: 0, preference: "GRANT_FULL", "rate limited")
        #expect(fake.requestCount(path: AppStoreServerFake.consumptionPath(transactionID: limited.id)) == 2)
        #expect(try await answer(limitedRequest)?.attempts == 2)
        #expect(fake.pendingFailures.isEmpty)

        // 7. A second request for a transaction already answered, and a replayed send job: no second send.
        let againRequest = UUID()
        let againJob = try await consumptionRequest(unspent.jws, uuid: againRequest)
        try await RuntimeTestEnvironment.eventually("the second request is recorded", timeout: .seconds(30)) {
            try await pool.withConnection { database in
                try database.query("SELECT result->>'action' AS action FROM jobs WHERE id = $1::uuid", [againJob])
                    .first?.decode(String?.self, "action")
            } == "consumption-already-answered"
        }
        #expect(try await answer(againRequest) == nil)
        let replay = SendConsumptionRequest(
            jobID: .random(),
            notificationUUID: unspentRequest,
            transactionID: unspent.id
        )
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.billingSendConsumption.rawValue,
                body: try JSONCoding.encoder.encode(replay),
                properties: MessageProperties(contentType: "application/json")
            )
        )
        try await RuntimeTestEnvironment.eventually("the replayed send job finishes", timeout: .seconds(30)) {
            try await pool.withConnection { database in
                try database.query("SELECT status FROM jobs WHERE id = $1", [replay.jobID.uuid]).first?
                    .decode(String.self, "status")
            } == "succeeded"
        }
        #expect(received(unspent.id).count == 1)
        #expect(fake.requestCount(path: AppStoreServerFake.consumptionPath(transactionID: unspent.id)) == 1)
    }
}

extension ConsumptionAnswerTests {
    /// The send job in-process: a consent withdrawn before the send, Apple's 404, and a worker
    /// without an App Store key each settle the answer without a 202, once, with the reason.
    @Test func anAnswerNotSentIsSettledOnceWithItsReason() async throws {
        let ledger = try await BillingLedgerIntegrationTests()
        let pool = ledger.pool
        let key = P256.Signing.PrivateKey()
        let fake = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "CONSUMPTN2",
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
                signingKey: key
            )
        )

        func consent(_ user: UserID, _ consented: Bool) async throws {
            _ = try await pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO consumption_consents (user_id, consented, text_version, answered_at)
                    VALUES ($1, $2, 'test-1', now())
                    """,
                    [user.uuid, consented]
                )
            }
        }
        /// A consenting user's CONSUMPTION_REQUEST: the send job's body it published.
        func pendingRequest() async throws -> (user: UserID, uuid: UUID, send: JSONValue) {
            let (user, _) = try await ledger.userWithProfile()
            try await consent(user, true)
            let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.single",
                user: user
            )
            _ = try await ledger.purchase(jws, user: user)
            let uuid = UUID()
            let outcome = try await ledger.notify(
                try ledger.signedNotification("CONSUMPTION_REQUEST", about: jws, uuid: uuid)
            )
            #expect(
                outcome.messages.map(\.routingKey) == ["billing.consumption-requested", "billing.send-consumption"]
            )
            #expect(outcome.messages.last?.exchange == BrokerNames.jobsExchange)
            let send = try #require(outcome.messages.last.map { try JSONValue.parse($0.body) })
            return (user, uuid, send)
        }
        func row(_ uuid: UUID) async throws -> (state: String, reason: String?, status: Int?, code: Int64?)? {
            try await pool.withConnection { database in
                try database.query(
                    "SELECT state, reason, apple_status, apple_error_code FROM consumption_answers WHERE notification_uuid = $1",
                    [uuid]
                ).first.map {
                    (
                        try $0.decode(String.self, "state"), try $0.decode(String?.self, "reason"),
                        try $0.decode(Int?.self, "apple_status"), try $0.decode(Int64?.self, "apple_error_code")
                    )
                }
            }
        }

        // Consent withdrawn after the request, before the send: nothing sent.
        let withdrawn = try await pendingRequest()
        #expect(try await row(withdrawn.uuid)?.state == "pending")
        try await consent(withdrawn.user, false)
        let handler = SendConsumptionHandler(pool: pool, appStore: client)
        let first = try await ledger.run(handler, withdrawn.send, type: .billingSendConsumption)
        #expect(first.result?["state"] == "declined-no-consent")
        #expect(first.messages.map(\.routingKey) == ["billing.consumption-answered"])
        #expect(try await row(withdrawn.uuid)?.reason?.contains("withdrew") == true)
        // Run again (a redelivery): settled, nothing published, nothing sent.
        let again = try await ledger.run(handler, withdrawn.send, type: .billingSendConsumption)
        #expect(again.result?["state"] == "declined-no-consent" && again.messages.isEmpty)
        #expect(fake.requestCount == 0)

        // Apple does not know the transaction (404 4040010): failed, with Apple's answer.
        let unknown = try await pendingRequest()
        let refused = try await ledger.run(handler, unknown.send, type: .billingSendConsumption)
        #expect(refused.result?["state"] == "failed")
        let refusedRow = try #require(try await row(unknown.uuid))
        #expect(refusedRow.state == "failed" && refusedRow.status == 404 && refusedRow.code == 4_040_010)
        #expect(refusedRow.reason?.hasPrefix("transaction-not-found") == true)
        #expect(fake.consumptionRequests.isEmpty)

        // Two requests for one transaction at once: one answer, one send job.
        let (racer, _) = try await ledger.userWithProfile()
        try await consent(racer, true)
        let (racedJWS, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: racer
        )
        _ = try await ledger.purchase(racedJWS, user: racer)
        let raced = try await withThrowingTaskGroup(of: JobOutcome.self) { group in
            for _ in 0..<4 {
                let signed = try ledger.signedNotification("CONSUMPTION_REQUEST", about: racedJWS, uuid: UUID())
                group.addTask { try await ledger.notify(signed) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(raced.filter { $0.messages.contains { $0.routingKey == "billing.send-consumption" } }.count == 1)
        #expect(raced.filter { $0.result?["action"] == "consumption-already-answered" }.count == 3)

        // A worker without an App Store key: failed, saying so, without a request.
        let unconfigured = try await pendingRequest()
        let requestsBefore = fake.requestCount
        let none = try await ledger.run(
            SendConsumptionHandler(pool: pool, appStore: nil),
            unconfigured.send,
            type: .billingSendConsumption
        )
        #expect(none.result?["state"] == "failed")
        #expect(try await row(unconfigured.uuid)?.reason?.hasPrefix("appstore-not-configured") == true)
        #expect(fake.requestCount == requestsBefore)
    }
}

extension ConsumptionAnswerTests.Answer: Equatable {
    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.state == rhs.state && lhs.reason == rhs.reason && lhs.attempts == rhs.attempts
            && lhs.appleStatus == rhs.appleStatus
    }
}
