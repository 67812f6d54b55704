import AMQP
import AstroDomain
import Billing
import ChartService
import Foundation
import Postgres
import SampleJobs
import Schema
import Synchronization
import TestProcesses
import Testing
import WorkerRuntime

/// Issue 17: `astroctl dead` (list, show, replay, purge) and `astroctl job cancel` against a real
/// broker and database, with astroctl on its own database role (`astro_operator`).
@Suite(.timeLimit(.minutes(2)))
struct OperatorActionsTests {
    /// What a test handler saw, and whether its cause of failure is "fixed".
    final class Switch: Sendable {
        private let state = Mutex((broken: true, prepared: 0))
        var prepared: Int { state.withLock { $0.prepared } }
        var isBroken: Bool { state.withLock { $0.broken } }
        func fix() { state.withLock { $0.broken = false } }
        func count() { state.withLock { $0.prepared += 1 } }
    }

    /// chart.calculate on a test queue, failing for good (as with its ephemeris missing) until fixed.
    struct ChartHandler: JobHandler {
        let jobType: JobType
        let cause: Switch
        let inner = ChartCalculateHandler(engine: ChartWorkerIntegrationTests.engine)
        func prepare(_ job: JobEnvelope) async throws -> ChartCalculateHandler.Prepared {
            cause.count()
            if cause.isBroken {
                throw JobRejection(code: "ephemeris-unavailable", message: "the ephemeris files are missing")
            }
            return try await inner.prepare(job)
        }
        func commit(
            _ prepared: ChartCalculateHandler.Prepared,
            job: JobEnvelope,
            database: PostgresConnection
        ) throws
            -> JobOutcome
        { try inner.commit(prepared, job: job, database: database) }
    }

    /// report.request on a test queue, counting its runs.
    struct ReportHandler: JobHandler {
        let jobType: JobType
        let runs: Switch
        let inner = ReportRequestHandler()
        func prepare(_ job: JobEnvelope) async throws -> ReportRequest {
            runs.count()
            return try await inner.prepare(job)
        }
        func commit(
            _ prepared: ReportRequest,
            job: JobEnvelope,
            database: PostgresConnection
        ) throws
            -> JobOutcome
        { try inner.commit(prepared, job: job, database: database) }
    }

