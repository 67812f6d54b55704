import AMQP
import AstroDomain
import Billing
import Foundation
import Postgres
import Schema
import StoreKitVerification
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// Two real billing-worker processes on the contract's queues, the real broker and database:
/// concurrency and crashes cannot cheat the ledger.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct BillingWorkerProcessTests {
    static let billingQueues: [JobType] = [
        .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
    ]

    /// The PKI the workers are told to trust, written where they can read it.
    static let pkiFolder: URL = {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("billing-pki-\(UUID())")
        try! FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try! BillingLedgerIntegrationTests.pki.write(to: folder)
        return folder
    }()

    final class Workers: Sendable {
        let processes: [ChildProcess]
        init(processes: [ChildProcess]) {
            self.processes = processes
        }
        var logs: [URL] { processes.map(\.log) }
        func kill(_ index: Int) {
            processes[index].kill()
        }
        /// SIGTERM to every worker, then SIGKILL to any still running after 10 s (blocking: a
        /// `defer` calls it).
        func stop() {
            for process in processes { process.send(SIGTERM) }
            for process in processes { process.stopWaiting() }
        }
        /// What the workers logged, each log headed by its path.
        var output: String { GatewayHarness.Processes(processes: processes).output }
    }

    let publisher: AMQPPublisher
    let pool: PostgresPool
    let databaseURL: String

    init() async throws {
        let database = try await RuntimeTestEnvironment.database()
        // The billing-worker processes run as their own least-privilege role, as deployed.
        databaseURL = try await RuntimeTestEnvironment.databaseURL(as: .billingWorker)
        // Every contract queue declared; the billing queues and report.generate (which receives
        // what consumption publishes) emptied.
        publisher = try await RuntimeTestEnvironment.contractPublisher(purging: Self.billingQueues + [.reportGenerate])
        pool = PostgresPool(
            configuration: database,
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    func close() async {
        _ = try? await publisher.purgeQueue(JobType.reportGenerate.rawValue)
        await publisher.close()
        await pool.close()
    }

    func startWorkers(_ count: Int, label: String) async throws -> Workers {
        var processes: [ChildProcess] = []
        for index in 0..<count {
            processes.append(
                try await ChildProcess.product(
                    "billing-worker",
                    environment: [
                        "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.billingWorker),
                        "DATABASE_URL": databaseURL,
                        "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "PREFETCH": "32", "LOG_LEVEL": "warning",
                        "MIGRATE_ON_START": "false", "BILLING_ENVIRONMENT": "Sandbox",
                        "BILLING_TRUSTED_ROOTS": Self.pkiFolder.appendingPathComponent("root.der").path,
                    ],
                    label: "billing-\(label)-\(index)"
                )
            )
        }
        let workers = Workers(processes: processes)
        do {
            try await RuntimeTestEnvironment.eventually("\(count) billing-workers consume", timeout: .seconds(60)) {
                let state = try await publisher.queueState(JobType.reportRequest.rawValue)
                return state.consumerCount >= count
            }
        } catch {
            workers.stop()
            throw TestFailure("billing-workers did not start: \(error)\n\(workers.output.suffix(6_000))")
        }
        return workers
    }

    func publish(_ type: JobType, _ body: some Encodable) async throws {
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: type.rawValue,
                body: try JSONCoding.encoder.encode(body),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
    }

    /// Waits until every job has a terminal status; returns the statuses by job.
    func waitForJobs(_ ids: [JobID], timeout: Duration = .seconds(90)) async throws -> [JobID: (String, String?)] {
        let list = "{" + ids.map(\.description).joined(separator: ",") + "}"
        var statuses: [JobID: (String, String?)] = [:]
        try await RuntimeTestEnvironment.eventually("\(ids.count) jobs finish", timeout: timeout) {
            let rows = try await pool.withConnection { database in
                try database.query(
                    """
                    SELECT id, status, error->>'code' AS code FROM jobs
                    WHERE id = ANY($1::uuid[]) AND status IN ('succeeded', 'failed', 'dead')
                    """,
                    [list]
                ).map {
                    (
                        JobID(try $0.decode(UUID.self, "id")), try $0.decode(String.self, "status"),
                        try $0.decode(String?.self, "code")
                    )
                }
            }
            statuses = Dictionary(uniqueKeysWithValues: rows.map { ($0.0, ($0.1, $0.2)) })
            return statuses.count == ids.count
        }
        return statuses
    }

    func scalar(_ sql: SQL, _ parameters: [any PostgresBindable]) async throws -> Int {
        try await pool.withConnection { try $0.query(sql, parameters).first?.decode(Int.self, "n") ?? -1 }
    }

    /// A user with `profiles` profiles that have charts.
    func userWithProfiles(_ profiles: Int) async throws -> (UserID, [ProfileID]) {
        let user = UserID.random()
        let ids = (0..<profiles).map { _ in ProfileID.random() }
        try await pool.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            for (index, profile) in ids.enumerated() {
                try database.execute(
                    """
                    INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                    VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                    """,
                    [profile.uuid, user.uuid, "Person \(index)"]
                )
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, '{}', 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid]
                )
            }
        }
        return (user, ids)
    }

    /// Buys `packs` packs of ten through the workers, at most ten in one transaction (StoreKit's
    /// limit, which the catalog enforces).
    func buyCredits(_ user: UserID, packs: Int) async throws {
        var jobs: [JobID] = []
        var left = packs
        while left > 0 {
            let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.pack10",
                user: user,
                quantity: min(left, 10)
            )
            left -= min(left, 10)
            let job = JobID.random()
            try await publish(
                .billingVerifyPurchase,
                VerifyPurchaseRequest(jobID: job, userID: user, signedTransaction: jws)
            )
            jobs.append(job)
        }
        let status = try await waitForJobs(jobs)
        for job in jobs { #expect(status[job]?.0 == "succeeded") }
    }

    /// Distinct (profile, area, language) requests: one report each.
    static func requests(_ user: UserID, _ profiles: [ProfileID], count: Int) -> [ReportRequest] {
        var requests: [ReportRequest] = []
        for profile in profiles {
            for area in ReportArea.allCases {
                for language in ReportLanguage.allCases where requests.count < count {
                    requests.append(
                        ReportRequest(
                            jobID: .random(),
                            userID: user,
                            profileID: profile,
                            area: area,
                            language: language
                        )
                    )
                }
            }
        }
        return requests
    }

    func audit(_ user: UserID) async throws -> CreditBalance {
        try await pool.withConnection { try CreditLedger.balance(userID: user, database: $0) }
    }

    @Test func theSameTransactionDeliveredAHundredTimesConcurrentlyGrantsOnce() async throws {
        let workers = try await startWorkers(2, label: "same-transaction")
        defer { workers.stop() }
        let (user, _) = try await userWithProfiles(0)
        let (jws, transactionID) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack10",
            user: user
        )
        let jobs = (0..<100).map { _ in JobID.random() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for job in jobs {
                group.addTask {
                    try await publish(
                        .billingVerifyPurchase,
                        VerifyPurchaseRequest(jobID: job, userID: user, signedTransaction: jws)
                    )
                }
            }
            try await group.waitForAll()
        }
        let statuses = try await waitForJobs(jobs)
        #expect(statuses.values.allSatisfy { $0.0 == "succeeded" })
        #expect(
            try await scalar(
                "SELECT count(*)::int AS n FROM purchase_records WHERE transaction_id = $1",
                [transactionID]
            ) == 1
        )
        #expect(
            try await scalar(
                "SELECT count(*)::int AS n FROM purchase_credits WHERE transaction_id = $1",
                [transactionID]
            ) == 10
        )
        let firsts = try await scalar(
            "SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1::uuid[]) AND result->>'alreadyProcessed' = 'false'",
            ["{" + jobs.map(\.description).joined(separator: ",") + "}"]
        )
        #expect(firsts == 1)
        let balance = try await audit(user)
        #expect(balance.issued == 10 && balance.available == 10 && balance.balanced)
        await close()
    }

    @Test func twoHundredConcurrentRequestsSpendExactlyTheTenCreditsHeld() async throws {
        let workers = try await startWorkers(2, label: "two-hundred")
        defer { workers.stop() }
        let (user, profiles) = try await userWithProfiles(20)
        try await buyCredits(user, packs: 1)
        let requests = Self.requests(user, profiles, count: 200)
        #expect(requests.count == 200)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for request in requests { group.addTask { try await publish(.reportRequest, request) } }
            try await group.waitForAll()
        }
        let statuses = try await waitForJobs(requests.map(\.jobID))
        let succeeded = statuses.values.filter { $0.0 == "succeeded" }.count
        let insufficient = statuses.values.filter { $0.0 == "failed" && $0.1 == "insufficient-credits" }.count
        #expect(succeeded == 10)
        #expect(insufficient == 190)
        let balance = try await audit(user)
        #expect(balance.consumed == 10 && balance.available == 0 && balance.balanced)
        #expect(
            try await scalar(
                "SELECT count(*)::int AS n FROM purchase_credits WHERE user_id = $1 AND consumed",
                [user.uuid]
            )
                == 10
        )
        await close()
    }

    @Test func aWorkerKilledMidConsumptionLeavesNoCreditBothSpentAndAvailable() async throws {
        let first = try await startWorkers(2, label: "sigkill")
        let (user, profiles) = try await userWithProfiles(60)
        try await buyCredits(user, packs: 60)
        let requests = Self.requests(user, profiles, count: 600)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for request in requests { group.addTask { try await publish(.reportRequest, request) } }
            try await group.waitForAll()
        }
        // Kill both as soon as consumption is under way.
        var consumedAtKill = 0
        try await RuntimeTestEnvironment.eventually("consumption starts", timeout: .seconds(30)) {
            consumedAtKill = try await scalar(
                "SELECT count(*)::int AS n FROM purchase_credits WHERE user_id = $1 AND consumed",
                [user.uuid]
            )
            return consumedAtKill >= 20
        }
        first.kill(0)
        first.kill(1)
        let atKill = try await scalar(
            "SELECT count(*)::int AS n FROM purchase_credits WHERE user_id = $1 AND consumed",
            [user.uuid]
        )
        #expect(atKill < 600, "the workers finished before they were killed; the test proved nothing")
        let second = try await startWorkers(1, label: "sigkill-restart")
        defer { second.stop() }
        let statuses = try await waitForJobs(requests.map(\.jobID), timeout: .seconds(120))
        #expect(statuses.values.allSatisfy { $0.0 == "succeeded" })
        let balance = try await audit(user)
        #expect(balance.consumed == 600 && balance.available == 0 && balance.balanced)
        // Each request spent exactly one credit, and each consumed credit names its request.
        #expect(
            try await scalar(
                """
                SELECT count(DISTINCT consumed_by_job)::int AS n FROM purchase_credits
                WHERE user_id = $1 AND consumed AND consumed_by_job = ANY($2::uuid[])
                """,
                [user.uuid, "{" + requests.map(\.jobID.description).joined(separator: ",") + "}"]
            ) == 600
        )
        await close()
    }
}
