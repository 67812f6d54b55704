import CRabbitMQ
import Foundation
import Logging
import RetryBackoff

/// The consumer's connection loop: runs on its own thread and owns the connection.
///
/// - Important: Every member is used only on the loop thread; callers reach it through `ConsumerShared`.
final class ConsumerLoop {
    private let configuration: AMQPConfiguration
    private let topology: Topology
    private let queues: [String]
    private let prefetch: UInt16
    private var logger: Logger
    private let shared: ConsumerShared
    private let backoff: Backoff
    private let poller = Poller()

    private var connection: ConnectionHandle?
    private var generation: UInt64 = 0
    /// Consumer tag → queue name, for the current connection.
    private var consumers: [String: String] = [:]
    /// Cleared by stopConsuming: reconnects then do not consume again.
    private var consuming = true
    private var reconnectAttempt = 0
    private var nextReconnectAt: UInt64?
    private var lastInbound: UInt64 = 0

    private var commands: [ConsumerCommand] = []
    private var received: [Delivery] = []
    private var receivedTags: [UInt64] = []

    init(
        configuration: AMQPConfiguration,
        topology: Topology,
        queues: [String],
        prefetch: UInt16,
        logger: Logger,
        shared: ConsumerShared
    ) {
        self.configuration = configuration
        self.topology = topology
        self.queues = queues
        self.prefetch = prefetch
        self.logger = logger
        self.logger[metadataKey: LogKey.role] = "consumer"
        self.logger[metadataKey: LogKey.url] = .string(configuration.redactedURL)
        self.logger[metadataKey: LogKey.queues] = .string(queues.joined(separator: ","))
        self.shared = shared
        self.backoff = configuration.reconnect.backoff
    }

    // MARK: - Loop

    func run(started: CheckedContinuation<Result<Void, AMQPError>, Never>) {
        if case .failure(let error) = connectNow() {
            logger.error("AMQP consumer could not connect", metadata: [LogKey.error: "\(error)"])
            let leftover = shared.loopExited(closed: false)
            finishLeftovers(leftover)
            started.resume(returning: .failure(error))
            return
        }
        started.resume(returning: .success(()))

        while true {
            let lowestOutstanding = shared.takeCommands(into: &commands)
            if !commands.isEmpty {
                let closing = processCommands(lowestOutstanding: lowestOutstanding)
                commands.removeAll(keepingCapacity: true)
                if let closing {
                    finishClose(closing)
                    return
                }
            }
            if connection != nil {
                pump()
            }
            if connection == nil, let at = nextReconnectAt, monotonicNow() >= at {
                nextReconnectAt = nil
                if case .failure = connectNow() {
                    scheduleReconnect()
                }
            }
            waitForActivity()
        }
    }

    private func waitForActivity() {
        if let connection, connection.hasBufferedInput {
            return
        }
        let now = monotonicNow()
        let interval = pollInterval(heartbeatSeconds: connection?.heartbeatSeconds ?? 0)
        var wakeAt = now + interval
        if let nextReconnectAt { wakeAt = min(wakeAt, nextReconnectAt) }
        let timeout = millisecondsUntil(wakeAt, now: now, maximum: interval)
        let ready = poller.wait(waker: shared.waker, socketFD: connection?.socketFD, timeoutMilliseconds: timeout)
        if ready.socket {
            lastInbound = monotonicNow()
        } else if ready.wake {
            // Woken for acknowledgements only: let the acking task finish its burst first, so that they go
            // out as one `multiple` ack (measured: +15–20 % consume throughput on 2 cores).
            sched_yield()
        }
    }

    /// Reads what librabbitmq can return without waiting (bounded, so acknowledgements interleave), hands
    /// the deliveries out, and checks the heartbeat.
    private func pump() {
        guard let connection else { return }
        let processed: Int
        switch connection.drainFrames(limit: 512, { handleFrame($0, on: connection) }) {
        case .success(let count): processed = count
        case .failure(let error):
            connectionLost(error)
            return
        }
        guard self.connection != nil else { return }
        handOut()
        let now = monotonicNow()
        if processed > 0 {
            lastInbound = now
        } else if connection.heartbeatOverdue(lastInbound: lastInbound, now: now) {
            connectionLost(connection.heartbeatTimedOut())
        }
    }

