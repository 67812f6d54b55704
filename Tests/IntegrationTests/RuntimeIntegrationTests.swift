import AMQP
import AstroDomain
import Foundation
import Postgres
import SampleJobs
import Schema
import Synchronization
import TestProcesses
import Testing
import TraceContext
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The worker runtime end to end, on the real broker and database.
@Suite(.timeLimit(.minutes(2)))
struct RuntimeIntegrationTests {
    @Test func jobSucceedsCommitsOnceAndPublishesItsEvent() async throws {
        let running = try await RunningWorker.start { [SampleJobHandler(queue: $0)] }
        let events = try await running.eventQueue(routingKey: "sample.done")
        let id = JobID.random()
        try await running.publish(#"{"jobId":"\#(id)","note":"Robert'); DROP TABLE users;--"}"#)
        try await running.waitForStatus(id, "succeeded")
        #expect(try await running.effects(id).map(\.note) == ["Robert'); DROP TABLE users;--"])
        // The queue also gets the sample.done events of this suite's other tests, which run at the
        // same time: this job's event is the one with its jobId.
        var found: Delivery?
        try await RuntimeTestEnvironment.eventually("the sample.done event of job \(id)", timeout: .seconds(30)) {
            let delivered = try await running.drain(events, count: 1, timeout: .seconds(2))
            found =
                found
                ?? delivered.first {
                    (try? JSONSerialization.jsonObject(with: $0.body) as? [String: Any])?["jobId"] as? String
                        == id.description
                }
            return found != nil
        }
        let event = try #require(found)
        let object = try #require(try JSONSerialization.jsonObject(with: event.body) as? [String: Any])
        #expect(object["jobId"] as? String == id.description)
        #expect(object["type"] as? String == "sample.done")
        #expect(event.properties.correlationID == id.description)
        // Published untraced, the job started a trace of its own (without a tracer bootstrapped,
        // as here, too), and its event carries it.
        if case .string(let traceparent)? = event.properties.headers["traceparent"] {
            #expect(TraceContext.parse(traceparent: traceparent) != nil, "\(traceparent)")
        } else {
            Issue.record("the event has no traceparent: \(event.properties.headers)")
        }
        let state = try await running.publisher.queueState(running.queue)
        #expect(state.messageCount == 0)
        try await running.stop()
    }

    @Test func sameJobIDTwiceHasOneEffect() async throws {
        let running = try await RunningWorker.start { [SampleJobHandler(queue: $0)] }
        let id = JobID.random()
        // Published together, the two copies may be processed concurrently; the jobs row lock
        // makes the second wait and then see the first's commit.
        try await running.publish(#"{"jobId":"\#(id)","note":"first","sleepMs":100}"#)
        try await running.publish(#"{"jobId":"\#(id)","note":"second","sleepMs":100}"#)
        try await running.waitForStatus(id, "succeeded")
        try await RuntimeTestEnvironment.eventually("both copies acknowledged") {
            let state = try await running.publisher.queueState(running.queue)
            return state.messageCount == 0
                && running.worker.metrics.render().contains("outcome=\"duplicate\"} 1")
        }
        #expect(try await running.effects(id).count == 1)
        // A later redelivery of the finished job is acknowledged without running again.
        try await running.publish(#"{"jobId":"\#(id)","note":"third"}"#)
        try await RuntimeTestEnvironment.eventually("the third copy acknowledged as a duplicate") {
            running.worker.metrics.render().contains("outcome=\"duplicate\"} 2")
        }
        #expect(try await running.effects(id).count == 1)
        try await running.stop()
    }

    @Test func poisonMessagesAreDeadLetteredAndTheWorkerKeepsGoing() async throws {
        let running = try await RunningWorker.start { [SampleJobHandler(queue: $0)] }
        let failed = try await running.eventQueue(routingKey: running.queue + ".failed")
        try await running.publish("this is not JSON")
        try await running.publish(#"{"note":"no job id"}"#)
        let rejected = JobID.random()
        try await running.publish(#"{"jobId":"\#(rejected)","note":"x","reject":"invalid-birth-data"}"#)
        let missingField = JobID.random()
        try await running.publish(#"{"jobId":"\#(missingField)"}"#)
        let good = JobID.random()
        try await running.publish(#"{"jobId":"\#(good)","note":"after the poison"}"#)

        try await running.waitForStatus(good, "succeeded")
        try await running.waitForStatus(rejected, "dead")
        try await running.waitForStatus(missingField, "dead")
        #expect(try await running.jobRow(rejected)?.errorCode == "invalid-birth-data")
        #expect(try await running.jobRow(missingField)?.errorCode == "invalid-payload")
        #expect(try await running.effects(rejected).isEmpty)

        let dead = try await running.drain(running.queue + ".dead", count: 4)
        let reasons = Set(dead.compactMap { $0.properties.headers[BrokerNames.Header.reasonCode] })
        #expect(
            reasons == [
                .string("invalid-json"), .string("missing-job-id"), .string("invalid-birth-data"),
                .string("invalid-payload"),
            ]
        )
        #expect(dead.allSatisfy { $0.properties.headers[BrokerNames.Header.reasonMessage] != nil })
        #expect(dead.contains { String(decoding: $0.body, as: UTF8.self) == "this is not JSON" })

        // A failed event for each rejection whose jobId could be read.
        let events = try await running.drain(failed, count: 2)
        let codes = Set(
            events.compactMap { delivery -> String? in
                let object = try? JSONSerialization.jsonObject(with: delivery.body) as? [String: Any]
                return (object?["error"] as? [String: Any])?["code"] as? String
            }
        )
        #expect(codes == ["invalid-birth-data", "invalid-payload"])
        try await running.stop()
    }

    @Test func transientFailuresAreRetriedWithBackoffThenSucceed() async throws {
        let running = try await RunningWorker.start(handlers: { [SampleJobHandler(queue: $0)] }, maxAttempts: 4)
        let id = JobID.random()
        let started = ContinuousClock.now
        try await running.publish(#"{"jobId":"\#(id)","note":"flaky","failUntilAttempt":2}"#)
        try await running.waitForStatus(id, "succeeded")
        let elapsed = ContinuousClock.now - started
        #expect(try await running.effects(id).map(\.attempt) == [3])
        #expect(try await running.jobRow(id)?.attempts == 3)
        // Two waits through the delay queues: 200 ms then 400 ms, each less at most 20 % jitter.
        #expect(elapsed >= .milliseconds(480))
        #expect(running.worker.metrics.render().contains("astro_job_retries_total{queue=\"\(running.queue)\"} 2"))
        try await running.stop()
    }

    @Test func exhaustedRetriesEndInTheDeadLetterQueue() async throws {
        let running = try await RunningWorker.start(handlers: { [SampleJobHandler(queue: $0)] }, maxAttempts: 3)
        let id = JobID.random()
        try await running.publish(#"{"jobId":"\#(id)","note":"never","failUntilAttempt":99}"#)
        try await running.waitForStatus(id, "dead")
        let row = try #require(await running.jobRow(id))
        #expect(row.errorCode == "retries-exhausted")
        #expect(row.attempts == 3)
        let dead = try await running.drain(running.queue + ".dead", count: 1)
        #expect(
            dead.first?.properties.headers[BrokerNames.Header.reasonCode] == AMQPFieldValue.string("retries-exhausted")
        )
        #expect(try await running.effects(id).isEmpty)
        try await running.stop()
    }

    @Test func healthEndpointsAnswer() async throws {
        let running = try await RunningWorker.start { [SampleJobHandler(queue: $0)] }
        let port = try #require(running.worker.boundHealthPort)
        try await RuntimeTestEnvironment.eventually("the worker answers /readyz 200", timeout: .seconds(30)) {
            let (_, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/readyz")!)
            return (response as? HTTPURLResponse)?.statusCode == 200
        }
        let id = JobID.random()
        try await running.publish(#"{"jobId":"\#(id)","note":"counted"}"#)
        try await running.waitForStatus(id, "succeeded")
        // The counter moves just after the commit the status shows; poll the endpoint briefly.
        try await RuntimeTestEnvironment.eventually("the job counted in /metrics", timeout: .seconds(5)) {
            let (metrics, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
            let text = String(decoding: metrics, as: UTF8.self)
            return text.contains("astro_jobs_total{queue=\"\(running.queue)\",outcome=\"succeeded\"} 1")
                && text.contains("# TYPE astro_job_duration_seconds histogram")
        }
        let (health, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/healthz")!)
        #expect(String(decoding: health, as: UTF8.self) == "ok\n")
        try await running.stop()
    }
}

/// Schema migrations run by real processes.
@Suite(.timeLimit(.minutes(2)))
struct MigrationProcessTests {
    @Test func twoProcessesMigratingAtOnceApplyEachMigrationOnce() async throws {
        let database = try await RuntimeTestEnvironment.freshDatabase()
        let url =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        let astroctl = ProcessRunner.productPath("astroctl")
        async let first = ProcessRunner.run(astroctl, ["migrate", "--database-only", "--database-url", url])
        async let second = ProcessRunner.run(astroctl, ["migrate", "--database-only", "--database-url", url])
        let results = try await [first, second]
        for result in results { #expect(result.status == 0, "astroctl migrate failed: \(result.error)") }
        // Exactly one of them applied the migrations; the other found the schema up to date.
        let outputs = results.map(\.output)
        #expect(outputs.filter { $0.contains("applied 1 schema_v1") }.count == 1)
        #expect(outputs.filter { $0.contains("schema up to date") }.count == 1)

        let pool = PostgresPool(
            configuration: database,
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let (versions, tables) = try await pool.withConnection { database in
            let versions = try database.query("SELECT version FROM schema_migrations ORDER BY version").map {
                try $0.decode(Int.self, "version")
            }
            let tables = try database.query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1"
            ).map { try $0.decode(String.self, "table_name") }
            return (versions, tables)
        }
        await pool.close()
        #expect(versions == (try AstroSchema.migrations()).map(\.version))
        for table in [
            "birth_charts", "jobs", "outbox", "purchase_credits", "purchase_records", "report_purchases",
            "user_profiles", "users",
        ] {
            #expect(tables.contains(table))
        }
        // And again: nothing to do.
        let again = try await ProcessRunner.run(astroctl, ["migrate", "--database-only", "--database-url", url])
        #expect(again.status == 0)
        #expect(again.output.contains("schema up to date"))
    }
}

/// Group commit: many jobs share a transaction, and one bad job does not fail the others.
@Suite(.timeLimit(.minutes(2)))
struct GroupCommitTests {
    @Test func aRejectionInsideASharedTransactionFailsOnlyItsJob() async throws {
        let running = try await RunningWorker.start(handlers: { [SampleJobHandler(queue: $0)] }, prefetch: 64)
        let ids = (0..<60).map { _ in JobID.random() }
        let bad = ids[17]
        var messages: [OutgoingMessage] = []
        for id in ids {
            let extra = id == bad ? #","rejectInCommit":"bad-row""# : ""
            messages.append(
                OutgoingMessage(
                    exchange: BrokerNames.jobsExchange,
                    routingKey: running.queue,
                    body: Data(#"{"jobId":"\#(id)","note":"batch"\#(extra)}"#.utf8)
                )
            )
        }
        try await running.publisher.publish(messages)
        for id in ids where id != bad { try await running.waitForStatus(id, "succeeded") }
        try await running.waitForStatus(bad, "dead")
        #expect(try await running.jobRow(bad)?.errorCode == "bad-row")
        #expect(try await running.effects(bad).isEmpty)
        for id in ids where id != bad { #expect(try await running.effects(id).count == 1) }
        // Under this burst, jobs shared transactions: fewer transactions than jobs.
        let text = running.worker.metrics.render()
        let batches = Self.value(of: "astro_commit_batches_total", in: text)
        let batchedJobs = Self.value(of: "astro_commit_batch_jobs_total", in: text)
        #expect(batches > 0)
        #expect(batchedJobs > batches)
        try await running.stop()
    }

    /// A sample handler that writes its jobs in batches and keeps the sizes it was given;
    /// `dropLast` makes it break the one-outcome-per-job promise.
    struct BatchingHandler: JobHandler {
        let inner: SampleJobHandler
        let dropLast: Bool
        let sizes: BatchSizes
        var jobType: JobType { inner.jobType }
        func prepare(_ job: JobEnvelope) async throws -> SampleJobHandler.Payload { try await inner.prepare(job) }
        func commit(
            _ prepared: SampleJobHandler.Payload,
            job: JobEnvelope,
            database: PostgresConnection
        ) throws -> JobOutcome {
            try inner.commit(prepared, job: job, database: database)
        }
        func commit(
            batch: [(prepared: SampleJobHandler.Payload, job: JobEnvelope)],
            database: PostgresConnection
        ) throws -> [JobOutcome] {
            sizes.all.withLock { $0.append(batch.count) }
            let outcomes = try batch.map { try inner.commit($0.prepared, job: $0.job, database: database) }
            return dropLast && outcomes.count > 1 ? Array(outcomes.dropLast()) : outcomes
        }
    }

    final class BatchSizes: Sendable {
        let all = Mutex<[Int]>([])
    }

    /// Jobs of a shared transaction reach their handler's batch commit together; a batch that
    /// returns too few outcomes is rolled back and its jobs committed one by one, each once.
    @Test(arguments: [false, true]) func handlersWriteSharedTransactionsInBatches(dropLast: Bool) async throws {
        let recorded = BatchSizes()
        let running = try await RunningWorker.start(
            handlers: { [BatchingHandler(inner: SampleJobHandler(queue: $0), dropLast: dropLast, sizes: recorded)] },
            prefetch: 64
        )
        let ids = (0..<60).map { _ in JobID.random() }
        try await running.publisher.publish(
            ids.map { id in
                OutgoingMessage(
                    exchange: BrokerNames.jobsExchange,
                    routingKey: running.queue,
                    body: Data(#"{"jobId":"\#(id)","note":"batch"}"#.utf8)
                )
            }
        )
        for id in ids { try await running.waitForStatus(id, "succeeded") }
        for id in ids { #expect(try await running.effects(id).count == 1) }
        let sizes = recorded.all.withLock { $0 }
        #expect(sizes.contains { $0 > 1 })
        #expect(sizes.allSatisfy { $0 <= 64 })
        try await running.stop()
    }

    static func value(of metric: String, in text: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(metric + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }
}
