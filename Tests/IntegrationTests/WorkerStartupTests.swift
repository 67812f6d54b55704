import AMQP
import AstroDomain
import Foundation
import TestProcesses
import Testing

/// A worker whose publisher reached the broker but whose consumer's first connection meets an
/// outage (RabbitMQ restarting, a network cut between the two connections) keeps trying and starts
/// consuming once the broker answers, instead of exiting. The chaos suite once caught a replacement
/// billing-worker dying this way in the middle of a broker cut.
@Suite(.timeLimit(.minutes(2)))
struct WorkerStartupTests {
    @Test func aConsumerThatCannotConnectAtFirstRetriesInsteadOfEndingTheWorker() async throws {
        let database = try await RuntimeTestEnvironment.database()
        let amqpURL = try RuntimeTestEnvironment.variable("AMQP_URL")
        let proxy = try ChaosProxy(upstreamPort: try RuntimeTestEnvironment.amqpConfiguration().port)
        defer { proxy.stop() }
        // The first connection is the worker's publisher; the consumer's first three are reset.
        proxy.refuse(3, after: 1)
        let queue = "rt.startup." + UUID().uuidString.lowercased().prefix(8)
        let databaseURL =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"

        let process = try await ChildProcess.product(
            "sample-worker",
            environment: [
                "AMQP_URL": ChaosTests.through(proxy, amqpURL), "DATABASE_URL": databaseURL,
                "SAMPLE_QUEUE": String(queue), "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "info",
                "MIGRATE_ON_START": "false",
            ],
            label: "startup-sample-worker"
        )
        defer { process.stopWaiting() }

        let publisher = AMQPPublisher(
            configuration: try RuntimeTestEnvironment.amqpConfiguration(),
            logger: RuntimeTestEnvironment.logger
        )
        try await publisher.connect()
        defer { Task { await publisher.close() } }
        try await ChildProcess.eventually("the sample-worker consumes \(queue)", on: [process]) {
            ((try? await publisher.queueState(String(queue)))?.consumerCount ?? 0) > 0
                || !process.isRunning
        }
        #expect(process.isRunning, "the worker exited: \(process.tail())")
        #expect(process.output.contains("AMQP consumer could not start; retrying"), "\(process.tail())")

        // And it works: a job sent now is taken and acknowledged.
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: String(queue),
                body: Data(#"{"jobId":"\#(JobID.random())","note":"after the outage"}"#.utf8)
            )
        )
        try await RuntimeTestEnvironment.eventually(
            "the job published after the outage is consumed from \(queue) (messages, consumers)",
            timeout: .seconds(30),
            observe: {
                let state = try await publisher.queueState(String(queue))
                return (state.messageCount, state.consumerCount)
            },
            until: { $0.0 == 0 && $0.1 > 0 }
        )
        await process.stop()
    }
}
