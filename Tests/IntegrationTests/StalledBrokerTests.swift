import AMQP
import Foundation
import Synchronization
import Testing

/// A broker that stops reading the publisher's socket (a resource alarm before its
/// connection.blocked arrives, or a network path gone silent) must not hold the publisher's
/// thread inside a write: a publish larger than the socket can take times out by its own
/// deadline, and closing the publisher does not wait for the broker.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct StalledBrokerTests {
    @Test func aPublishIntoASilentSocketTimesOutInsteadOfHanging() async throws {
        let url = try AMQPTestEnvironment.variable("AMQP_URL")
        let upstream = try AMQPConfiguration(url: url).port
        let proxy = try ChaosProxy(upstreamPort: upstream)
        defer { proxy.stop() }
        var configuration = try AMQPConfiguration(url: ChaosTests.through(proxy, url))
        // No heartbeat: the silence must be survived by the publish deadline alone.
        configuration.heartbeat = .zero
        let publisher = AMQPPublisher(configuration: configuration, logger: amqpTestLogger("stalled"))
        let queue = amqpUniqueName("stalled")
        try await publisher.connect()
        try await publisher.declare(
            Topology(queues: [QueueSpec(name: queue, durable: false, arguments: ["x-expires": .int(60_000)])])
        )
        try await publisher.publish(OutgoingMessage(exchange: "", routingKey: queue, body: Data("before".utf8)))

        proxy.cut()
        // 40 MB: far more than any socket buffer holds.
        let body = Data(repeating: 0x61, count: 200_000)
        let batch = (0..<200).map { _ in OutgoingMessage(exchange: "", routingKey: queue, body: body) }
        let started = ContinuousClock.now
        let outcome = Mutex<String?>(nil)
        let publishing = Task {
            do {
                try await publisher.publish(batch, timeout: .seconds(3))
                outcome.withLock { $0 = "confirmed" }
            } catch let error as AMQPBatchError {
                let kinds = Set(error.failures.values.map { "\($0.kind)" })
                outcome.withLock { $0 = kinds.sorted().joined(separator: ",") }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
        }
        // Bounded either way: past 15 s the path is healed, which ends a write stuck in the socket.
        while outcome.withLock({ $0 }) == nil, ContinuousClock.now - started < .seconds(15) {
            try await Task.sleep(for: .milliseconds(100))
        }
        let waited = ContinuousClock.now - started
        proxy.heal()
        await publishing.value
        #expect(outcome.withLock { $0 } == "timeout", "outcome \(outcome.withLock { $0 } ?? "none")")
        #expect(waited < .seconds(8), "the publish returned after \(waited)")
        let closing = ContinuousClock.now
        await publisher.close()
        #expect(ContinuousClock.now - closing < .seconds(8))
    }
}