    private func handOut() {
        guard !received.isEmpty else { return }
        shared.recordDelivered(receivedTags)
        for delivery in received {
            shared.deliveryContinuation.yield(delivery)
        }
        received.removeAll(keepingCapacity: true)
        receivedTags.removeAll(keepingCapacity: true)
    }

    private func handleFrame(_ frame: amqp_frame_t, on connection: ConnectionHandle) {
        guard frame.frame_type == CRABBITMQ_FRAME_METHOD else { return }
        let method = frame.payload.method
        switch method.id {
        case CRABBITMQ_BASIC_DELIVER_METHOD:
            guard let deliver = method.decoded?.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee else {
                return
            }
            let tag = deliver.delivery_tag
            let queue = consumers[deliver.consumer_tag.string] ?? ""
            let exchange = deliver.exchange.string
            let routingKey = deliver.routing_key.string
            let redelivered = deliver.redelivered != 0
            let content: (MessageProperties, Data, size: UInt64, excerpts: [Data])
            do throws(AMQPError) {
                content = try connection.readContentKeepingExcerpts(maxBodyBytes: configuration.maxBodyBytes)
            } catch {
                connectionLost(error)
                return
            }
            received.append(
                Delivery(
                    queue: queue,
                    exchange: exchange,
                    routingKey: routingKey,
                    body: content.1,
                    bodySize: content.size,
                    properties: content.0,
                    redelivered: redelivered,
                    deliveryTag: tag,
                    generation: generation,
                    withheldExcerpts: content.excerpts
                )
            )
            receivedTags.append(tag)
        case CRABBITMQ_BASIC_CANCEL_METHOD:
            // The broker cancelled a consumer (its queue was deleted): no more deliveries from it.
            let tag = method.decoded?.assumingMemoryBound(to: amqp_basic_cancel_t.self).pointee.consumer_tag.string
            let queue = tag.flatMap { consumers.removeValue(forKey: $0) } ?? ""
            logger.warning("AMQP consumer cancelled by the broker", metadata: [LogKey.queue: "\(queue)"])
        case CRABBITMQ_CHANNEL_CLOSE_METHOD:
            connectionLost(connection.channelClosedByBroker(method))
        case CRABBITMQ_CONNECTION_CLOSE_METHOD:
            connectionLost(connection.connectionClosedByBroker(method))
        case CRABBITMQ_CONNECTION_BLOCKED_METHOD:
            logger.warning("AMQP consumer connection blocked by the broker (resource alarm)")
        case CRABBITMQ_CONNECTION_UNBLOCKED_METHOD:
            logger.info("AMQP consumer connection unblocked by the broker")
        default:
            break
        }
    }

    // MARK: - Commands

    /// Sends acknowledgements and runs control commands in order; returns the close continuation (wrapped)
    /// when a close was requested.
    private func processCommands(lowestOutstanding: UInt64) -> CloseRequest? {
        if let coalesced = coalescedAck(lowestOutstanding: lowestOutstanding) {
            if let connection {
                let status = connection.ack(coalesced, multiple: true)
                if status != AMQP_STATUS_OK.rawValue {
                    connectionLost(connection.lost(status: status, "acknowledging"))
                }
            }
            return nil
        }
        var closing: CloseRequest?
        for command in commands {
            switch command {
            case .settle(let kind, let tag, let multiple, let generation):
                guard generation == self.generation, let connection, connection.isAlive else { continue }
                let status: Int32
                switch kind {
                case .ack: status = connection.ack(tag, multiple: multiple)
                case .nackRequeue: status = connection.nack(tag, multiple: multiple, requeue: true)
                case .nackDrop: status = connection.nack(tag, multiple: multiple, requeue: false)
                case .rejectRequeue: status = connection.reject(tag, requeue: true)
                case .rejectDrop: status = connection.reject(tag, requeue: false)
                }
                if status != AMQP_STATUS_OK.rawValue {
                    connectionLost(connection.lost(status: status, "acknowledging"))
                }
            case .stopConsuming(let continuation):
                stopConsuming()
                continuation.resume()
            case .close(let continuation):
                if closing == nil {
                    closing = CloseRequest()
                }
                if let continuation { closing?.waiters.append(continuation) }
            }
        }
        return closing
    }

    /// When every queued command is a plain ack of the current connection and no delivery below the highest
    /// of them is still unsettled, one `multiple` ack of the highest tag settles exactly the same set.
    private func coalescedAck(lowestOutstanding: UInt64) -> UInt64? {
        guard commands.count > 1 else { return nil }
        var highest: UInt64 = 0
        for command in commands {
            guard case .settle(.ack, let tag, _, let generation) = command, generation == self.generation else {
                return nil
            }
            highest = max(highest, tag)
        }
        return highest < lowestOutstanding ? highest : nil
    }

