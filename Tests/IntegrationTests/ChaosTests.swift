import AMQP
import AstroDomain
import Billing
import Foundation
import Postgres
import Schema
import StoreKitVerification
import Synchronization
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// The chaos suite: a few thousand mixed jobs go through real worker processes (each on its own
/// database role) on the real broker and database while a chart-worker is SIGKILLed, RabbitMQ is
/// restarted, PostgreSQL is restarted and a billing-worker is SIGKILLed in the middle of spending
/// credits. Afterwards every job has exactly one outcome, nothing is written twice, nothing is lost,
/// every buyer's ledger balances, and the dead-letter queues hold only the broken message planted
/// here. It prints its figures.
///
/// It restarts the servers, so it runs on the stack that only the suites acting on a whole server
/// use, one at a time (scripts/integration-tests.sh): `bash scripts/integration-tests.sh ChaosTests`.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct ChaosTests {
    /// Quick retries, so a job caught by an outage finishes soon after it, and enough attempts that
    /// a few seconds without PostgreSQL never dead-letters a good job (20 attempts span about 17 s).
    /// The workers get the same values, so the delay queues declared here are theirs.
    static let retryInitialMilliseconds = 200
    static let retryMaxMilliseconds = 1000
    static let retry = RetryPolicy(
        maxAttempts: 20,
        initialDelay: .milliseconds(retryInitialMilliseconds),
        maxDelay: .milliseconds(retryMaxMilliseconds)
    )

    @Test func everyJobHasExactlyOneOutcomeAfterKillsAndRestarts() async throws {
        _ = try RuntimeTestEnvironment.variable("ASTRO_STACK_DIR")
        let database = try await RuntimeTestEnvironment.database()
        // The workers reach both servers through proxies the suite can cut without FIN or RST.
        let brokerProxy = try ChaosProxy(upstreamPort: try RuntimeTestEnvironment.amqpConfiguration().port)
        let databaseProxy = try ChaosProxy(upstreamPort: database.port)
        defer {
            brokerProxy.stop()
            databaseProxy.stop()
        }
        let common = [
            "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "MIGRATE_ON_START": "false", "LOG_LEVEL": "warning",
            "PREFETCH": "16", "MAX_ATTEMPTS": "\(Self.retry.maxAttempts)",
            "RETRY_INITIAL_DELAY_MS": "\(Self.retryInitialMilliseconds)",
            "RETRY_MAX_DELAY_MS": "\(Self.retryMaxMilliseconds)", "OUTBOX_POLL_MS": "200",
            "SHUTDOWN_DRAIN_SECONDS": "5", "BILLING_ENVIRONMENT": "Sandbox",
            "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
            // A silent connection is noticed by deadlines only: short ones, so the suite is quick.
            "DB_STATEMENT_TIMEOUT_MS": "5000", "DB_RESPONSE_TIMEOUT_MS": "8000", "DB_LOCK_TIMEOUT_MS": "3000",
            "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": "10000",
        ]
        // Each worker connects as its own least-privilege role and broker user, as deployed.
        var environments: [String: [String: String]] = [:]
        for (product, role, service) in [
            ("chart-worker", WorkerRole.chartWorker, BrokerAccess.chartWorker),
            ("billing-worker", .billingWorker, BrokerAccess.billingWorker),
            ("report-worker", .reportWorker, BrokerAccess.reportWorker),
        ] {
            let url = Self.through(databaseProxy, try await RuntimeTestEnvironment.databaseURL(as: role))
            // Heartbeats every 5 s: a silent broker connection is given up within about 11 s.
            let amqp = Self.through(brokerProxy, try RuntimeTestEnvironment.amqpURL(as: service)) + "?heartbeat=5"
            environments[product] = common.merging(["DATABASE_URL": url, "AMQP_URL": amqp]) { _, new in new }
        }
        let fleet = try ChaosFleet(environments: environments)
        // Whatever happens below, no worker outlives the test: a stray consumer of the contract's
        // queues would take the jobs of whatever runs next.
        defer { fleet.stopAll() }
        let run = ChaosRun(
            brokerProxy: brokerProxy,
            databaseProxy: databaseProxy,
            publisher: AMQPPublisher(
                configuration: try AMQPTestEnvironment.configuration(),
                logger: amqpTestLogger("chaos")
            ),
            pool: PostgresPool(
                configuration: database,
                options: .init(maxConnections: 4, acquireTimeout: .seconds(10)),
                logger: RuntimeTestEnvironment.logger
            ),
            fleet: fleet
        )
        let clean: Bool
        do {
            clean = try await run.execute()
        } catch {
            fleet.stopAll()
            print("chaos: stopped by an error: \(error)\n\(fleet.logTails())")
            await run.close()
            throw error
        }
        fleet.stopAll()
        await run.close()
        if clean { fleet.removeLogs() }
    }

    /// A URL with its port replaced by the proxy's (host 127.0.0.1).
    static func through(_ proxy: ChaosProxy, _ url: String) -> String {
        guard let at = url.lastIndex(of: "@"), let slash = url[at...].firstIndex(of: "/") else { return url }
        return String(url[...at]) + "127.0.0.1:\(proxy.port)" + String(url[slash...])
    }
}

// MARK: - The worker processes

/// The worker processes of one chaos run, each writing to a log of its own.
final class ChaosFleet: Sendable {
    struct Member: Sendable {
        let name: String
        let process: ChildProcess
        let log: URL
    }

    private let members = Mutex<[Member]>([])
    private let killed = Mutex<Set<String>>([])
    private let environments: [String: [String: String]]
    private let folder: URL

    init(environments: [String: [String: String]]) throws {
        self.environments = environments
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    /// Starts a worker product (`chart-worker`, `billing-worker`, `report-worker`).
    func start(_ product: String, name: String) async throws -> Member {
        let log = folder.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = try await ChildProcess.start(
            executable: ProcessRunner.productPath(product),
            arguments: [],
            environment: ProcessInfo.processInfo.environment.merging(environments[product] ?? [:]) { _, new in new },
            label: name,
            appendingTo: log
        )
        let member = Member(name: name, process: process, log: log)
        members.withLock { $0.append(member) }
        return member
    }

    /// SIGKILL: no graceful shutdown, no chance to acknowledge or commit anything more.
    func kill(_ member: Member) {
        killed.withLock { _ = $0.insert(member.name) }
        member.process.kill()
    }

    /// The members that were not killed, and whether each still runs.
    func survivors() -> [(name: String, running: Bool)] {
        let killed = self.killed.withLock { $0 }
        return members.withLock { $0 }.filter { !killed.contains($0.name) }.map { ($0.name, $0.process.isRunning) }
    }

    /// SIGTERM to every member still running, then SIGKILL to any still running after `grace`.
    /// Safe to call more than once.
    func stopAll(grace: Duration = .seconds(20)) {
        let all = members.withLock { $0 }
        for member in all { member.process.send(SIGTERM) }
        let deadline = ContinuousClock.now + grace
        while all.contains(where: { $0.process.isRunning }), ContinuousClock.now < deadline { usleep(50_000) }
        for member in all { member.process.kill() }
    }

    /// Every member's whole log.
    func logText() -> String {
        members.withLock { $0 }.map { (try? String(contentsOf: $0.log, encoding: .utf8)) ?? "" }.joined()
    }

    /// Removes the logs (after a run that passed; a failed run keeps them for a look).
    func removeLogs() {
        try? FileManager.default.removeItem(at: folder)
    }

    /// The last lines of every member's log, for a failure report.
    func logTails(lines: Int = 30) -> String {
        members.withLock { $0 }.map { member in
            let text = (try? String(contentsOf: member.log, encoding: .utf8)) ?? ""
            let tail = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines)
            return "--- \(member.name) (\(member.log.path))\n" + tail.joined(separator: "\n")
        }
        .joined(separator: "\n")
    }
}

