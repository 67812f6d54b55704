import AMQP
import Foundation
import Testing

/// The AMQP wrapper against a real RabbitMQ (started by `scripts/stack.sh run`). Serialized: one test
/// restarts the broker.
@Suite("AMQP against RabbitMQ", .serialized, .timeLimit(.minutes(2)))
struct AMQPIntegrationTests {
    // MARK: - Publishing and consuming

    @Test("publish with confirms, consume, properties survive the round trip")
    func roundTrip() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("roundtrip")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.connect()
        #expect(publisher.isConnected)
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))

        let timestamp = Date(timeIntervalSince1970: 1_700_000_000)
        let properties = MessageProperties(
            contentType: "application/json",
            contentEncoding: "identity",
            headers: [
                "x-chart": "natal", "x-attempt": 2, "x-flags": .array([true, 1.5]), "x-nested": .table(["k": "v"]),
            ],
            persistent: true,
            priority: 3,
            correlationID: "corr-1",
            replyTo: "replies",
            expiration: "60000",
            messageID: "msg-1",
            timestamp: timestamp,
            type: "chart.requested",
            appID: "astro-tests"
        )
        let body = Data(#"{"hello":"world"}"#.utf8)
        try await publisher.publish(OutgoingMessage(routingKey: queue, body: body, properties: properties))

        let consumer = amqpConsumer(config, queue: queue, prefetch: 10, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        #expect(consumer.isConnected)
        let deliveries = try await collector.wait(count: 1)
        let delivery = try #require(deliveries.first)
        #expect(delivery.body == body)
        #expect(delivery.queue == queue)
        #expect(delivery.exchange == "")
        #expect(delivery.routingKey == queue)
        #expect(!delivery.redelivered)
        #expect(delivery.generation == 1)
        #expect(delivery.properties == properties)
        #expect(delivery.properties.persistent)
        #expect(delivery.properties.messageID == "msg-1")
        #expect(delivery.properties.headers["x-attempt"] == 2)
        try await consumer.ack(delivery)
        await consumer.close()
        #expect(try await publisher.queueState(queue).messageCount == 0)

        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("a batch of 500 is confirmed together and consumed completely")
    func batchOf500() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("batch")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        let messages = (0..<500).map { amqpTextMessage("m\($0)", to: queue) }
        try await publisher.publish(messages)
        #expect(try await publisher.queueState(queue).messageCount == 500)

        let consumer = amqpConsumer(config, queue: queue, prefetch: 100, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        var ids = Set<String>()
        while ids.count < 500 {
            let batch = collector.drain()
            for delivery in batch {
                ids.insert(delivery.properties.messageID ?? "")
                try await consumer.ack(delivery)
            }
            if batch.isEmpty {
                // Nothing more for 10 s: the rest is not coming (the set is checked below).
                guard (try? await collector.wait(count: 1, timeout: .seconds(10))) != nil else { break }
            }
        }
        #expect(ids == Set((0..<500).map { "m\($0)" }))
        await consumer.close()
        #expect(try await publisher.queueState(queue).messageCount == 0)
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("a mandatory message no queue is bound for throws unroutable; in a batch only its index fails")
    func unroutable() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("routable")
        let missing = amqpUniqueName("missing")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))

        await #expect {
            try await publisher.publish(amqpTextMessage("lost", to: missing))
        } throws: { error in
            (error as? AMQPError)?.kind == .unroutable
        }

        let batch = [
            amqpTextMessage("a", to: queue), amqpTextMessage("b", to: missing), amqpTextMessage("c", to: queue),
            amqpTextMessage("d", to: missing, id: "d"),
        ]
        do {
            try await publisher.publish(batch)
            Issue.record("the batch should have failed")
        } catch let error as AMQPBatchError {
            #expect(Set(error.failures.keys) == [1, 3])
            #expect(error.failures.values.allSatisfy { $0.kind == .unroutable })
        }
        #expect(try await publisher.queueState(queue).messageCount == 2)

        // A non-mandatory message is dropped silently and confirmed.
        var dropped = amqpTextMessage("dropped", to: missing)
        dropped.mandatory = false
        try await publisher.publish(dropped)

        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("publishing to a missing exchange throws notFound and the publisher recovers")
    func missingExchange() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("after-404")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        await #expect {
            try await publisher.publish(
                OutgoingMessage(exchange: amqpUniqueName("no-such-exchange"), routingKey: "x", body: Data("x".utf8))
            )
        } throws: { error in
            (error as? AMQPError)?.kind == .notFound && (error as? AMQPError)?.replyCode == 404
        }
        try await publisher.publish(amqpTextMessage("ok", to: queue))
        #expect(try await publisher.queueState(queue).messageCount == 1)
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("declaring twice is fine; a conflicting declaration throws preconditionFailed and publishing goes on")
    func topologyDeclarations() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let exchange = amqpUniqueName("exchange")
        let queue = amqpUniqueName("declared")
        let topology = Topology(
            exchanges: [ExchangeSpec(name: exchange, kind: .topic)],
            queues: [QueueSpec(name: queue, messageTTL: .seconds(60), queueType: .classic)],
            bindings: [BindingSpec(queue: queue, exchange: exchange, routingKey: "chart.#")]
        )
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(topology)
        try await publisher.declare(topology)

        await #expect {
            try await publisher.declare(Topology(queues: [QueueSpec(name: queue, durable: false)]))
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.kind == .preconditionFailed && error.replyCode == 406
                && error.message.contains("PRECONDITION_FAILED")
        }

        try await publisher.publish(
            OutgoingMessage(exchange: exchange, routingKey: "chart.natal", body: Data("routed".utf8))
        )
        #expect(try await publisher.queueState(queue).messageCount == 1)
        try await publisher.deleteQueue(queue)
        try await publisher.deleteExchange(exchange)
        await publisher.close()
    }

    @Test("queueState reports depth and consumers, and notFound for a missing queue")
    func queueState() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("state")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish((0..<3).map { amqpTextMessage("s\($0)", to: queue) })
        #expect(try await publisher.queueState(queue) == .init(messageCount: 3, consumerCount: 0))

        await #expect {
            _ = try await publisher.queueState(amqpUniqueName("absent"))
        } throws: { error in
            (error as? AMQPError)?.kind == .notFound
        }
        // The channel was reopened: the publisher keeps working.
        try await publisher.publish(amqpTextMessage("s3", to: queue))

        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        try await collector.wait(count: 1)
        let state = try await publisher.queueState(queue)
        #expect(state.consumerCount == 1)
        #expect(state.messageCount == 3)  // one of four is delivered and unacked
        #expect(try await publisher.purgeQueue(queue) == 3)
        await consumer.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    // MARK: - Acknowledgements

    @Test("prefetch is respected: 5 deliveries without acks, no more")
    func prefetch() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("prefetch")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish((0..<20).map { amqpTextMessage("p\($0)", to: queue) })

        let consumer = amqpConsumer(config, queue: queue, prefetch: 5, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        try await collector.wait(count: 5)
        try await Task.sleep(for: .milliseconds(500))
        let first = collector.all
        #expect(first.count == 5)
        // One ack frees exactly one slot.
        try await consumer.ack(try #require(first.first))
        try await collector.wait(count: 6)
        try await Task.sleep(for: .milliseconds(300))
        #expect(collector.all.count == 6)
        await consumer.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("multiple ack settles every earlier delivery; acking a covered one again is stale")
    func multipleAck() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("multi")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish((0..<10).map { amqpTextMessage("x\($0)", to: queue) })

        let consumer = amqpConsumer(config, queue: queue, prefetch: 20, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let deliveries = try await collector.wait(count: 10)
        #expect(deliveries.count == 10)
        try await consumer.ack(deliveries[9], multiple: true)
        await #expect {
            try await consumer.ack(deliveries[4])
        } throws: { error in
            (error as? AMQPError)?.kind == .staleDelivery
        }
        await consumer.close()
        // Had the earlier nine not been acked, closing would have requeued them.
        #expect(try await publisher.queueState(queue).messageCount == 0)
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("nack with requeue redelivers with redelivered set")
    func nackRequeue() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("nack")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish(amqpTextMessage("again", to: queue))

        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let first = try #require(try await collector.wait(count: 1).first)
        #expect(!first.redelivered)
        try await consumer.nack(first, requeue: true)
        let second = try #require(try await collector.wait(count: 2).dropFirst().first)
        #expect(second.redelivered)
        #expect(second.body == first.body)
        #expect(second.deliveryTag != first.deliveryTag)
        try await consumer.ack(second)
        await consumer.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("reject without requeue dead-letters the message")
    func rejectToDeadLetter() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let dlx = amqpUniqueName("dlx")
        let dead = amqpUniqueName("dead")
        let work = amqpUniqueName("work")
        let topology = Topology(
            exchanges: [ExchangeSpec(name: dlx, kind: .fanout)],
            queues: [QueueSpec(name: dead), QueueSpec(name: work, deadLetterExchange: dlx)],
            bindings: [BindingSpec(queue: dead, exchange: dlx, routingKey: "")]
        )
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(topology)
        try await publisher.publish(amqpTextMessage("poison", to: work))

        let consumer = AMQPConsumer(
            configuration: config,
            topology: topology,
            queues: [work],
            prefetch: 1,
            logger: amqpTestLogger("consumer")
        )
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let delivery = try #require(try await collector.wait(count: 1).first)
        try await consumer.reject(delivery, requeue: false)
        try await RuntimeTestEnvironment.eventually(
            "the rejected message is dead-lettered into \(dead) (messages there)",
            timeout: .seconds(30),
            observe: { try await publisher.queueState(dead).messageCount },
            until: { $0 == 1 }
        )
        #expect(try await publisher.queueState(work).messageCount == 0)
        await consumer.close()
        try await publisher.deleteQueue(work)
        try await publisher.deleteQueue(dead)
        try await publisher.deleteExchange(dlx)
        await publisher.close()
    }

    @Test("a message TTL with a dead-letter exchange delays the message (delay queue)")
    func delayQueue() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let exchange = amqpUniqueName("retry")
        let target = amqpUniqueName("target")
        let delay = amqpUniqueName("delay")
        let topology = Topology(
            exchanges: [ExchangeSpec(name: exchange, kind: .direct)],
            queues: [
                QueueSpec(name: target),
                QueueSpec(
                    name: delay,
                    deadLetterExchange: exchange,
                    deadLetterRoutingKey: "due",
                    messageTTL: .milliseconds(400)
                ),
            ],
            bindings: [BindingSpec(queue: target, exchange: exchange, routingKey: "due")]
        )
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(topology)
        let start = ContinuousClock.now
        try await publisher.publish(amqpTextMessage("later", to: delay))
        #expect(try await publisher.queueState(target).messageCount == 0)
        try await RuntimeTestEnvironment.eventually(
            "the message moves from \(delay) to \(target) once its 400 ms TTL passes (messages in \(target))",
            timeout: .seconds(30),
            observe: { try await publisher.queueState(target).messageCount },
            until: { $0 == 1 }
        )
        #expect(ContinuousClock.now - start >= .milliseconds(300))
        #expect(try await publisher.queueState(delay).messageCount == 0)

        let consumer = amqpConsumer(config, queue: target, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let delivery = try #require(try await collector.wait(count: 1).first)
        #expect(delivery.body == Data("later".utf8))
        #expect(delivery.exchange == exchange)
        #expect(delivery.routingKey == "due")
        try await consumer.ack(delivery)
        await consumer.close()
        for queue in [target, delay] { try await publisher.deleteQueue(queue) }
        try await publisher.deleteExchange(exchange)
        await publisher.close()
    }

    @Test("a consumer that closes before acking: the message goes to the next consumer, redelivered")
    func redeliveryAfterClose() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("handover")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish(amqpTextMessage("handover", to: queue))

        let first = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer1")
        let firstCollector = AMQPDeliveryCollector(first)
        try await first.start()
        let unacked = try #require(try await firstCollector.wait(count: 1).first)
        await first.close()
        try await RuntimeTestEnvironment.eventually(
            "the closed consumer's delivery stream finishes",
            timeout: .seconds(30)
        ) {
            firstCollector.isFinished
        }
        await #expect {
            try await first.ack(unacked)
        } throws: { error in
            (error as? AMQPError)?.kind == .closed
        }

        let second = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer2")
        let secondCollector = AMQPDeliveryCollector(second)
        try await second.start()
        let again = try #require(try await secondCollector.wait(count: 1).first)
        #expect(again.redelivered)
        #expect(again.body == unacked.body)
        try await second.ack(again)
        await second.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("a double ack throws staleDelivery and the channel survives")
    func doubleAck() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("double")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish(amqpTextMessage("one", to: queue))

        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let delivery = try #require(try await collector.wait(count: 1).first)
        try await consumer.ack(delivery)
        await #expect {
            try await consumer.ack(delivery)
        } throws: { error in
            (error as? AMQPError)?.kind == .staleDelivery
        }
        await #expect {
            try await consumer.reject(delivery, requeue: false)
        } throws: { error in
            (error as? AMQPError)?.kind == .staleDelivery
        }

        try await publisher.publish(amqpTextMessage("two", to: queue))
        let next = try #require(try await collector.wait(count: 2).dropFirst().first)
        #expect(next.body == Data("two".utf8))
        #expect(next.generation == delivery.generation, "the connection must not have been replaced")
        try await consumer.ack(next)
        #expect(consumer.isConnected)
        await consumer.close()
        #expect(try await publisher.queueState(queue).messageCount == 0)
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    // MARK: - Connections

    @Test("with a 1 s heartbeat an idle connection stays up for 4 s and is usable")
    func heartbeat() async throws {
        let config = try AMQPTestEnvironment.configuration(heartbeat: .seconds(1))
        let queue = amqpUniqueName("heartbeat")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()

        try await Task.sleep(for: .seconds(4))
        #expect(publisher.isConnected)
        #expect(consumer.isConnected)
        try await publisher.publish(amqpTextMessage("still here", to: queue), timeout: .seconds(3))
        let delivery = try #require(try await collector.wait(count: 1, timeout: .seconds(3)).first)
        #expect(delivery.generation == 1, "the consumer must not have reconnected")
        try await consumer.ack(delivery)
        await consumer.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("wrong credentials throw authenticationFailed")
    func wrongPassword() async throws {
        var config = try AMQPTestEnvironment.configuration()
        config.password = "definitely-wrong"
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        await #expect {
            try await publisher.connect()
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.kind == .authenticationFailed && !error.description.contains("definitely-wrong")
        }
        #expect(!publisher.isConnected)
        await publisher.close()
    }

    @Test("TLS: a round trip through amqps:// trusting the test CA")
    func tlsRoundTrip() async throws {
        let config = try AMQPTestEnvironment.tlsConfiguration()
        let queue = amqpUniqueName("tls")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.connect()
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish(amqpTextMessage("secret", to: queue))
        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        let delivery = try #require(try await collector.wait(count: 1).first)
        #expect(delivery.body == Data("secret".utf8))
        try await consumer.ack(delivery)
        await consumer.close()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }

    @Test("TLS: a CA that did not sign the broker's certificate is refused")
    func tlsWrongCA() async throws {
        var config = try AMQPTestEnvironment.tlsConfiguration()
        config.tls?.caCertificatePath = "/etc/ssl/certs/ca-certificates.crt"  // the system bundle
        for candidate in [
            config,
            {
                var c = config
                c.tls?.caCertificatePath = nil
                return c
            }(),
        ] {
            let publisher = AMQPPublisher(configuration: candidate, logger: amqpTestLogger("publisher"))
            await #expect {
                try await publisher.connect()
            } throws: { error in
                guard let error = error as? AMQPError else { return false }
                return error.kind == .tls || error.kind == .connectionFailed
            }
            #expect(!publisher.isConnected)
            await publisher.close()
        }
    }

    @Test("close is clean and later calls throw closed")
    func closeIsFinal() async throws {
        let config = try AMQPTestEnvironment.configuration()
        let queue = amqpUniqueName("close")
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(Topology(queues: [QueueSpec(name: queue)]))
        try await publisher.publish(amqpTextMessage("before", to: queue))
        let consumer = amqpConsumer(config, queue: queue, prefetch: 1, name: "consumer")
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()
        try await collector.wait(count: 1)
        await consumer.stopConsuming()
        try await publisher.publish(amqpTextMessage("after stop", to: queue))
        try await Task.sleep(for: .milliseconds(300))
        #expect(collector.all.count == 1, "no deliveries after stopConsuming")
        try await consumer.ack(try #require(collector.all.first))
        await consumer.close()
        try await RuntimeTestEnvironment.eventually(
            "the closed consumer's delivery stream finishes",
            timeout: .seconds(30)
        ) {
            collector.isFinished
        }
        #expect(!consumer.isConnected)
        await consumer.close()

        await publisher.close()
        #expect(!publisher.isConnected)
        await #expect {
            try await publisher.publish(amqpTextMessage("late", to: queue))
        } throws: { error in
            (error as? AMQPError)?.kind == .closed
        }
        await publisher.close()

        let cleaner = AMQPPublisher(configuration: config, logger: amqpTestLogger("cleaner"))
        #expect(try await cleaner.queueState(queue).messageCount == 1)
        try await cleaner.deleteQueue(queue)
        await cleaner.close()
    }

    // MARK: - Broker restart

    @Test("RabbitMQ restarted mid-stream: reconnect, nothing confirmed is lost, old deliveries are stale")
    func brokerRestart() async throws {
        let config = try AMQPTestEnvironment.configuration(heartbeat: .seconds(2))
        _ = try AMQPTestEnvironment.variable("ASTRO_STACK_DIR")
        let queue = amqpUniqueName("restart")
        let topology = Topology(queues: [QueueSpec(name: queue)])
        let publisher = AMQPPublisher(configuration: config, logger: amqpTestLogger("publisher"))
        try await publisher.declare(topology)
        let consumer = AMQPConsumer(
            configuration: config,
            topology: topology,
            queues: [queue],
            prefetch: 20,
            logger: amqpTestLogger("consumer")
        )
        let eventsSeen = AMQPLocked<[ConnectionEvent]>([])
        let eventsTask = Task { [events = consumer.events] in
            for await event in events { eventsSeen.withLock { $0.append(event) } }
        }
        let collector = AMQPDeliveryCollector(consumer)
        try await consumer.start()

        let confirmed = AMQPLocked<Set<String>>([])
        let failures = AMQPLocked<Int>(0)
        let stop = AMQPLocked<Bool>(false)
        let producer = Task {
            var n = 0
            while !stop.value {
                let id = "r\(n)"
                n += 1
                do {
                    try await publisher.publish(amqpTextMessage(id, to: queue), timeout: .seconds(20))
                    confirmed.withLock { _ = $0.insert(id) }
                } catch {
                    failures.withLock { $0 += 1 }
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }

        // Consume and ack everything, but keep the first delivery unacked to ack it after the restart.
        let consumed = AMQPLocked<Set<String>>([])
        let held = AMQPLocked<Delivery?>(nil)
        let staleAcks = AMQPLocked<Int>(0)
        let consumerTask = Task {
            while !Task.isCancelled {
                let batch = collector.drain()
                for delivery in batch {
                    consumed.withLock { _ = $0.insert(delivery.properties.messageID ?? "") }
                    let keep = held.withLock { current -> Bool in
                        if current == nil {
                            current = delivery
                            return true
                        }
                        return false
                    }
                    if keep { continue }
                    do {
                        try await consumer.ack(delivery)
                    } catch {
                        staleAcks.withLock { $0 += 1 }
                    }
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }

        // A wait that gives up ends the test: the producer and the consumer loop end with it.
        defer {
            stop.withLock { $0 = true }
            consumerTask.cancel()
        }
        try await RuntimeTestEnvironment.eventually(
            "50 publishes are confirmed before the restart (confirmed so far)",
            timeout: .seconds(30),
            observe: { confirmed.withLock { $0.count } },
            until: { $0 >= 50 }
        )
        try await AMQPTestEnvironment.stack("rabbit-restart")
        try await RuntimeTestEnvironment.eventually(
            "publisher and consumer reconnect after the restart (publisher, consumer connected)",
            timeout: .seconds(30),
            observe: { (publisher.isConnected, consumer.isConnected) },
            until: { $0.0 && $0.1 }
        )
        let afterRestart = confirmed.withLock { $0.count }
        try await RuntimeTestEnvironment.eventually(
            "50 more publishes are confirmed after the restart (confirmed so far, \(afterRestart) before)",
            timeout: .seconds(30),
            observe: { confirmed.withLock { $0.count } },
            until: { $0 >= afterRestart + 50 }
        )
        stop.withLock { $0 = true }
        await producer.value

        let heldDelivery = try #require(held.withLock { $0 })
        #expect(heldDelivery.generation == 1)
        await #expect {
            try await consumer.ack(heldDelivery)
        } throws: { error in
            (error as? AMQPError)?.kind == .staleDelivery
        }

        let expected = confirmed.withLock { $0 }
        try await RuntimeTestEnvironment.eventually(
            "every confirmed message is consumed (the first 20 confirmed but not consumed)",
            timeout: .seconds(30),
            observe: { Array(expected.subtracting(consumed.withLock { $0 }).sorted().prefix(20)) },
            until: { $0.isEmpty }
        )
        consumerTask.cancel()
        await consumerTask.value

        let events = eventsSeen.withLock { $0 }
        #expect(events.contains { if case .disconnected = $0 { true } else { false } })
        #expect(events.contains { if case .connected(let generation) = $0 { generation >= 2 } else { false } })

        await consumer.close()
        eventsTask.cancel()
        try await publisher.deleteQueue(queue)
        await publisher.close()
    }
}