    private func stopConsuming() {
        consuming = false
        guard let connection, connection.isAlive else {
            consumers.removeAll()
            return
        }
        for (tag, queue) in consumers {
            do throws(AMQPError) {
                try connection.cancel(consumerTag: tag)
                logger.info("AMQP consumer stopped consuming", metadata: [LogKey.queue: "\(queue)"])
            } catch {
                connectionLost(error)
                break
            }
        }
        consumers.removeAll()
        // Deliveries that arrived while waiting for cancel-ok were queued by librabbitmq; hand them out.
        pump()
    }

    // MARK: - Connection lifecycle

    private func connectNow() -> Result<Void, AMQPError> {
        do throws(AMQPError) {
            let connection = try ConnectionHandle(configuration: configuration)
            if !topology.isEmpty {
                try connection.declare(topology)
            }
            try connection.qos(prefetch: prefetch)
            generation += 1
            shared.connected(generation: generation)
            self.connection = connection
            consumers.removeAll()
            if consuming {
                for queue in queues {
                    let tag = try connection.consume(queue: queue)
                    consumers[tag] = queue
                }
            }
            lastInbound = monotonicNow()
            reconnectAttempt = 0
            logger.info(
                "AMQP consumer connected",
                metadata: [
                    LogKey.generation: "\(generation)", LogKey.heartbeat: "\(connection.heartbeatSeconds)",
                ]
            )
            shared.eventContinuation.yield(.connected(generation: generation))
            return .success(())
        } catch {
            if let connection {
                connection.abort()
                self.connection = nil
            }
            shared.disconnected()
            received.removeAll()
            receivedTags.removeAll()
            logger.debug("AMQP consumer connect attempt failed", metadata: [LogKey.error: "\(error)"])
            return .failure(error)
        }
    }

    private func scheduleReconnect() {
        reconnectAttempt += 1
        let delay = backoff.delay(afterAttempt: reconnectAttempt, random: Double.random(in: 0...1))
        nextReconnectAt = deadline(after: delay)
        logger.info(
            "AMQP consumer reconnecting",
            metadata: [
                LogKey.reconnectAttempt: "\(reconnectAttempt)", LogKey.delayMilliseconds: "\(delay.wholeMilliseconds)",
            ]
        )
        shared.eventContinuation.yield(.reconnecting(attempt: reconnectAttempt, delay: delay))
    }

    /// The connection died: its deliveries are requeued by the broker, so every tag handed out is stale.
    private func connectionLost(_ error: AMQPError) {
        guard let connection else { return }
        connection.abort()
        self.connection = nil
        consumers.removeAll()
        received.removeAll()
        receivedTags.removeAll()
        shared.disconnected()
        logger.warning(
            "AMQP consumer connection lost",
            metadata: [LogKey.generation: "\(generation)", LogKey.error: "\(error)"]
        )
        shared.eventContinuation.yield(.disconnected(error))
        scheduleReconnect()
    }

    // MARK: - Closing

    struct CloseRequest {
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private func finishClose(_ request: CloseRequest) {
        if let connection {
            connection.close()
            self.connection = nil
        }
        let leftover = shared.loopExited(closed: true)
        var waiters = request.waiters
        for command in leftover {
            switch command {
            case .close(let continuation): if let continuation { waiters.append(continuation) }
            case .stopConsuming(let continuation): continuation.resume()
            case .settle: break
            }
        }
        logger.info("AMQP consumer closed", metadata: [LogKey.generation: "\(generation)"])
        shared.deliveryContinuation.finish()
        shared.eventContinuation.finish()
        for waiter in waiters {
            waiter.resume()
        }
    }

    /// After a failed start: answer commands that arrived meanwhile (a close ends the consumer).
    private func finishLeftovers(_ leftover: [ConsumerCommand]) {
        var waiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
        for command in leftover {
            switch command {
            case .close(let continuation):
                closed = true
                if let continuation { waiters.append(continuation) }
            case .stopConsuming(let continuation): continuation.resume()
            case .settle: break
            }
        }
        if closed {
            shared.deliveryContinuation.finish()
            shared.eventContinuation.finish()
        }
        for waiter in waiters {
            waiter.resume()
        }
    }
}