// MARK: - One run

/// The run: set-up, the waves of jobs with the chaos between them, recovery, and the audit.
struct ChaosRun {
    let brokerProxy: ChaosProxy
    let databaseProxy: ChaosProxy
    let publisher: AMQPPublisher
    let pool: PostgresPool
    let fleet: ChaosFleet

    static let zones = ["Europe/Kyiv", "Europe/London", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "UTC"]
    static let chartUsers = 200
    static let chartsPerUser = 25

    /// One message the suite publishes to `astro.jobs`.
    struct Message: Sendable {
        let type: JobType
        /// nil for a body without a readable jobId (a poison message).
        let id: JobID?
        let body: Data
    }

    /// A message the workers must refuse, with the reason code they must give: a broken message
    /// is dead-lettered (`dead`), a refusal of what the user asked is not (`failed`).
    struct Poison: Sendable {
        let message: Message
        let code: String
        var deadLettered = false
    }

    /// What a job must end as.
    enum Expected: Sendable, Hashable {
        case succeeded
        case failed(String)
        case dead(String)
        /// A report.request of a buyer who asks for more than they hold: spent, or refused.
        case succeededOrInsufficient
    }

    /// A seeded user with profiles, stored charts and a verified purchase, and the reports they ask for.
    struct Buyer: Sendable {
        enum Plan: Sendable {
            /// Five credits, thirty requests: twenty-five are refused for want of credits.
            case asksForMore
            /// Ten credits, seven requests: all are written, three credits stay.
            case asksForLess
            /// Ten credits, eight requests of which two for a profile whose chart cannot be read:
            /// those two are refunded.
            case getsRefunds
        }

        let user: UserID
        let plan: Plan
        let credits: Int
        let purchase: String
        let unreadable: Set<ProfileID>
        let requests: [ReportRequest]

        var expectedConsumed: Int { min(requests.count, credits) }
        /// Only the refund plan has unreadable charts, and it never asks for more than it holds.
        var expectedRefunds: Int { requests.filter { unreadable.contains($0.profileID) }.count }
    }

    /// One row of `jobs`.
    struct JobRow: Sendable {
        let kind: String
        let status: String
        let code: String?
        let result: JSONValue?
    }

    /// What the chaos found when it struck.
    struct Strike: Sendable {
        let what: String
        let unfinished: Int
        let of: Int
        let seconds: Double
    }

    func close() async {
        await publisher.close()
        await pool.close()
    }

    // MARK: Execution

