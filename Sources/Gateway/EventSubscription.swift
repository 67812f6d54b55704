import AMQP
import AstroDomain
import Foundation
import Logging
import ServiceLifecycle
import UUIDText
import WorkerRuntime

/// The replica's own subscription to `astro.events`: one exclusive, auto-deleted queue
/// (`gateway.events.<random>`, which the `gateway` broker user may declare) bound to every event,
/// so every replica sees every event and fans it out to its own streams and long polls.
///
/// The queue lives and dies with the connection: after a lost connection the consumer declares a
/// new one, and the events published in between are gone for this replica — the hub then sends
/// every open stream a `reset` and forgets what it kept for resuming. The queue is capped
/// (`maxQueuedEvents`, oldest dropped) so that a stalled replica cannot grow it on the broker.
struct EventSubscription: Service {
    let hub: EventHub
    let configuration: AMQPConfiguration
    let logger: Logger

    /// The most events waiting in the replica's queue on the broker; older ones are dropped.
    static let maxQueuedEvents: Int64 = 10_000
    /// Unacknowledged deliveries in flight (each is handled in memory at once).
    static let prefetch: UInt16 = 200

    func run() async throws {
        let prefix = BrokerAccess.gateway.privateQueuePrefix ?? "gateway.events."
        let queue = "\(prefix)\(UUID().lowercasedText)"
        var amqp = configuration
        amqp.connectionName = "gateway-events"
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: Topology(
                queues: [
                    QueueSpec(
                        name: queue,
                        durable: false,
                        exclusive: true,
                        autoDelete: true,
                        arguments: ["x-max-length": .int(Self.maxQueuedEvents), "x-overflow": "drop-head"]
                    )
                ],
                bindings: [BindingSpec(queue: queue, exchange: BrokerNames.eventsExchange, routingKey: "#")]
            ),
            queues: [queue],
            prefetch: Self.prefetch,
            logger: logger
        )
        let hub = self.hub
        let logger = self.logger
        await withDiscardingTaskGroup { group in
            // Heartbeats (and the stalled-write check) for every open stream.
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: hub.limits.heartbeatInterval)
                    hub.heartbeat()
                }
            }
            group.addTask {
                for await event in consumer.events {
                    switch event {
                    case .connected(let generation):
                        hub.subscribed(afterGap: generation > 1)
                        logger.info("event subscription consuming", metadata: ["amqp.generation": "\(generation)"])
                    case .disconnected(let error):
                        hub.unsubscribed()
                        logger.warning("event subscription lost", metadata: ["amqp.error": "\(error)"])
                    case .reconnecting:
                        break
                    }
                }
            }
            group.addTask {
                for await delivery in consumer.deliveries {
                    if delivery.isBodyWithheld {
                        hub.metrics.eventDropped(reason: "too-large")
                    } else {
                        hub.receive(body: delivery.body, messageID: delivery.properties.messageID)
                    }
                    // Nothing is redone with an event: it is settled as soon as it was handed out.
                    try? await consumer.ack(delivery)
                }
            }
            await cancelWhenGracefulShutdown {
                await Self.start(consumer, hub: hub, logger: logger)
                // Consumes (in the tasks above) until shutdown cancels this sleep.
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(3600))
                }
            }
            // Streams still open end now (the server waits for them before it stops).
            hub.shutdown()
            await consumer.close()
            group.cancelAll()
        }
    }

    /// Starts the consumer, every two seconds until it works (the broker may start later).
    private static func start(_ consumer: AMQPConsumer, hub: EventHub, logger: Logger) async {
        var warned = false
        while !Task.isCancelled {
            do {
                try await consumer.start()
                hub.subscribed(afterGap: false)
                return
            } catch {
                if error.kind == .closed { return }
                if !warned { logger.warning("event subscription not started", metadata: ["amqp.error": "\(error)"]) }
                warned = true
            }
            try? await Task.sleep(for: .seconds(2))
        }
    }
}
