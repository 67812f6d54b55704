import AMQP
import AstroDomain
import Billing
import Foundation
import Gateway
import Postgres
import StoreKitVerification
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `POST /v1/appstore/notifications` on the real gateway, with a real billing-worker process
/// behind it that trusts the development PKI (as the other billing tests' workers do): a
/// dev-signed REFUND revokes a purchase's unspent credits once, however often it is delivered;
/// a forged notification is refused by the gateway (403, it verifies before queuing) and never
/// reaches billing; oversized and malformed bodies are refused before anything is published.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayAppleTests {
    static let billingQueues: [JobType] = [
        .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
    ]

    /// Posts raw bytes.
    static func post(_ url: String, body: Data) async throws -> GatewayHarness.HTTPAnswer {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        request.timeoutInterval = 10
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            fields[String(describing: name).lowercased()] = String(describing: value)
        }
        return .init(status: http.statusCode, headers: fields, json: try? JSONValue.parse(data))
    }

    static func notificationBody(_ jws: String) -> Data { JSONValue.object(["signedPayload": .string(jws)]).jsonData() }

    static func signedNotification(
        _ type: String,
        about transaction: String,
        uuid: UUID,
        signer: JWSSigner = BillingLedgerIntegrationTests.pki.signer
    ) throws -> String {
        try signer.sign(
            DevTransactions.notification(
                type: type,
                uuid: uuid,
                signedTransaction: transaction,
                environment: "Sandbox",
                bundleID: BillingDefaults.bundleID,
                at: Date()
            )
        )
    }

    @Test func aRefundPostedByAppleRevokesUnspentCreditsOnceAndForgeriesChangeNothing() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: Self.billingQueues)
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
        defer {
            Task {
                await publisher.close()
                await pool.close()
            }
        }
        let billing = try await GatewayHarness.start(
            "billing-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .billingWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "BILLING_ENVIRONMENT": "Sandbox",
                "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
            ],
            label: "gateway-apple-billing"
        )
        let billingProcess = GatewayHarness.Processes(processes: [billing])
        defer { billingProcess.stop() }
        let gateway = try await GatewayHarness.launch(label: "gateway-apple")
        defer { gateway.processes.stop() }
        func output() -> String { gateway.processes.output + "\n" + billingProcess.output }
        try await ChildProcess.eventually(
            "the billing-worker consumes billing.store-notification",
            on: [billing]
        ) {
            try await publisher.queueState(JobType.billingStoreNotification.rawValue).consumerCount >= 1
        }
        let endpoint = "\(gateway.base)/v1/appstore/notifications"

        func job(_ id: String) async throws -> (status: String, code: String?, result: JSONValue?)? {
            try await pool.withConnection { database in
                try database.query(
                    "SELECT status, error->>'code' AS code, result::text AS result FROM jobs WHERE id = $1::uuid",
                    [id]
                ).first.map {
                    (
                        try $0.decode(String.self, "status"), try $0.decode(String?.self, "code"),
                        try $0.decode(String?.self, "result").flatMap { try? JSONValue.parse(Data($0.utf8)) }
                    )
                }
            }
        }
        func finished(_ id: String) async throws -> (status: String, code: String?, result: JSONValue?) {
            var last: (status: String, code: String?, result: JSONValue?)?
            do {
                try await RuntimeTestEnvironment.eventually("job \(id) finishes", timeout: .seconds(60)) {
                    last = try await job(id)
                    return ["succeeded", "failed", "dead"].contains(last?.status ?? "")
                }
            } catch {
                Issue.record("job \(id): \(String(describing: last))\n\(output())")
                throw error
            }
            return last!
        }
        func balance(_ user: UserID) async throws -> CreditBalance {
            try await pool.withConnection { try CreditLedger.balance(userID: user, database: $0) }
        }

        // A device registers; it buys five credits (verified by the billing-worker).
        let (userText, _) = try await GatewayHarness.register(gateway.base)
        let user = try #require(UserID(userText))
        let (transaction, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        let purchaseJob = JobID.random()
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.billingVerifyPurchase.rawValue,
                body: try JSONCoding.encoder.encode(
                    VerifyPurchaseRequest(jobID: purchaseJob, userID: user, signedTransaction: transaction)
                ),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
        #expect(try await finished(purchaseJob.description).status == "succeeded")
        #expect(try await balance(user).available == 5)

        // Oversized: 413 before anything is read further; malformed: 400.
        let oversized = try await Self.post(
            endpoint,
            body: Self.notificationBody(String(repeating: "A", count: 70_000))
        )
        #expect(oversized.status == 413)
        #expect(oversized.json?["code"] == "body-too-large")
        let garbage = try await Self.post(endpoint, body: Data("signedPayload=abc".utf8))
        #expect(garbage.status == 400)
        #expect(garbage.json?["code"] == "invalid-json")
        let notJWS = try await Self.post(endpoint, body: Self.notificationBody("abc.def"))
        #expect(notJWS.status == 400)
        #expect(notJWS.json?["code"] == "invalid-notification")
        #expect(notJWS.json?["field"] == "signedPayload")
        #expect(notJWS.headers["content-type"] == "application/problem+json")

        // Forged: well shaped, signed by a PKI neither the gateway nor the billing-worker trusts.
        // The gateway verifies it as billing would and refuses it (issue 29: it used to queue
        // it, and billing dead-lettered it): 403, no job, no message, no credit changed.
        let start = Date().addingTimeInterval(-86_400)
        let forger = try DevPKI.generate(notValidBefore: start, notValidAfter: start.addingTimeInterval(365 * 86_400))
        let forged = try Self.signedNotification("REFUND", about: transaction, uuid: UUID(), signer: forger.signer)
        let forgedAnswer = try await Self.post(endpoint, body: Self.notificationBody(forged))
        #expect(forgedAnswer.status == 403, "\(String(describing: forgedAnswer.json))\n\(output())")
        #expect(forgedAnswer.json?["code"] == "notification-unverified")
        #expect(forgedAnswer.json?["jobId"] == nil)
        let forgedJob = try AppStoreNotificationShape(body: Self.notificationBody(forged)).jobID
        #expect(try await job(forgedJob.description) == nil, "a forged notification became a job")
        #expect(try await publisher.queueState(JobType.billingStoreNotification.rawValue).messageCount == 0)
        var afterForgery = try await balance(user)
        #expect(afterForgery.available == 5 && afterForgery.revoked == 0, "\(afterForgery)")

        // The real REFUND: 200 once the broker confirmed it; the worker revokes the five credits.
        let refundUUID = UUID()
        let refund = try Self.signedNotification("REFUND", about: transaction, uuid: refundUUID)
        let answer = try await Self.post(endpoint, body: Self.notificationBody(refund))
        #expect(answer.status == 200, "\(String(describing: answer.json))\n\(output())")
        let refundJob = try #require(answer.json?["jobId"]?.stringValue)
        let outcome = try await finished(refundJob)
        #expect(outcome.status == "succeeded", "\(outcome)")
        #expect(outcome.result?["action"] == "revoked", "\(String(describing: outcome.result))")
        var after = try await balance(user)
        #expect(after.available == 0 && after.revoked == 5 && after.balanced, "\(after)")

        // Apple delivers it again (the same bytes): the same job id, no second effect.
        let again = try await Self.post(endpoint, body: Self.notificationBody(refund))
        #expect(again.status == 200)
        #expect(again.json?["jobId"]?.stringValue == refundJob)
        try await RuntimeTestEnvironment.eventually("the redelivery is consumed", timeout: .seconds(20)) {
            try await publisher.queueState(JobType.billingStoreNotification.rawValue).messageCount == 0
        }
        // A redelivery signed again (another JWS, the same notificationUUID) is another job,
        // which billing recognizes as the same notification.
        let resigned = try Self.signedNotification("REFUND", about: transaction, uuid: refundUUID)
        let resignedAnswer = try await Self.post(endpoint, body: Self.notificationBody(resigned))
        #expect(resignedAnswer.status == 200)
        let resignedJob = try #require(resignedAnswer.json?["jobId"]?.stringValue)
        #expect(resignedJob != refundJob)
        let resignedOutcome = try await finished(resignedJob)
        #expect(resignedOutcome.status == "succeeded")
        #expect(resignedOutcome.result?["action"] == "duplicate", "\(String(describing: resignedOutcome.result))")
        after = try await balance(user)
        #expect(after.available == 0 && after.revoked == 5 && after.balanced, "\(after)")
        let ledgerRows = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM store_notifications WHERE notification_uuid = $1",
                [refundUUID]
            ).first?.decode(Int.self, "n")
        }
        #expect(ledgerRows == 1)
        afterForgery = try await balance(user)
        #expect(afterForgery.revoked == 5)
        // The notifications queued after the forged one were all consumed: it never was a job.
        #expect(try await job(forgedJob.description) == nil, "a forged notification became a job")

        // The gateway answered nothing outside its route table.
        #expect(!gateway.processes.output.contains("status not in the route table"), "\(gateway.processes.output)")
    }

    /// A broker that does not confirm (a memory alarm blocks publishers): 503, never a 200 for a
    /// notification that could be lost, so Apple retries; once it confirms, the retry gets 200.
    @Test func aNotificationIsNotAcknowledgedUntilTheBrokerConfirms() async throws {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [.billingStoreNotification])
        defer { Task { await publisher.close() } }
        let gateway = try await GatewayHarness.launch(
            environment: ["REQUEST_TIMEOUT_MS": "1500"],
            label: "gateway-apple-unconfirmed"
        )
        defer { gateway.processes.stop() }
        let endpoint = "\(gateway.base)/v1/appstore/notifications"
        let (transaction, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: nil
        )
        let body = Self.notificationBody(try Self.signedNotification("REFUND", about: transaction, uuid: UUID()))
        try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "absolute", "1"])
        let blocked: GatewayHarness.HTTPAnswer
        do {
            blocked = try await Self.post(endpoint, body: body)
        } catch {
            try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "0.4"])
            throw error
        }
        try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "0.4"])
        #expect(blocked.status == 503, "\(String(describing: blocked.json))")
        #expect(blocked.json?["code"] == "broker-unavailable")
        #expect(blocked.headers["retry-after"] != nil)
        var accepted: GatewayHarness.HTTPAnswer?
        try await RuntimeTestEnvironment.eventually("Apple's retry is accepted", timeout: .seconds(30)) {
            accepted = try await Self.post(endpoint, body: body)
            return accepted?.status == 200
        }
        // The blocked publish may reach the queue too once the alarm clears: it is the same job id.
        let state = try await publisher.queueState(JobType.billingStoreNotification.rawValue)
        #expect((1...2).contains(state.messageCount))
        _ = try await publisher.purgeQueue(JobType.billingStoreNotification.rawValue)
        #expect(!gateway.processes.output.contains("status not in the route table"))
    }
}