    /// Runs the suite; returns whether every check held (the logs are kept otherwise).
    func execute() async throws -> Bool {
        let clock = ContinuousClock()
        let began = clock.now
        try await publisher.connect()
        // The contract's topology with the workers' retry policy, every queue emptied.
        let topology = WorkerTopology.contract(retry: ChaosTests.retry)
        try await publisher.declare(topology)
        for queue in topology.queues { _ = try await publisher.purgeQueue(queue.name) }
        // Every event, kept in a durable queue so that the RabbitMQ restart does not lose any.
        let eventsQueue = "chaos.events." + UUID().uuidString.prefix(8).lowercased()
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: eventsQueue)],
                bindings: [BindingSpec(queue: eventsQueue, exchange: BrokerNames.eventsExchange, routingKey: "#")]
            )
        )
        let startedAt = try await pool.withConnection {
            try $0.query("SELECT now() AS t").first!.decode(Date.self, "t")
        }

        var chartWorkers = [
            try await fleet.start("chart-worker", name: "chart-worker-1"),
            try await fleet.start("chart-worker", name: "chart-worker-2"),
        ]
        var billingWorkers = [
            try await fleet.start("billing-worker", name: "billing-worker-1"),
            try await fleet.start("billing-worker", name: "billing-worker-2"),
        ]
        _ = try await fleet.start("report-worker", name: "report-worker-1")
        try await waitForConsumers(.chartCalculate, 2)
        try await waitForConsumers(.reportRequest, 2)
        try await waitForConsumers(.reportGenerate, 1)

        var expected: [JobID: Expected] = [:]
        var kinds: [JobID: JobType] = [:]
        var published = 0
        var repeated = 0
        var sent: Set<JobID> = []
        func send(_ messages: [Message]) async throws {
            for message in messages {
                if let id = message.id, !sent.insert(id).inserted { repeated += 1 }
            }
            published += messages.count
            try await publish(messages)
        }
        func plan(_ messages: [Message], _ outcome: (Message) -> Expected) {
            for message in messages {
                guard let id = message.id else { continue }
                expected[id] = outcome(message)
                kinds[id] = message.type
            }
        }

        // Buyers: profiles with stored charts, and purchases verified by the billing-workers.
        var buyers: [Buyer] = []
        for _ in 0..<20 { buyers.append(try await seedBuyer(.asksForMore)) }
        for _ in 0..<12 { buyers.append(try await seedBuyer(.asksForLess)) }
        for _ in 0..<8 { buyers.append(try await seedBuyer(.getsRefunds)) }
        let verifications = try buyers.map { buyer in
            let id = JobID.random()
            let request = VerifyPurchaseRequest(jobID: id, userID: buyer.user, signedTransaction: buyer.purchase)
            return Message(type: .billingVerifyPurchase, id: id, body: try JSONCoding.encoder.encode(request))
        }
        plan(verifications) { _ in .succeeded }
        try await send(verifications)
        let verified = try await waitUntilFinished(
            verifications.compactMap(\.id),
            "the purchase verifications",
            until: clock.now + .seconds(60)
        )
        #expect(verified.held, "the purchases were not verified before the chaos: \(verified)")
        for buyer in buyers {
            #expect(try await balance(buyer.user).issued == buyer.credits, "credits of \(buyer.user) before the chaos")
        }

        // The jobs: charts for many users, report requests of the buyers, poison.
        var charts = (0..<(Self.chartUsers * Self.chartsPerUser)).map { index in
            let id = JobID.random()
            return Message(type: .chartCalculate, id: id, body: Self.chartBody(index: index, id: id))
        }
        charts.shuffle()
        plan(charts) { _ in .succeeded }
        var requests = buyers.flatMap { buyer in
            buyer.requests.map { request in
                Message(type: .reportRequest, id: request.jobID, body: try! JSONCoding.encoder.encode(request))
            }
        }
        requests.shuffle()
        for buyer in buyers {
            let outcome: Expected = buyer.plan == .asksForMore ? .succeededOrInsufficient : .succeeded
            for request in buyer.requests { expected[request.jobID] = outcome }
        }
        for request in requests { kinds[request.id!] = .reportRequest }
        let poison = try Self.poison(buyers: buyers)
        plan(poison.map(\.message)) { message in
            let planted = poison.first { $0.message.id == message.id }!
            return planted.deadLettered ? .dead(planted.code) : .failed(planted.code)
        }
        // Purchases again under other job ids (they must grant nothing new), and purchases signed
        // by a PKI the workers do not trust (refused, not dead-lettered).
        let foreign = try DevPKI.generate(
            commonNamePrefix: "Chaos Foreign",
            notValidBefore: Date().addingTimeInterval(-86_400),
            notValidAfter: Date().addingTimeInterval(86_400 * 30)
        )
        var repurchases: [Message] = []
        for buyer in buyers.prefix(20) {
            let id = JobID.random()
            let request = VerifyPurchaseRequest(jobID: id, userID: buyer.user, signedTransaction: buyer.purchase)
            repurchases.append(
                Message(type: .billingVerifyPurchase, id: id, body: try JSONCoding.encoder.encode(request))
            )
        }
        plan(repurchases) { _ in .succeeded }
        var untrusted: [Message] = []
        for buyer in buyers.suffix(2) {
            let id = JobID.random()
            let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.pack10",
                user: buyer.user,
                signer: foreign.signer
            )
            let request = VerifyPurchaseRequest(jobID: id, userID: buyer.user, signedTransaction: jws)
            untrusted.append(
                Message(type: .billingVerifyPurchase, id: id, body: try JSONCoding.encoder.encode(request))
            )
        }
        plan(untrusted) { _ in .failed("untrusted-certificate-chain") }

        // Four waves; each chaos strikes while its wave is being worked on.
        let wave1 = Self.withDuplicates(Array(charts[0..<700])) + [poison[0].message]
        let wave2 =
            Self.withDuplicates(Array(charts[700..<1300]) + Array(requests[0..<120])) + [
                poison[1].message, poison[3].message,
            ]
        let wave3 =
            Self.withDuplicates(Array(charts[1300..<1900]) + Array(requests[120..<240]) + repurchases + untrusted)
            + [poison[2].message]
        // The last wave is report requests (and a few charts, and charts of the first wave again,
        // long finished): the billing-worker dies in the middle of spending credits.
        let wave4Requests = Array(requests[240...])
        let wave4 =
            Self.withDuplicates(Array(charts[1900..<2000]) + wave4Requests) + Array(charts[0..<50])
            + [poison[4].message]
        // Then the network and the broker's resources: a cut to the broker, a cut to the database
        // (no FIN, no RST: only deadlines can tell), and a memory alarm that blocks publishing.
        let wave5 = Self.withDuplicates(Array(charts[2000..<2666]))
        let wave6 = Self.withDuplicates(Array(charts[2666..<3333]))
        // The alarm's wave is the largest: rabbitmqctl takes a second to raise it, and the workers
        // must still be publishing the wave's events when it does.
        let wave7 = Self.withDuplicates(Array(charts[3333...]))
        var strikes: [Strike] = []

        try await send(wave1)
        strikes.append(
            try await strike("SIGKILL chart-worker-1", wave: Self.ids(wave1), atLeast: 60) {
                fleet.kill(chartWorkers[0])
                chartWorkers[0] = try await fleet.start("chart-worker", name: "chart-worker-3")
            }
        )
        try await waitForConsumers(.chartCalculate, 2)

        try await send(wave2)
        strikes.append(
            try await strike("restart RabbitMQ", wave: Self.ids(wave2), atLeast: 60) {
                try await AMQPTestEnvironment.stack("rabbit-restart")
            }
        )

        try await send(wave3)
        strikes.append(
            try await strike("restart PostgreSQL", wave: Self.ids(wave3), atLeast: 60) {
                try await AMQPTestEnvironment.stack("pg-restart")
            }
        )

        try await send(wave4)
        strikes.append(
            try await strike("SIGKILL billing-worker-1", wave: wave4Requests.compactMap(\.id), atLeast: 20) {
                fleet.kill(billingWorkers[0])
                billingWorkers[0] = try await fleet.start("billing-worker", name: "billing-worker-3")
            }
        )

        // Silence for longer than the deadlines (heartbeats: ~11 s; an answer: 8 s), then the
        // partition heals: the old connections are reset, new ones pass.
        var cutConnections: [String: Int] = [:]
        try await send(wave5)
        strikes.append(
            try await strike(
                "cut every worker's broker connections (no FIN/RST) for 15 s",
                wave: Self.ids(wave5),
                atLeast: 60
            ) {
                brokerProxy.cut()
                try await Task.sleep(for: .seconds(15))
                cutConnections["broker"] = brokerProxy.heal()
            }
        )
        try await send(wave6)
        strikes.append(
            try await strike(
                "cut every worker's database connections (no FIN/RST) for 15 s",
                wave: Self.ids(wave6),
                atLeast: 60
            ) {
                databaseProxy.cut()
                try await Task.sleep(for: .seconds(15))
                cutConnections["database"] = databaseProxy.heal()
            }
        )
        try await send(wave7)
        strikes.append(
            try await strike("RabbitMQ memory alarm blocks publishers for 8 s", wave: Self.ids(wave7), atLeast: 60) {
                // On a loaded machine rabbitmqctl takes seconds to raise the alarm, and the
                // chart-workers finished their wave in that time, then published nothing while it
                // held (0 blocked in 2 of 4 loaded runs, with 1,583 of 1,667 jobs unfinished when
                // the command started): they are paused while it is raised, and resume with jobs
                // in hand, whose events meet the alarm.
                for worker in chartWorkers { worker.process.send(SIGSTOP) }
                do {
                    try await AMQPTestEnvironment.stack(
                        "rabbit-ctl",
                        ["set_vm_memory_high_watermark", "absolute", "1"]
                    )
                } catch {
                    for worker in chartWorkers { worker.process.send(SIGCONT) }
                    throw error
                }
                for worker in chartWorkers { worker.process.send(SIGCONT) }
                try await Task.sleep(for: .seconds(8))
                // A publisher is blocked when it next publishes, and on a loaded machine the
                // workers may publish nothing in 8 s (seen once: 0 blocked): the alarm is held
                // until one is, for at most 30 s more, so the audit sees what an alarm does.
                let held = ContinuousClock.now
                while ContinuousClock.now - held < .seconds(30),
                    !fleet.logText().contains("blocked by the broker (resource alarm)")
                {
                    try await Task.sleep(for: .milliseconds(500))
                }
                try await AMQPTestEnvironment.stack("rabbit-ctl", ["set_vm_memory_high_watermark", "0.4"])
            }
        )
        let lastStrike = clock.now

        // Recovery: every job finished, then the report.generate jobs of the credits spent, then
        // the refunds of the reports that could not be written.
        let deadline = lastStrike + .seconds(150)
        let firstIDs = Array(expected.keys)
        var finishing = [try await waitUntilFinished(firstIDs, "the jobs published", until: deadline)]
        var rows = try await jobRows(firstIDs)
        var generates: [JobID: (request: JobID, readable: Bool)] = [:]
        let buyerOf = Dictionary(uniqueKeysWithValues: buyers.flatMap { b in b.requests.map { ($0.jobID, b) } })
        for (id, row) in rows where kinds[id] == .reportRequest && row.status == "succeeded" {
            guard let buyer = buyerOf[id], let request = buyer.requests.first(where: { $0.jobID == id }) else {
                continue
            }
            let generate = ReportRequestHandler.reportJobID(for: id)
            #expect(row.result?["reportJobId"]?.stringValue == generate.description, "report.request \(id)")
            generates[generate] = (id, !buyer.unreadable.contains(request.profileID))
        }
        for (generate, origin) in generates {
            expected[generate] = origin.readable ? .succeeded : .failed("chart-unreadable")
            kinds[generate] = .reportGenerate
        }
        finishing.append(
            try await waitUntilFinished(Array(generates.keys), "the report.generate jobs", until: deadline)
        )
        var refunds: [JobID] = []
        for (generate, origin) in generates where !origin.readable {
            let refund = JobID.derived(from: generate, purpose: JobType.billingRefundCredit.rawValue)
            refunds.append(refund)
            expected[refund] = .succeeded
            kinds[refund] = .billingRefundCredit
        }
        finishing.append(try await waitUntilFinished(refunds, "the refunds", until: deadline))
        let allFinished = finishing.allSatisfy(\.held)
        let outboxWait = try await waitFor(
            "every outbox row is sent (rows unsent)",
            until: deadline,
            observe: { try await scalar("SELECT count(*)::int AS n FROM outbox WHERE sent_at IS NULL") },
            until: { $0 == 0 }
        )
        let outboxDrained = outboxWait.held
        let workQueues = topology.queues.map(\.name).filter { !$0.hasSuffix(".dead") }
        let queuesWait = try await waitFor(
            "the work and retry queues are empty (queues holding messages)",
            until: deadline,
            observe: {
                var holding: [String: UInt32] = [:]
                for queue in workQueues {
                    let count = try await publisher.queueState(queue).messageCount
                    if count > 0 { holding[queue] = count }
                }
                return holding
            },
            until: { $0.isEmpty }
        )
        let queuesEmpty = queuesWait.held
        let recovery = (clock.now - lastStrike) / .seconds(1)
        let survivors = fleet.survivors()

        // MARK: The audit
        let allIDs = Array(expected.keys)
        rows = try await jobRows(allIDs)
        let outbox = try await outboxByJob(allIDs)
        var missing: [JobID] = []
        var unfinished: [JobID] = []
        var wrong: [String] = []
        var outcomes = 0
        var duplicates = 0
        var duplicateNotes: [String] = []
        for (id, expectation) in expected {
            guard let row = rows[id] else {
                missing.append(id)
                continue
            }
            guard ["succeeded", "failed", "dead"].contains(row.status) else {
                unfinished.append(id)
                continue
            }
            let counts = outbox[id] ?? (events: 0, jobs: 0, dead: 0)
            if counts.events == 1 { outcomes += 1 }
            if counts.events > 1 {
                duplicates += counts.events - 1
                duplicateNotes.append("job \(id) (\(row.kind)) has \(counts.events) outcome events")
            }
            if counts.events == 0 { wrong.append("job \(id) (\(row.kind), \(row.status)) has no outcome event") }
            let matches: Bool
            switch expectation {
            case .succeeded: matches = row.status == "succeeded"
            case .failed(let code): matches = row.status == "failed" && row.code == code
            case .dead(let code): matches = row.status == "dead" && row.code == code
            case .succeededOrInsufficient:
                matches = row.status == "succeeded" || (row.status == "failed" && row.code == "insufficient-credits")
            }
            if !matches {
                wrong.append("job \(id) (\(row.kind)) ended \(row.status) \(row.code ?? "") instead of \(expectation)")
            }
            if counts.jobs > 1 || counts.dead > 1 {
                duplicates += max(counts.jobs - 1, 0) + max(counts.dead - 1, 0)
                duplicateNotes.append(
                    "job \(id) (\(row.kind)) queued \(counts.jobs) jobs and \(counts.dead) dead letters"
                )
            }
        }
        let retried = try await scalar(
            "SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1::uuid[]) AND attempts > 1",
            [Self.list(allIDs)]
        )
        let strangers = try await scalar(
            "SELECT count(*)::int AS n FROM jobs WHERE created_at >= $1 AND NOT (id = ANY($2::uuid[]))",
            [startedAt, Self.list(allIDs)]
        )

        // Charts: one profile per chart job, one chart per profile, each complete.
        let chartAudit = try await auditCharts(charts: charts.compactMap(\.id), rows: rows)
        duplicates += chartAudit.duplicates
        duplicateNotes += chartAudit.notes

        // Reports and credits.
        let ledgerAudit = try await auditLedger(buyers: buyers, rows: rows, generates: generates)
        duplicates += ledgerAudit.duplicates
        duplicateNotes += ledgerAudit.notes

        // Events: every outcome event the outbox holds reached the broker.
        let eventIDs = try await outcomeEventIDs(allIDs)
        let eventCount = Int(try await publisher.queueState(eventsQueue).messageCount)
        let delivered =
            eventCount == 0
            ? []
            : Set(
                try await RuntimeTestEnvironment.drain(eventsQueue, count: eventCount, timeout: .seconds(30))
                    .compactMap(\.properties.messageID)
            )
        let undelivered = eventIDs.subtracting(delivered)
        try? await publisher.deleteQueue(eventsQueue)

        // Dead letters: exactly the poison planted.
        let deadAudit = try await auditDeadLetters(poison)
        let lost = missing.count + unfinished.count + undelivered.count + (outboxDrained ? 0 : 1)

        let summary =
            "chaos: \(expected.count) jobs (\(published) messages published, \(repeated) of them repeated deliveries), "
            + "\(outcomes) outcomes, \(duplicates) duplicates, \(lost) lost, \(deadAudit.count) dead letters "
            + "(\(poison.count) planted), ledger balanced for \(ledgerAudit.balanced)/\(buyers.count) users"
        print(summary)
        for strike in strikes {
            print(
                "chaos: \(strike.what) with \(strike.unfinished)/\(strike.of) jobs of its wave unfinished "
                    + "(took \(String(format: "%.1f", strike.seconds)) s)"
            )
        }
        let logs = fleet.logText()
        let heartbeatLosses = logs.components(separatedBy: "heartbeat timeout").count - 1
        let unansweredQueries = logs.components(separatedBy: "no answer from the server").count - 1
        let blockedPublishers = logs.components(separatedBy: "blocked by the broker (resource alarm)").count - 1
        print(
            "chaos: the cuts left \(cutConnections["broker"] ?? 0) broker and \(cutConnections["database"] ?? 0) "
                + "database connections silent; the workers logged \(heartbeatLosses) heartbeat timeouts and "
                + "\(unansweredQueries) unanswered database commands; the alarm blocked \(blockedPublishers) publishers"
        )
        print(
            "chaos: \(chartAudit.profiles) charts for \(charts.count) chart jobs, \(ledgerAudit.reports) reports, "
                + "\(ledgerAudit.consumed) credits spent, \(ledgerAudit.refunded) refunded, "
                + "\(ledgerAudit.insufficient) requests refused for want of credits; \(retried) jobs retried; "
                + "\(delivered.count) events "
                + "delivered, \(undelivered.count) outcome events missing; recovered "
                + "\(String(format: "%.1f", recovery)) s after the last strike, "
                + "\(String(format: "%.1f", (clock.now - began) / .seconds(1))) s in all"
        )
        for note in (wrong + duplicateNotes + chartAudit.problems + ledgerAudit.problems + deadAudit.problems)
            .prefix(40)
        {
            print("chaos: problem: \(note)")
        }

        #expect(
            allFinished,
            "not every job finished within 150 s of the last strike: \(finishing.filter { !$0.held })"
        )
        #expect(missing.isEmpty, "\(missing.count) jobs have no jobs row (lost): \(missing.prefix(5))")
        #expect(unfinished.isEmpty, "\(unfinished.count) jobs are not finished: \(unfinished.prefix(5))")
        #expect(outcomes == expected.count, "not every job has exactly one outcome event")
        #expect(wrong.isEmpty, "\(wrong.count) jobs ended wrongly: \(wrong.prefix(5))")
        #expect(duplicates == 0, "duplicates: \(duplicateNotes.prefix(5))")
        #expect(strangers == 0, "\(strangers) jobs rows belong to no job of this run")
        #expect(chartAudit.problems.isEmpty, "\(chartAudit.problems.prefix(5))")
        #expect(ledgerAudit.problems.isEmpty, "\(ledgerAudit.problems.prefix(5))")
        #expect(ledgerAudit.balanced == buyers.count, "ledgers out of balance")
        #expect(undelivered.isEmpty, "\(undelivered.count) outcome events never reached the broker")
        #expect(outboxDrained, "outbox rows were never sent: \(outboxWait)")
        #expect(queuesEmpty, "messages are left in the work or retry queues: \(queuesWait)")
        #expect(deadAudit.problems.isEmpty, "\(deadAudit.problems.prefix(5))")
        #expect(lost == 0)
        // The cuts were noticed by the workers' own deadlines (they had nothing else to go by).
        #expect((cutConnections["broker"] ?? 0) > 0 && (cutConnections["database"] ?? 0) > 0)
        #expect(heartbeatLosses > 0, "no worker noticed the broker cut through its heartbeats")
        #expect(unansweredQueries > 0, "no worker noticed the database cut through its answer deadline")
        #expect(blockedPublishers > 0, "the memory alarm blocked no worker's publisher")
        for survivor in survivors {
            #expect(survivor.running, "\(survivor.name) was not killed by the suite but is not running")
        }
        let clean =
            allFinished && missing.isEmpty && unfinished.isEmpty && outcomes == expected.count && wrong.isEmpty
            && duplicates == 0 && strangers == 0 && chartAudit.problems.isEmpty && ledgerAudit.problems.isEmpty
            && ledgerAudit.balanced == buyers.count && undelivered.isEmpty && outboxDrained && queuesEmpty
            && deadAudit.problems.isEmpty && survivors.allSatisfy(\.running) && strikes.allSatisfy { $0.unfinished > 0 }
        if !clean { print(fleet.logTails()) }
        return clean
    }

    // MARK: The jobs

    /// A chart.calculate body: day-time births in several zones, never in a DST transition.
    static func chartBody(index: Int, id: JobID) -> Data {
        let user = chartUser(index / chartsPerUser)
        let body = ChartWorkerIntegrationTests.body(
            jobID: id,
            userID: user,
            name: "Chaos \(index % chartsPerUser)",
            latitude: Double((index * 37) % 120) - 55.25,
            date: "\(1940 + index % 70)-\(pad(1 + index % 12, 2))-\(pad(1 + (index / 12) % 28, 2))",
            time: "\(10 + index % 6):\(pad((index * 7) % 60, 2))",
            timezone: zones[index % zones.count]
        )
        return Data(body.utf8)
    }

    /// The planted poison: two invalid births and a body that is not JSON (the one dead letter)
    /// for the chart-worker, two requests for profiles that do not exist for the billing-worker.
    static func poison(buyers: [Buyer]) throws -> [Poison] {
        let latitude = JobID.random()
        let time = JobID.random()
        let strangers = [JobID.random(), JobID.random()]
        return [
            Poison(
                message: Message(
                    type: .chartCalculate,
                    id: latitude,
                    body: Data(
                        ChartWorkerIntegrationTests.body(jobID: latitude, userID: UUID(), name: "Poison", latitude: 95)
                            .utf8
                    )
                ),
                code: "latitude-out-of-range"
            ),
            Poison(
                message: Message(type: .chartCalculate, id: nil, body: Data("chaos: this is not JSON {".utf8)),
                code: "invalid-json",
                deadLettered: true
            ),
            Poison(
                message: Message(
                    type: .chartCalculate,
                    id: time,
                    body: Data(ChartWorkerIntegrationTests.body(jobID: time, userID: UUID(), time: "25:00").utf8)
                ),
                code: "invalid-birth-time"
            ),
        ]
            + strangers.enumerated().map { index, id in
                Poison(
                    message: Message(
                        type: .reportRequest,
                        id: id,
                        body: try! JSONCoding.encoder.encode(
                            ReportRequest(
                                jobID: id,
                                userID: buyers[index].user,
                                profileID: .random(),
                                area: .career,
                                language: .en
                            )
                        )
                    ),
                    code: "profile-not-found"
                )
            }
    }

    /// Every tenth message delivered twice at once, and every tenth again at the end of the wave.
    static func withDuplicates(_ messages: [Message]) -> [Message] {
        var wave: [Message] = []
        var again: [Message] = []
        for (index, message) in messages.enumerated() {
            wave.append(message)
            if index % 10 == 3 { wave.append(message) }
            if index % 10 == 7 { again.append(message) }
        }
        return wave + again
    }

    /// The users of the chart jobs: fixed ids, so the audit can find every profile they have.
    static func chartUser(_ number: Int) -> UUID {
        UUID(uuidString: "00000000-0000-4000-8000-" + pad(number, 12))!
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(width - digits.count, 0)) + digits
    }

    static func ids(_ messages: [Message]) -> [JobID] { Array(Set(messages.compactMap(\.id))) }

    /// A Postgres array literal of job ids, bound as one text parameter.
    static func list(_ ids: [JobID]) -> String { "{" + ids.map(\.description).joined(separator: ",") + "}" }

    /// A user with profiles, their charts (readable, or `{}` for the refund plan's third profile),
    /// the reports they will ask for, and a purchase signed with the test PKI.
    func seedBuyer(_ plan: Buyer.Plan) async throws -> Buyer {
        let user = UserID.random()
        let (readableCount, unreadableCount, product, quantity, credits): (Int, Int, String, Int, Int) =
            switch plan {
            case .asksForMore: (3, 0, "com.astrosvitla.report.credit.pack5", 1, 5)
            case .asksForLess: (2, 0, "com.astrosvitla.report.credit.pack10", 1, 10)
            case .getsRefunds: (2, 1, "com.astrosvitla.report.credit.pack5", 2, 10)
            }
        let readable = (0..<readableCount).map { _ in ProfileID.random() }
        let unreadable = (0..<unreadableCount).map { _ in ProfileID.random() }
        let chart = ReportJourneyTests.chartJSON
        try await pool.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            for (index, profile) in (readable + unreadable).enumerated() {
                try database.execute(
                    """
                    INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                    VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                    """,
                    [profile.uuid, user.uuid, "Buyer profile \(index)"]
                )
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid, index < readable.count ? chart : "{}"]
                )
            }
        }
        let combinations = ReportArea.allCases.flatMap { area in ReportLanguage.allCases.map { (area, $0) } }
        func requests(_ profile: ProfileID, _ count: Int) -> [ReportRequest] {
            combinations.prefix(count).map {
                ReportRequest(jobID: .random(), userID: user, profileID: profile, area: $0.0, language: $0.1)
            }
        }
        let asked: [ReportRequest] =
            switch plan {
            case .asksForMore: readable.flatMap { requests($0, 10) }
            case .asksForLess: requests(readable[0], 4) + requests(readable[1], 3)
            case .getsRefunds: readable.flatMap { requests($0, 3) } + requests(unreadable[0], 2)
            }
        return Buyer(
            user: user,
            plan: plan,
            credits: credits,
            purchase: try BillingLedgerIntegrationTests.signedPurchase(product, user: user, quantity: quantity).jws,
            unreadable: Set(unreadable),
            requests: asked
        )
    }

    func publish(_ messages: [Message]) async throws {
        for start in stride(from: 0, to: messages.count, by: 250) {
            let chunk = messages[start..<min(start + 250, messages.count)].map { message in
                OutgoingMessage(
                    exchange: BrokerNames.jobsExchange,
                    routingKey: message.type.rawValue,
                    body: message.body,
                    properties: MessageProperties(
                        contentType: "application/json",
                        messageID: message.id?.description ?? UUID().uuidString.lowercased()
                    ),
                    mandatory: true
                )
            }
            try await publisher.publish(chunk, timeout: .seconds(60))
        }
    }

    // MARK: The chaos

    /// Waits until `threshold` jobs of the wave are finished, then strikes, and records how much of
    /// the wave was still unfinished: a strike that found its wave done would prove nothing.
    func strike(
        _ what: String,
        wave: [JobID],
        atLeast threshold: Int,
        _ action: () async throws -> Void
    ) async throws -> Strike {
        let clock = ContinuousClock()
        let reached = try await waitFor(
            "\(threshold) jobs of the wave finish before \(what) (finished of \(wave.count))",
            until: clock.now + .seconds(90),
            poll: .milliseconds(10),
            observe: { try await finishedCount(wave) },
            until: { $0 >= threshold }
        )
        #expect(reached.held, "\(what): the wave never got under way: \(reached)")
        let finished = (try? await finishedCount(wave)) ?? 0
        let started = clock.now
        try await action()
        #expect(finished < wave.count, "\(what): its wave was finished before it struck; it proved nothing")
        return Strike(
            what: what,
            unfinished: wave.count - finished,
            of: wave.count,
            seconds: (clock.now - started) / .seconds(1)
        )
    }

    func waitForConsumers(_ queue: JobType, _ count: Int) async throws {
        try await RuntimeTestEnvironment.eventually("\(count) consumers on \(queue)", timeout: .seconds(60)) {
            ((try? await publisher.queueState(queue.rawValue))?.consumerCount ?? 0) >= count
        }
    }

    /// What a wait of the recovery found: whether its condition held by the deadline, and what it
    /// saw last (for the audit's messages).
    struct Waited: CustomStringConvertible {
        let what: String
        let held: Bool
        let lastSeen: String
        var description: String { "\(what): \(held ? "held" : "not by the deadline"), last seen \(lastSeen)" }
    }

    /// Reads a value with `observe` (an error counts as not yet: the servers restart under it)
    /// until `accept` takes it or `deadline` passes; the audit reports whether it held, named
    /// `what`, with the last value seen.
    func waitFor<Value>(
        _ what: String,
        until deadline: ContinuousClock.Instant,
        poll: Duration = .milliseconds(250),
        observe: () async throws -> Value,
        until accept: (Value) -> Bool
    ) async throws -> Waited {
        var lastSeen = "nothing"
        while true {
            do {
                let value = try await observe()
                lastSeen = "\(value)"
                if accept(value) { return Waited(what: what, held: true, lastSeen: lastSeen) }
            } catch {
                lastSeen = "an error: \(error)"
            }
            if ContinuousClock.now >= deadline { return Waited(what: what, held: false, lastSeen: lastSeen) }
            try await Task.sleep(for: poll)
        }
    }

    /// Waits until every job of `ids` (named `what`) finished (succeeded, failed or dead).
    func waitUntilFinished(
        _ ids: [JobID],
        _ what: String,
        until deadline: ContinuousClock.Instant
    ) async throws -> Waited {
        try await waitFor(
            "\(what) finish (finished of \(ids.count))",
            until: deadline,
            observe: { try await finishedCount(ids) },
            until: { $0 == ids.count }
        )
    }

    // MARK: Queries

    func scalar(_ sql: SQL, _ parameters: [any PostgresBindable] = []) async throws -> Int {
        try await pool.withConnection { try $0.query(sql, parameters).first?.decode(Int.self, "n") ?? -1 }
    }

    func finishedCount(_ ids: [JobID]) async throws -> Int {
        try await scalar(
            "SELECT count(*)::int AS n FROM jobs WHERE id = ANY($1::uuid[]) AND status IN ('succeeded', 'failed', 'dead')",
            [Self.list(ids)]
        )
    }

    func balance(_ user: UserID) async throws -> CreditBalance {
        try await pool.withConnection { try CreditLedger.balance(userID: user, database: $0) }
    }

    func jobRows(_ ids: [JobID]) async throws -> [JobID: JobRow] {
        let list = Self.list(ids)
        return try await pool.withConnection { database in
            var rows: [JobID: JobRow] = [:]
            for row in try database.query(
                """
                SELECT id, kind, status, error->>'code' AS code, result::text AS result
                FROM jobs WHERE id = ANY($1::uuid[])
                """,
                [list]
            ) {
                let result = try row.decode(String?.self, "result").flatMap {
                    try? JSONDecoder().decode(JSONValue.self, from: Data($0.utf8))
                }
                rows[JobID(try row.decode(UUID.self, "id"))] = JobRow(
                    kind: try row.decode(String.self, "kind"),
                    status: try row.decode(String.self, "status"),
                    code: try row.decode(String?.self, "code"),
                    result: result
                )
            }
            return rows
        }
    }

    /// Per job: its outcome events, the jobs it queued and its dead letters, from the outbox.
    func outboxByJob(_ ids: [JobID]) async throws -> [JobID: (events: Int, jobs: Int, dead: Int)] {
        let list = Self.list(ids)
        return try await pool.withConnection { database in
            var counts: [JobID: (events: Int, jobs: Int, dead: Int)] = [:]
            for row in try database.query(
                """
                SELECT job_id,
                       count(*) FILTER (WHERE exchange = 'astro.events')::int AS events,
                       count(*) FILTER (WHERE exchange = 'astro.jobs')::int AS jobs,
                       count(*) FILTER (WHERE exchange = 'astro.dlx')::int AS dead
                FROM outbox WHERE job_id = ANY($1::uuid[]) GROUP BY job_id
                """,
                [list]
            ) {
                counts[JobID(try row.decode(UUID.self, "job_id"))] = (
                    try row.decode(Int.self, "events"), try row.decode(Int.self, "jobs"),
                    try row.decode(Int.self, "dead")
                )
            }
            return counts
        }
    }

    /// The message ids of the outcome events of these jobs (as the relay publishes them).
    func outcomeEventIDs(_ ids: [JobID]) async throws -> Set<String> {
        let list = Self.list(ids)
        return try await pool.withConnection { database in
            Set(
                try database.query(
                    "SELECT message_id FROM outbox WHERE job_id = ANY($1::uuid[]) AND exchange = 'astro.events'",
                    [list]
                ).map { try $0.decode(UUID.self, "message_id").uuidString.lowercased() }
            )
        }
    }

    // MARK: The audit

    struct ChartAudit {
        var profiles = 0
        var duplicates = 0
        var notes: [String] = []
        var problems: [String] = []
    }

    /// One profile per chart job (the one its result names), one complete chart per profile.
    func auditCharts(charts: [JobID], rows: [JobID: JobRow]) async throws -> ChartAudit {
        var audit = ChartAudit()
        var named: Set<UUID> = []
        for id in charts {
            guard let profile = rows[id]?.result?["profileId"]?.stringValue.flatMap(UUID.init(uuidString:)) else {
                audit.problems.append("chart job \(id) names no profile")
                continue
            }
            if !named.insert(profile).inserted {
                audit.duplicates += 1
                audit.notes.append("two chart jobs name profile \(profile)")
            }
        }
        let users = "{" + (0..<Self.chartUsers).map { Self.chartUser($0).uuidString }.joined(separator: ",") + "}"
        let stored = try await pool.withConnection { database in
            try database.query(
                """
                SELECT p.id,
                       (SELECT count(*) FROM birth_charts c WHERE c.profile_id = p.id)::int AS charts,
                       (SELECT min(jsonb_array_length(c.chart_data->'planets')) FROM birth_charts c
                        WHERE c.profile_id = p.id) AS planets
                FROM user_profiles p WHERE p.user_id = ANY($1::uuid[])
                """,
                [users]
            ).map {
                (try $0.decode(UUID.self, "id"), try $0.decode(Int.self, "charts"), try $0.decode(Int?.self, "planets"))
            }
        }
        audit.profiles = stored.count
        if stored.count > charts.count {
            audit.duplicates += stored.count - charts.count
            audit.notes.append("\(stored.count) profiles for \(charts.count) chart jobs")
        }
        for (profile, count, planets) in stored {
            if count > 1 {
                audit.duplicates += count - 1
                audit.notes.append("profile \(profile) has \(count) charts")
            }
            if count == 0 { audit.problems.append("profile \(profile) has no chart") }
            if count > 0, planets != 10 { audit.problems.append("the chart of \(profile) has \(planets ?? 0) planets") }
            if !named.contains(profile) { audit.problems.append("profile \(profile) belongs to no chart job") }
        }
        let storedIDs = Set(stored.map(\.0))
        let absent = named.subtracting(storedIDs)
        if !absent.isEmpty { audit.problems.append("\(absent.count) profiles named by chart jobs are not stored") }
        return audit
    }

    struct LedgerAudit {
        var balanced = 0
        var reports = 0
        var consumed = 0
        var refunded = 0
        var insufficient = 0
        var duplicates = 0
        var notes: [String] = []
        var problems: [String] = []
    }

    /// Per buyer: the ledger balances and says what the plan implies; each consumption has exactly
    /// one report.generate job and ends as exactly one report or one refund; no credit is spent twice
    /// and no report is written twice.
    func auditLedger(
        buyers: [Buyer],
        rows: [JobID: JobRow],
        generates: [JobID: (request: JobID, readable: Bool)]
    ) async throws -> LedgerAudit {
        var audit = LedgerAudit()
        let users = "{" + buyers.map(\.user.description).joined(separator: ",") + "}"
        let (reports, consumptions, doubleSpent) = try await pool.withConnection { database in
            let reports = try database.query(
                """
                SELECT r.user_id, r.profile_id, r.area, r.language, c.consumed_by_job
                FROM report_purchases r LEFT JOIN purchase_credits c ON c.id = r.credit_id
                WHERE r.user_id = ANY($1::uuid[])
                """,
                [users]
            ).map {
                (
                    user: try $0.decode(UUID.self, "user_id"), profile: try $0.decode(UUID.self, "profile_id"),
                    area: try $0.decode(String.self, "area"), language: try $0.decode(String.self, "language"),
                    request: try $0.decode(UUID?.self, "consumed_by_job")
                )
            }
            let consumptions = try database.query(
                """
                SELECT consumption_job,
                       count(*) FILTER (WHERE entry = 'consumed')::int AS consumed,
                       count(*) FILTER (WHERE entry = 'refunded')::int AS refunded
                FROM credit_ledger WHERE user_id = ANY($1::uuid[]) AND consumption_job IS NOT NULL
                GROUP BY consumption_job
                """,
                [users]
            ).map {
                (
                    request: JobID(try $0.decode(UUID.self, "consumption_job")),
                    consumed: try $0.decode(Int.self, "consumed"), refunded: try $0.decode(Int.self, "refunded")
                )
            }
            let doubleSpent =
                try database.query(
                    """
                    SELECT count(*)::int AS n FROM (
                        SELECT consumed_by_job FROM purchase_credits
                        WHERE user_id = ANY($1::uuid[]) AND consumed GROUP BY consumed_by_job HAVING count(*) > 1
                    ) twice
                    """,
                    [users]
                ).first?.decode(Int.self, "n") ?? 0
            return (reports, consumptions, doubleSpent)
        }
        audit.reports = reports.count
        if doubleSpent > 0 {
            audit.duplicates += doubleSpent
            audit.notes.append("\(doubleSpent) request jobs hold more than one credit")
        }
        var reportKeys: Set<String> = []
        var reported: [JobID: Int] = [:]
        let requestByID = Dictionary(uniqueKeysWithValues: buyers.flatMap { $0.requests }.map { ($0.jobID, $0) })
        for report in reports {
            if !reportKeys.insert("\(report.profile) \(report.area) \(report.language)").inserted {
                audit.duplicates += 1
                audit.notes.append("two reports for \(report.profile) \(report.area)/\(report.language)")
            }
            guard let request = report.request.map(JobID.init), let asked = requestByID[request],
                asked.profileID.uuid == report.profile, asked.area.rawValue == report.area,
                asked.language.rawValue == report.language
            else {
                audit.problems.append("report for \(report.profile) \(report.area) is paid by no request of it")
                continue
            }
            reported[request, default: 0] += 1
        }
        let generateOf = Dictionary(uniqueKeysWithValues: generates.map { ($0.value.request, $0.key) })
        for consumption in consumptions {
            audit.consumed += consumption.consumed
            audit.refunded += consumption.refunded
            if consumption.consumed != 1 || consumption.refunded > 1 {
                audit.duplicates += max(consumption.consumed - 1, 0) + max(consumption.refunded - 1, 0)
                audit.notes.append(
                    "request \(consumption.request) consumed \(consumption.consumed)× refunded \(consumption.refunded)×"
                )
            }
            guard let generate = generateOf[consumption.request], rows[generate] != nil else {
                audit.problems.append("request \(consumption.request) spent a credit but has no report.generate job")
                continue
            }
            let outcomes = (reported[consumption.request] ?? 0) + consumption.refunded
            if outcomes != 1 {
                audit.problems.append(
                    "the credit of request \(consumption.request) ended as \(reported[consumption.request] ?? 0) "
                        + "reports and \(consumption.refunded) refunds"
                )
            }
        }
        if consumptions.count != generates.count {
            audit.problems.append("\(consumptions.count) consumptions for \(generates.count) spending requests")
        }
        for buyer in buyers {
            let balance = try await balance(buyer.user)
            if balance.balanced { audit.balanced += 1 }
            let statuses = buyer.requests.compactMap { rows[$0.jobID] }
            let spent = statuses.filter { $0.status == "succeeded" }.count
            let refused = statuses.filter { $0.status == "failed" && $0.code == "insufficient-credits" }.count
            audit.insufficient += refused
            let written = reports.filter { $0.user == buyer.user.uuid }.count
            let expectation = (
                issued: buyer.credits, consumed: buyer.expectedConsumed, refunded: buyer.expectedRefunds,
                available: buyer.credits - buyer.expectedConsumed + buyer.expectedRefunds,
                reports: buyer.expectedConsumed - buyer.expectedRefunds
            )
            let found = (
                issued: balance.issued, consumed: balance.consumed, refunded: balance.refunded,
                available: balance.available, reports: written
            )
            if found != expectation || !balance.balanced || spent != buyer.expectedConsumed
                || refused != buyer.requests.count - buyer.expectedConsumed
            {
                audit.problems.append(
                    "buyer \(buyer.user) (\(buyer.plan)): expected \(expectation), found \(found), "
                        + "ledger available \(balance.ledgerAvailable); \(spent) requests spent, \(refused) refused"
                )
            }
        }
        return audit
    }

    struct DeadLetterAudit {
        var count = 0
        var problems: [String] = []
    }

    /// Drains every `<queue>.dead` of the contract: each dead letter must be a planted poison
    /// message with its reason, and each planted broken message must be there, from one decision
    /// only (a copy republished by the outbox relay keeps the message id); a refused request must
    /// not.
    func auditDeadLetters(_ poison: [Poison]) async throws -> DeadLetterAudit {
        var audit = DeadLetterAudit()
        var seen: [Int: Set<String>] = [:]
        for type in JobType.all {
            let queue = BrokerNames.deadLetterQueue(of: type.rawValue)
            let count = Int(try await publisher.queueState(queue).messageCount)
            guard count > 0 else { continue }
            let letters = try await RuntimeTestEnvironment.drain(queue, count: count, timeout: .seconds(20))
            audit.count += letters.count
            for letter in letters {
                guard
                    let index = poison.firstIndex(where: {
                        $0.message.type == type && $0.message.body == letter.body
                    })
                else {
                    let text = String(decoding: letter.body.prefix(200), as: UTF8.self)
                    let reason = letter.properties.headers[BrokerNames.Header.reasonCode]?.stringValue ?? "?"
                    audit.problems.append("unplanted dead letter in \(queue) (\(reason)): \(text)")
                    continue
                }
                let reason = letter.properties.headers[BrokerNames.Header.reasonCode]?.stringValue
                if reason != poison[index].code {
                    audit.problems.append(
                        "\(queue): dead letter \(index) says \(reason ?? "nothing"), not \(poison[index].code)"
                    )
                }
                seen[index, default: []].insert(letter.properties.messageID ?? "")
            }
        }
        for index in poison.indices {
            switch seen[index]?.count ?? 0 {
            case 0 where !poison[index].deadLettered: break
            case _ where !poison[index].deadLettered:
                audit.problems.append("planted refusal \(index) (\(poison[index].code)) was dead-lettered")
            case 0: audit.problems.append("planted poison \(index) (\(poison[index].code)) is not dead-lettered")
            case 1: break
            case let count: audit.problems.append("planted poison \(index) was dead-lettered by \(count) decisions")
            }
        }
        return audit
    }
}
