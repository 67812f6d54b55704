import AMQP
import AstroDomain
import Foundation
import Postgres
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(Glibc)
import Glibc
#endif

/// A real worker process receiving SIGTERM while it has jobs in flight.
@Suite(.timeLimit(.minutes(2)))
struct GracefulShutdownTests {
    @Test func sigtermDrainsInFlightJobsThenExits() async throws {
        let database = try await RuntimeTestEnvironment.database()
        let amqpURL = try RuntimeTestEnvironment.variable("AMQP_URL")
        let queue = "rt.sigterm." + UUID().uuidString.lowercased().prefix(8)
        let databaseURL =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"

        let process = try await ChildProcess.product(
            "sample-worker",
            environment: [
                "AMQP_URL": amqpURL, "DATABASE_URL": databaseURL, "SAMPLE_QUEUE": String(queue), "HTTP_PORT": "0",
                "HTTP_HOST": "127.0.0.1", "PREFETCH": "8", "SHUTDOWN_DRAIN_SECONDS": "20", "LOG_LEVEL": "info",
                "MIGRATE_ON_START": "false",
            ],
            label: "sigterm-sample-worker"
        )
        defer { process.stopWaiting() }

        let publisher = AMQPPublisher(
            configuration: try RuntimeTestEnvironment.amqpConfiguration(),
            logger: RuntimeTestEnvironment.logger
        )
        try await publisher.connect()
        try await ChildProcess.eventually("the sample-worker consumes \(queue)", on: [process]) {
            ((try? await publisher.queueState(String(queue)))?.consumerCount ?? 0) > 0
        }

        // Five slow jobs, all delivered and in flight (none left ready in the queue).
        let ids = (0..<5).map { _ in JobID.random() }
        for id in ids {
            try await publisher.publish(
                OutgoingMessage(
                    exchange: BrokerNames.jobsExchange,
                    routingKey: String(queue),
                    body: Data(#"{"jobId":"\#(id)","note":"drain me","sleepMs":1500}"#.utf8)
                )
            )
        }
        try await RuntimeTestEnvironment.eventually("all five delivered") {
            (try await publisher.queueState(String(queue))).messageCount == 0
        }
        try await Task.sleep(for: .milliseconds(200))
        let signalled = ContinuousClock.now
        process.send(SIGTERM)

        let code = try await process.waitForExit(timeout: .seconds(60))
        let shutdown = ContinuousClock.now - signalled
        #expect(code == 0, "\(process.tail())")
        #expect(shutdown < .seconds(20), "the drain took \(shutdown)")

        let pool = PostgresPool(
            configuration: database,
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        let statuses = try await pool.withConnection { database in
            try database.query(
                "SELECT status FROM jobs WHERE id = ANY($1::uuid[])",
                ["{" + ids.map(\.description).joined(separator: ",") + "}"]
            ).map { try $0.decode(String.self, "status") }
        }
        await pool.close()
        #expect(statuses == Array(repeating: "succeeded", count: 5), "\(process.tail())")
        // Everything was acknowledged: nothing waits for redelivery.
        let state = try await publisher.queueState(String(queue))
        #expect(state.messageCount == 0)
        #expect(state.consumerCount == 0)
        try? await publisher.deleteQueue(String(queue))
        try? await publisher.deleteQueue(String(queue) + ".dead")
        await publisher.close()
        try? FileManager.default.removeItem(at: process.log)
    }
}