    func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        let url = try await RuntimeTestEnvironment.databaseURL(as: .operator)
        return try await ProcessRunner.run(
            ProcessRunner.productPath("astroctl"),
            arguments + ["--database-url", url],
            environment: ["ASTRO_OPERATOR": "test-operator"]
        )
    }

    func deadCount(_ running: RunningWorker) async throws -> Int {
        Int(try await running.publisher.queueState(running.queue + ".dead").messageCount)
    }

    func actions(
        _ running: RunningWorker,
        job: JobID
    ) async throws -> [(action: String, outcome: String, who: String, why: String?)] {
        try await running.pool.withConnection { database in
            try database.query(
                "SELECT action, outcome, operator, reason FROM operator_actions WHERE job_id = $1 ORDER BY id",
                [job.uuid]
            ).map {
                (
                    try $0.decode(String.self, "action"), try $0.decode(String.self, "outcome"),
                    try $0.decode(String.self, "operator"), try $0.decode(String?.self, "reason")
                )
            }
        }
    }

    @Test func aDeadChartReplayedAfterItsCauseIsFixedRunsOnceAndSucceeds() async throws {
        let cause = Switch()
        let running = try await RunningWorker.start(handlers: {
            [ChartHandler(jobType: JobType(rawValue: $0), cause: cause)]
        })
        let id = JobID.random()
        try await running.publish(ChartWorkerIntegrationTests.body(jobID: id, userID: UUID()))
        try await running.waitForStatus(id, "dead")
        try await RuntimeTestEnvironment.eventually(
            "one dead letter in \(running.queue).dead (dead letters)",
            timeout: .seconds(30),
            observe: { try await deadCount(running) },
            until: { $0 == 1 }
        )

        let listed = try await astroctl(["dead", "list", "--queue", running.queue])
        #expect(listed.status == 0, "\(listed.error)")
        #expect(listed.output.contains(id.description) && listed.output.contains("ephemeris-unavailable"))
        // Reading took nothing away.
        #expect(try await deadCount(running) == 1)

        cause.fix()
        let replay = try await astroctl([
            "dead", "replay", id.description, "--queue", running.queue, "--why", "files restored",
        ])
        #expect(replay.status == 0, "\(replay.output) \(replay.error)")
        #expect(replay.output.contains("replayed \(id)"))
        try await running.waitForStatus(id, "succeeded")
        #expect(try await running.jobRow(id)?.attempts == 1)
        #expect(try await deadCount(running) == 0)
        #expect(cause.prepared == 2)

        // A second replay finds no dead letter and republishes nothing.
        let again = try await astroctl(["dead", "replay", id.description, "--queue", running.queue])
        #expect(again.status == 0, "\(again.error)")
        #expect(again.output.contains("skipped"))
        try await Task.sleep(for: .milliseconds(500))
        #expect(cause.prepared == 2)
        let recorded = try await actions(running, job: id)
        #expect(recorded.map(\.action) == ["dead.replay", "dead.replay"])
        #expect(recorded.map(\.outcome) == ["done", "skipped"])
        #expect(recorded.first?.who == "test-operator" && recorded.first?.why == "files restored")

        // A finished job cannot be cancelled.
        let cancel = try await astroctl(["job", "cancel", id.description])
        #expect(cancel.status == 1)
        #expect(cancel.error.contains("already ended (succeeded)"), "\(cancel.error)")
        #expect(try await running.jobRow(id)?.status == "succeeded")
        #expect(try await actions(running, job: id).last.map { "\($0.action) \($0.outcome)" } == "job.cancel refused")
        try await running.stop()
    }

    @Test func aReplayedPoisonMessageIsDeadLetteredAgainOnce() async throws {
        let cause = Switch()
        let running = try await RunningWorker.start(handlers: {
            [ChartHandler(jobType: JobType(rawValue: $0), cause: cause)]
        })
        let id = JobID.random()
        try await running.publish(ChartWorkerIntegrationTests.body(jobID: id, userID: UUID()))
        try await RuntimeTestEnvironment.eventually(
            "one dead letter in \(running.queue).dead (dead letters)",
            timeout: .seconds(30),
            observe: { try await deadCount(running) },
            until: { $0 == 1 }
        )
        let replay = try await astroctl([
            "dead", "replay", "--queue", running.queue, "--reason", "ephemeris-unavailable",
        ])
        #expect(replay.status == 0, "\(replay.error)")
        #expect(replay.output.contains("replayed \(id)"))
        try await RuntimeTestEnvironment.eventually(
            "job \(id) is dead again, with one dead letter (status, dead letters)",
            timeout: .seconds(30),
            observe: { (try await running.jobRow(id)?.status, try await deadCount(running)) },
            until: { $0.0 == "dead" && $0.1 == 1 }
        )
        // It ran once more and stays dead: nothing replays it by itself.
        try await Task.sleep(for: .seconds(1))
        #expect(cause.prepared == 2)
        #expect(try await deadCount(running) == 1)
        #expect(try await running.jobRow(id)?.errorCode == "ephemeris-unavailable")
        // The first failure's dead letter is gone, but its time is not.
        let listed = try await astroctl(["dead", "list", "--queue", running.queue, "--json"])
        let entry = try #require(try JSONDecoder().decode([JSONValue].self, from: Data(listed.output.utf8)).first)
        let first = try #require(entry["firstFailure"]?.stringValue)
        let last = try #require(entry["lastFailure"]?.stringValue)
        #expect(first < last, "\(first) \(last)")
        try await running.stop()
    }

    @Test func listAndShowFilterAndRedactAndPurgeIsRecorded() async throws {
        let cause = Switch()
        let running = try await RunningWorker.start(handlers: {
            [ChartHandler(jobType: JobType(rawValue: $0), cause: cause)]
        })
        let id = JobID.random()
        let jws =
            "eyJhbGciOiJFUzI1NiIsIng1YyI6WyJNSUlCIl19.eyJ0cmFuc2FjdGlvbklkIjoiMjAwMDAwMDAwMCJ9.c2lnbmF0dXJlLWJ5dGVz"
        let body = ChartWorkerIntegrationTests.body(jobID: id, userID: UUID())
        let secretBody = String(body.dropLast()) + ",\"signedTransaction\":\"\(jws)\",\"note\":\"visible\"}"
        try await running.publish(secretBody)
        try await RuntimeTestEnvironment.eventually(
            "one dead letter in \(running.queue).dead (dead letters)",
            timeout: .seconds(30),
            observe: { try await deadCount(running) },
            until: { $0 == 1 }
        )

        let show = try await astroctl(["dead", "show", id.description, "--queue", running.queue])
        #expect(show.status == 0, "\(show.error)")
        #expect(!show.output.contains(jws))
        #expect(show.output.contains("[redacted: \(jws.utf8.count) bytes]"))
        #expect(show.output.contains("visible") && show.output.contains("x-astro-reason-code: ephemeris-unavailable"))

        let other = try await astroctl(["dead", "list", "--queue", running.queue, "--reason", "something-else"])
        #expect(other.output.contains("no dead letters"), "\(other.output)")
        let old = try await astroctl(["dead", "list", "--queue", running.queue, "--since", "2000-01-01T00:00:00Z"])
        #expect(old.output.contains(id.description))
        let json = try await astroctl(["dead", "list", "--queue", running.queue, "--since", "1h", "--json"])
        let entries = try JSONDecoder().decode([JSONValue].self, from: Data(json.output.utf8))
        #expect(entries.count == 1)
        #expect(entries.first?["jobId"]?.stringValue == id.description)
        #expect(entries.first?["status"]?.stringValue == "dead", "\(json.output) \(json.error)")
        #expect(try await deadCount(running) == 1)

        let purge = try await astroctl(["dead", "purge", "--queue", running.queue, "--yes", "--why", "test traffic"])
        #expect(purge.status == 0, "\(purge.error)")
        #expect(purge.output.contains("purged 1"))
        #expect(try await deadCount(running) == 0)
        let detail = try await running.pool.withConnection { database in
            try database.query(
                "SELECT outcome, reason, detail->>'messages' AS n FROM operator_actions WHERE action = 'dead.purge' AND queue = $1",
                [running.queue + ".dead"]
            ).map {
                "\(try $0.decode(String.self, "outcome")) \(try $0.decode(String?.self, "reason") ?? "") \(try $0.decode(String?.self, "n") ?? "")"
            }
        }
        #expect(detail == ["done test traffic 1"], "\(purge.output) \(purge.error)")
        #expect(try await running.jobRow(id)?.status == "dead")
        try await running.stop()
    }

    @Test func aCancelledPaidReportNeverRunsNorSpendsItsCredit() async throws {
        let runs = Switch()
        let running = try await RunningWorker.start(handlers: {
            [ReportHandler(jobType: JobType(rawValue: $0), runs: runs)]
        })
        let user = UserID.random()
        let profile = ProfileID.random()
        let credit = UUID()
        let transaction = "cancel-test-\(UUID().uuidString)"
        let id = JobID.random()
        try await running.pool.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, 'Me', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [profile.uuid, user.uuid]
            )
            let record = UUID()
            try database.execute(
                """
                INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                    purchase_date, price_usd, currency_code, credit_amount, environment)
                VALUES ($1, $2, $3, $3, 'com.astrosvitla.report.credit.single', now(), 4.99, 'USD', 1, 'Sandbox')
                """,
                [record, user.uuid, transaction]
            )
            try database.execute(
                """
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date)
                VALUES ($1, $2, $3, $4, now())
                """,
                [credit, record, transaction, user.uuid]
            )
            // Queued: the job waits for its worker (as a retry waits in its delay queue).
            try database.execute(
                "INSERT INTO jobs (id, kind, status, attempts, user_id) VALUES ($1, $2, 'queued', 0, $3)",
                [id.uuid, running.queue, user.uuid]
            )
        }
        let cancel = try await astroctl(["job", "cancel", id.description, "--why", "user asked"])
        #expect(cancel.status == 0, "\(cancel.error)")
        #expect(cancel.output.contains("cancelled \(id)"))
        #expect(try await running.jobRow(id)?.status == "cancelled")

        let events = try await running.eventQueue(routingKey: running.queue + ".cancelled")
        let body = String(
            decoding: try JSONCoding.encoder.encode(
                ReportRequest(jobID: id, userID: user, profileID: profile, area: .career, language: .en)
            ),
            as: UTF8.self
        )
        try await running.publish(body)
        try await running.publish(body)
        let delivered = try await running.drain(events, count: 2, timeout: .seconds(4))
        #expect(delivered.count == 1)
        let event = try JSONDecoder().decode(JSONValue.self, from: try #require(delivered.first).body)
        #expect(event["jobId"]?.stringValue == id.description)
        #expect(event["userId"]?.stringValue == user.description)
        #expect(event["error"]?["code"]?.stringValue == JobStatus.cancelledErrorCode)
        #expect(runs.prepared == 0)
        let consumed = try await running.pool.withConnection { database in
            try database.query("SELECT consumed FROM purchase_credits WHERE id = $1", [credit]).first?.decode(
                Bool.self,
                "consumed"
            )
        }
        #expect(consumed == false)
        #expect(running.worker.metrics.render().contains("outcome=\"cancelled\"} 2"))
        #expect(try await actions(running, job: id).map { "\($0.action) \($0.outcome)" } == ["job.cancel done"])
        // Cancelling again is harmless.
        let again = try await astroctl(["job", "cancel", id.description])
        #expect(again.status == 0)
        #expect(again.output.contains("cancelled before"))
        try await running.stop()
    }

    /// A report.request that spent its credit is cancelled through its report.generate (whose
    /// worker refunds the credit); one whose report.generate runs is refused; an unknown job
    /// needs its type.
    @Test func cancelReachesTheReportOfASpentCreditAndRefusesWhatStarted() async throws {
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        func status(_ id: JobID) async throws -> String? {
            try await pool.withConnection { database in
                try database.query("SELECT kind || ' ' || status AS s FROM jobs WHERE id = $1", [id.uuid]).first?
                    .decode(
                        String.self,
                        "s"
                    )
            }
        }
        let (request, running) = (JobID.random(), JobID.random())
        try await pool.withConnection { database in
            for id in [request, running] {
                try database.execute(
                    "INSERT INTO jobs (id, kind, status, attempts, finished_at) VALUES ($1, 'report.request', 'succeeded', 1, now())",
                    [id.uuid]
                )
            }
            try database.execute(
                "INSERT INTO jobs (id, kind, status, attempts) VALUES ($1, 'report.generate', 'running', 1)",
                [ReportRequestHandler.reportJobID(for: running).uuid]
            )
        }
        let cancelled = try await astroctl(["job", "cancel", request.description, "--why", "refund it"])
        #expect(cancelled.status == 0, "\(cancelled.error)")
        let generate = ReportRequestHandler.reportJobID(for: request)
        #expect(cancelled.output.contains("cancelled its report.generate \(generate)"))
        #expect(try await status(generate) == "report.generate cancelled")
        #expect(try await status(request) == "report.request succeeded")

        let refused = try await astroctl(["job", "cancel", running.description])
        #expect(refused.status == 1)
        #expect(refused.error.contains("it is running"), "\(refused.error)")
        #expect(try await status(ReportRequestHandler.reportJobID(for: running)) == "report.generate running")

        let unknown = JobID.random()
        let untyped = try await astroctl(["job", "cancel", unknown.description])
        #expect(untyped.status == 1)
        #expect(untyped.error.contains("--type"))
        #expect(try await status(unknown) == nil)
        let badType = try await astroctl(["job", "cancel", unknown.description, "--type", "chart.nonsense"])
        #expect(badType.status == 2)
        let typed = try await astroctl(["job", "cancel", unknown.description, "--type", "chart.calculate"])
        #expect(typed.status == 0, "\(typed.error)")
        #expect(try await status(unknown) == "chart.calculate cancelled")
    }

    /// Cancels racing the worker's claims: each job is run or cancelled, never both, and the
    /// command's answer says which.
    @Test func aCancelRacingTheClaimEitherWinsOrIsRefused() async throws {
        let running = try await RunningWorker.start { [SampleJobHandler(queue: $0)] }
        let ids = (0..<8).map { _ in JobID.random() }
        try await running.pool.withConnection { database in
            for id in ids {
                try database.execute(
                    "INSERT INTO jobs (id, kind, status, attempts) VALUES ($1, $2, 'queued', 0)",
                    [id.uuid, running.queue]
                )
            }
        }
        let answers = try await withThrowingTaskGroup(of: (JobID, Int32).self) { group in
            for id in ids {
                group.addTask {
                    try await running.publish(#"{"jobId":"\#(id)","note":"race"}"#)
                    return (id, -1)
                }
                group.addTask { (id, try await astroctl(["job", "cancel", id.description]).status) }
            }
            var answers: [JobID: Int32] = [:]
            for try await (id, status) in group where status >= 0 { answers[id] = status }
            return answers
        }
        for id in ids {
            try await RuntimeTestEnvironment.eventually(
                "job \(id) succeeds or is cancelled (status)",
                timeout: .seconds(30),
                observe: { try await running.jobRow(id)?.status },
                until: { (status: String?) in status == "succeeded" || status == "cancelled" }
            )
            let status = try await running.jobRow(id)?.status
            let effects = try await running.effects(id).count
            if answers[id] == 0 {
                #expect(status == "cancelled" && effects == 0, "\(id): cancel won but \(status ?? "-"), \(effects)")
            } else {
                #expect(answers[id] == 1, "\(id): cancel answered \(answers[id] ?? -1)")
                #expect(status == "succeeded" && effects == 1, "\(id): cancel lost but \(status ?? "-"), \(effects)")
            }
        }
        try await running.stop()
    }

    /// A quorum queue counts each return of a message and RabbitMQ 4 drops it past the delivery
    /// limit: a dead letter read often is moved (copied without the count), never worn out.
    @Test func aDeadLetterReadOftenIsMovedNotWornOut() async throws {
        let running = try await RunningWorker.start(handlers: {
            [ChartHandler(jobType: JobType(rawValue: $0), cause: Switch())]
        })
        let id = JobID.random()
        var properties = MessageProperties(contentType: "application/json")
        properties.headers = [
            BrokerNames.Header.deliveryCount: .int(15), BrokerNames.Header.reasonCode: "test-reason",
        ]
        try await running.publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.retryExchange,
                routingKey: running.queue + ".dead",
                body: Data("{\"jobId\":\"\(id)\"}".utf8),
                properties: properties
            )
        )
        try await RuntimeTestEnvironment.eventually(
            "one dead letter in \(running.queue).dead (dead letters)",
            timeout: .seconds(30),
            observe: { try await deadCount(running) },
            until: { $0 == 1 }
        )
        let listed = try await astroctl(["dead", "list", "--queue", running.queue])
        #expect(listed.output.contains(id.description) && listed.output.contains("test-reason"), "\(listed.output)")
        let kept = try await running.drain(running.queue + ".dead", count: 1, timeout: .seconds(5))
        #expect(kept.count == 1)
        #expect(kept.first?.properties.headers[BrokerNames.Header.deliveryCount] == nil)
        #expect(kept.first?.properties.headers[BrokerNames.Header.reasonCode] == "test-reason")
        #expect(kept.first.map { DeadLetterBody.jobID($0.body) } == id.description)
        try await running.stop()
    }
}

/// The `jobId` of a JSON body, for checks.
enum DeadLetterBody {
    static func jobID(_ body: Data) -> String? {
        (try? JSONDecoder().decode(JSONValue.self, from: body))?["jobId"]?.stringValue
    }
}
