import Foundation
import Testing

@testable import AMQP

@Suite("Field tables, topology, backoff")
struct AMQPValueTests {
    @Test("field tables survive Swift → amqp_table_t → wire → amqp_table_t → Swift")
    func fieldTableRoundTrip() throws {
        let table: AMQPTable = [
            "string": "hello, мир",
            "empty": "",
            "int": 42,
            "negative": .int(-7),
            "big": .int(Int64.max),
            "true": true,
            "false": false,
            "double": 2.5,
            "void": .void,
            "nested": .table(["a": 1, "b": .table(["c": "deep"])]),
            "array": .array([1, "two", .bool(true), .array([]), .table(["k": 3.25])]),
            "emptyTable": .table([:]),
        ]
        let decoded = try FieldTableCodec.wireRoundTrip(table)
        #expect(decoded == table)
    }

    @Test("an empty table round-trips")
    func emptyTable() throws {
        #expect(try FieldTableCodec.wireRoundTrip([:]) == [:])
    }

    @Test("literals build the expected cases")
    func literals() {
        let values: [AMQPFieldValue] = ["s", 1, true, 1.5]
        #expect(values == [.string("s"), .int(1), .bool(true), .double(1.5)])
        #expect(AMQPFieldValue.string("x").stringValue == "x")
        #expect(AMQPFieldValue.int(3).intValue == 3)
        #expect(AMQPFieldValue.bool(true).intValue == nil)
    }

    @Test("QueueSpec convenience arguments")
    func queueSpecArguments() {
        let spec = QueueSpec(
            name: "charts.delay",
            deadLetterExchange: "charts",
            deadLetterRoutingKey: "charts.retry",
            messageTTL: .seconds(30),
            queueType: .quorum,
            arguments: ["x-max-length": 1000, "x-message-ttl": 5]
        )
        #expect(spec.durable)
        #expect(!spec.exclusive)
        #expect(!spec.autoDelete)
        #expect(spec.arguments["x-dead-letter-exchange"] == "charts")
        #expect(spec.arguments["x-dead-letter-routing-key"] == "charts.retry")
        #expect(spec.arguments["x-message-ttl"] == .int(30_000))
        #expect(spec.arguments["x-queue-type"] == "quorum")
        #expect(spec.arguments["x-max-length"] == 1000)
        #expect(QueueSpec(name: "plain").arguments.isEmpty)
        #expect(QueueSpec(name: "ms", messageTTL: .milliseconds(1500)).arguments["x-message-ttl"] == 1500)
    }

    @Test("Topology.merging replaces by name and adds bindings once")
    func topologyMerging() {
        let a = Topology(
            exchanges: [ExchangeSpec(name: "e", kind: .direct)],
            queues: [QueueSpec(name: "q1")],
            bindings: [BindingSpec(queue: "q1", exchange: "e", routingKey: "k")]
        )
        let b = Topology(
            exchanges: [ExchangeSpec(name: "e", kind: .topic), ExchangeSpec(name: "f", kind: .fanout)],
            queues: [QueueSpec(name: "q2")],
            bindings: [
                BindingSpec(queue: "q1", exchange: "e", routingKey: "k"),
                BindingSpec(queue: "q2", exchange: "f", routingKey: ""),
            ]
        )
        let merged = a.merging(b)
        #expect(merged.exchanges.map(\.name) == ["e", "f"])
        #expect(merged.exchanges[0].kind == .topic)
        #expect(merged.queues.map(\.name) == ["q1", "q2"])
        #expect(merged.bindings.count == 2)
        #expect(Topology.empty.merging(.empty) == .empty)
        #expect(merged.removingQueue("q1").bindings == [BindingSpec(queue: "q2", exchange: "f", routingKey: "")])
        #expect(merged.removingExchange("f").exchanges.map(\.name) == ["e"])
    }

    @Test("backoff grows exponentially and is capped")
    func backoffBase() {
        let backoff = AMQPConfiguration.Reconnect(
            initialDelay: .milliseconds(100),
            maxDelay: .seconds(2),
            multiplier: 2
        )
        .backoff
        let bases = (1...8).map { backoff.ceiling(afterAttempt: $0) }
        #expect(
            bases == [
                .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800),
                .milliseconds(1600), .seconds(2), .seconds(2), .seconds(2),
            ]
        )
        #expect(backoff.ceiling(afterAttempt: 10_000) == .seconds(2))
        #expect(backoff.allowsAttempt(after: 1_000_000))
        // A zero initial delay still waits a millisecond.
        #expect(AMQPConfiguration.Reconnect(initialDelay: .zero).backoff.ceiling(afterAttempt: 1) == .milliseconds(1))
    }

    @Test("jitter stays within [base/2, base]")
    func backoffJitter() {
        let backoff = AMQPConfiguration.Reconnect(initialDelay: .milliseconds(50), maxDelay: .seconds(1), multiplier: 3)
            .backoff
        #expect(backoff.delay(afterAttempt: 1, random: 0) == .milliseconds(25))
        #expect(backoff.delay(afterAttempt: 1, random: 1) == .milliseconds(50))
        var seen = Set<Duration>()
        for attempt in 1...20 {
            let base = backoff.ceiling(afterAttempt: attempt)
            for _ in 0..<50 {
                let delay = backoff.delay(afterAttempt: attempt, random: Double.random(in: 0...1))
                #expect(delay >= base / 2 && delay <= base)
                #expect(delay <= .seconds(1))
                seen.insert(delay)
            }
        }
        #expect(seen.count > 20, "jitter should spread the delays")
    }

    @Test("broker error texts name the failed exchange")
    func exchangeNamedInText() {
        #expect(RefusedTarget.exchangeNamed(in: "NOT_FOUND - no exchange 'astro.x' in vhost '/'") == "astro.x")
        #expect(RefusedTarget.exchangeNamed(in: "NOT_FOUND - no queue 'q' in vhost '/'") == nil)
        let topic = RefusedTarget(
            closeText:
                "ACCESS_REFUSED - access to topic 'billing.refund-credit' in exchange 'astro.jobs' in vhost '/' refused"
        )
        #expect(topic?.exchange == "astro.jobs" && topic?.routingKey == "billing.refund-credit")
        let byDefault = RefusedTarget(
            closeText: "ACCESS_REFUSED - access to exchange 'amq.default' in vhost '/' refused for user 'astro-client'"
        )
        #expect(byDefault?.exchange == "" && byDefault?.routingKey == nil)
    }

    @Test("batch errors describe their failures")
    func batchErrorDescription() {
        let error = AMQPBatchError(failures: [2: AMQPError(kind: .unroutable, message: "no route")])
        #expect(error.description.contains("#2"))
        #expect(error.description.contains("unroutable"))
    }
}
