import CRabbitMQ
import Foundation
import Logging
import RetryBackoff

/// The publisher's connection loop: runs on its own thread and owns the connection. It only does
/// I/O: what to write, and which publishes are done with which outcome, `PublishConfirmTracker` decides.
///
/// - Important: Every member is used only on the loop thread; callers reach it through `PublisherShared`.
final class PublisherLoop {
    typealias Tracker = PublishConfirmTracker<CheckedContinuation<[AMQPError?], Never>>

    private let configuration: AMQPConfiguration
    private var logger: Logger
    private let shared: PublisherShared
    private let backoff: Backoff
    private let poller = Poller()

    private var connection: ConnectionHandle?
    private var generation: UInt64 = 0
    private var topology = Topology.empty
    /// Once connected, the loop keeps reconnecting after a loss.
    private var wantConnection = false
    private var reconnectAttempt = 0
    private var nextReconnectAt: UInt64?
    private var lastInbound: UInt64 = 0

    /// Every publish on its way: waiting, unconfirmed, blocked, its deadline. While the broker has
    /// blocked the connection (a resource alarm) it has stopped reading the socket, so a publish
    /// written then would only fill the socket's buffer and then block this thread inside
    /// librabbitmq, with no deadline: the tracker names nothing to write until it is unblocked.
    private var tracker = Tracker()
    /// The socket had no room for the next publish: the backlog is tried again at this time
    /// (a broker that stopped reading must not hold the thread inside a write).
    private var writeRetryAt: UInt64?

    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var closeDeadline: UInt64?
    private var commands: [PublisherCommand] = []

    init(configuration: AMQPConfiguration, logger: Logger, shared: PublisherShared) {
        self.configuration = configuration
        self.logger = logger
        self.logger[metadataKey: LogKey.role] = "publisher"
        self.logger[metadataKey: LogKey.url] = .string(configuration.redactedURL)
        self.shared = shared
        self.backoff = configuration.reconnect.backoff
    }

    // MARK: - Loop

    func run() {
        while true {
            shared.takeCommands(into: &commands)
            if !commands.isEmpty {
                for command in commands {
                    handle(command)
                }
                commands.removeAll(keepingCapacity: true)
            }
            if connection != nil {
                pump()
            }
            let now = monotonicNow()
            if connection != nil, !tracker.isBlocked, tracker.hasBacklog, writeRetryAt.map({ now >= $0 }) ?? true {
                writeRetryAt = nil
                flushBacklog()
            }
            if now >= tracker.nextDeadline {
                resume(tracker.expire(now: now))
            }
            if connection == nil, let at = nextReconnectAt, now >= at {
                nextReconnectAt = nil
                _ = connectNow()
            }
            if let closeDeadline, now >= closeDeadline || !tracker.hasOutstandingWork {
                finishClose()
                return
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
        wakeAt = min(wakeAt, tracker.nextDeadline)
        if let nextReconnectAt { wakeAt = min(wakeAt, nextReconnectAt) }
        if let writeRetryAt, !tracker.isBlocked { wakeAt = min(wakeAt, writeRetryAt) }
        if let closeDeadline { wakeAt = min(wakeAt, closeDeadline) }
        let timeout = millisecondsUntil(wakeAt, now: now, maximum: interval)
        let ready = poller.wait(waker: shared.waker, socketFD: connection?.socketFD, timeoutMilliseconds: timeout)
        if ready.socket {
            lastInbound = monotonicNow()
        }
    }

    /// Reads every frame librabbitmq can return without waiting, and checks the heartbeat.
    private func pump() {
        guard let connection else { return }
        let processed: Int
        switch connection.drainFrames(limit: 4096, { handleFrame($0, on: connection) }) {
        case .success(let count): processed = count
        case .failure(let error):
            connectionLost(error)
            return
        }
        guard self.connection != nil else { return }
        let now = monotonicNow()
        if processed > 0 {
            lastInbound = now
        } else if connection.heartbeatOverdue(lastInbound: lastInbound, now: now) {
            connectionLost(connection.heartbeatTimedOut())
        }
    }

    private func handleFrame(_ frame: amqp_frame_t, on connection: ConnectionHandle) {
        guard frame.frame_type == CRABBITMQ_FRAME_METHOD else { return }
        let method = frame.payload.method
        switch method.id {
        case CRABBITMQ_BASIC_ACK_METHOD:
            guard let ack = method.decoded?.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee else { return }
            resume(tracker.ack(ack.delivery_tag, multiple: ack.multiple != 0))
        case CRABBITMQ_BASIC_NACK_METHOD:
            guard let nack = method.decoded?.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee else { return }
            resume(tracker.nack(nack.delivery_tag, multiple: nack.multiple != 0))
        case CRABBITMQ_BASIC_RETURN_METHOD:
            handleReturn(method, on: connection)
        case CRABBITMQ_CHANNEL_CLOSE_METHOD:
            let error = connection.channelClosedByBroker(method)
            logger.warning(
                "AMQP publisher channel closed by the broker",
                metadata: [LogKey.error: "\(error.message)", LogKey.replyCode: "\(error.replyCode ?? 0)"]
            )
            channelClosed(error, causedByPublish: true)
        case CRABBITMQ_CONNECTION_CLOSE_METHOD:
            connectionLost(connection.connectionClosedByBroker(method))
        case CRABBITMQ_CONNECTION_BLOCKED_METHOD:
            tracker.connectionBlocked()
            shared.blocked.store(true, ordering: .relaxed)
            logger.warning("AMQP publisher blocked by the broker (resource alarm); publishes wait")
        case CRABBITMQ_CONNECTION_UNBLOCKED_METHOD:
            tracker.connectionUnblocked()
            shared.blocked.store(false, ordering: .relaxed)
            logger.info("AMQP publisher unblocked by the broker")
            flushBacklog()
        default:
            break
        }
    }

    // MARK: - Confirms and returns

    /// Resumes the callers whose batches the tracker finished.
    private func resume(_ completions: [Tracker.Completion]) {
        for completion in completions {
            completion.token.resume(returning: completion.results)
        }
    }

    /// basic.return comes before the message's ack: the tracker marks the message it returns.
    private func handleReturn(_ method: amqp_method_t, on connection: ConnectionHandle) {
        guard let returned = method.decoded?.assumingMemoryBound(to: amqp_basic_return_t.self).pointee else { return }
        let content: (MessageProperties, Data, size: UInt64)
        do throws(AMQPError) {
            // A returned message is one of ours, so no larger than what we may publish.
            content = try connection.readContent(maxBodyBytes: configuration.maxBodyBytes ?? 1 << 27)
        } catch {
            connectionLost(error)
            return
        }
        let message = Tracker.ReturnedMessage(
            exchange: returned.exchange.string,
            routingKey: returned.routing_key.string,
            replyCode: returned.reply_code,
            replyText: returned.reply_text.string,
            messageID: content.0.messageID,
            body: content.1
        )
        if !tracker.returned(message) {
            logger.debug(
                "AMQP publisher got a return for no unconfirmed message",
                metadata: [LogKey.error: "\(message.error)"]
            )
        }
    }

    // MARK: - Commands

    private func handle(_ command: PublisherCommand) {
        switch command {
        case .connect(let continuation):
            continuation.resume(returning: connectIfNeeded())
        case .declare(let topology, let continuation):
            let result = withChannel { (connection: ConnectionHandle) throws(AMQPError) in
                try connection.declare(topology)
            }
            if case .success = result {
                self.topology = self.topology.merging(topology)
            }
            continuation.resume(returning: result)
        case .publish(let messages, let deadline, let timeout, let continuation):
            startPublishing(messages, deadline: deadline, timeout: timeout, continuation: continuation)
        case .queueState(let queue, let continuation):
            continuation.resume(
                returning: withChannel { (connection: ConnectionHandle) throws(AMQPError) in
                    let state = try connection.queueState(queue)
                    return AMQPPublisher.QueueState(messageCount: state.messages, consumerCount: state.consumers)
                }
            )
        case .purge(let queue, let continuation):
            continuation.resume(
                returning: withChannel { (connection: ConnectionHandle) throws(AMQPError) in try connection.purge(queue)
                }
            )
        case .deleteQueue(let queue, let continuation):
            let result = withChannel { (connection: ConnectionHandle) throws(AMQPError) in
                try connection.deleteQueue(queue)
            }
            if case .success = result { topology = topology.removingQueue(queue) }
            continuation.resume(returning: result)
        case .deleteExchange(let exchange, let continuation):
            let result = withChannel { (connection: ConnectionHandle) throws(AMQPError) in
                try connection.deleteExchange(exchange)
            }
            if case .success = result { topology = topology.removingExchange(exchange) }
            continuation.resume(returning: result)
        case .unbindExchange(let binding, let continuation):
            let result = withChannel { (connection: ConnectionHandle) throws(AMQPError) in
                try connection.unbindExchange(binding)
            }
            if case .success = result { topology.exchangeBindings.removeAll { $0 == binding } }
            continuation.resume(returning: result)
        case .close(let continuation):
            if let continuation { closeWaiters.append(continuation) }
            if closeDeadline == nil {
                closeDeadline = deadline(after: .seconds(5))
            }
        }
    }

    /// Publishes now if the channel is usable, nothing waits before the batch, and the socket has
    /// room; else the batch waits in the tracker's backlog (in order) for the loop to publish later.
    private func startPublishing(
        _ messages: [OutgoingMessage],
        deadline: UInt64,
        timeout: Duration,
        continuation: CheckedContinuation<[AMQPError?], Never>
    ) {
        let waited = tracker.hasBacklog
        if let empty = tracker.submit(messages, deadline: deadline, timeout: timeout, token: continuation) {
            resume([empty])
            return
        }
        if let connection, connection.isAlive, connection.isChannelOpen {
            if !waited {
                flushBacklog()
            }
            return
        }
        if connection == nil, nextReconnectAt == nil {
            // Not connected and no attempt scheduled: connect now (first use, or after an idle loss).
            _ = connectNow()
        }
    }

    /// The connection, when `message` can be written to it now without blocking the thread.
    private func writableConnection(for message: OutgoingMessage) -> ConnectionHandle? {
        guard let connection, connection.isAlive, connection.isChannelOpen else { return nil }
        // The method and header frames: exchange, routing key and properties, bounded well below this.
        guard connection.canWriteWithoutBlocking(message.body.count + 4096) else {
            writeRetryAt = monotonicNow() + 1_000_000
            return nil
        }
        return connection
    }

    /// Publishes the backlog in order, as far as the connection, the broker's block and the
    /// socket's room allow.
    private func flushBacklog() {
        guard tracker.hasBacklog else { return }
        // What could not go yet stays, after anything a failed publish put back.
        defer { tracker.discardSettledBacklog() }
        while let message = tracker.nextToPublish() {
            guard let connection = writableConnection(for: message) else { return }
            let status = connection.publish(message)
            guard status == AMQP_STATUS_OK.rawValue else {
                let lost = connection.lost(status: status, "publishing")
                if Self.isEncodingFailure(status) {
                    // The message itself cannot be framed: it fails for good. The method frame may
                    // already be on the wire, so the connection is reset too.
                    resume(tracker.didFailToEncodeNext(reason: statusText(status)))
                }
                connectionLost(lost)
                return
            }
            tracker.didPublishNext()
        }
    }

    /// Runs an RPC-style operation on the channel, connecting first if needed; recovers the channel or
    /// connection if the operation broke it.
    private func withChannel<T>(
        _ body: (ConnectionHandle) throws(AMQPError) -> T
    ) -> Result<T, AMQPError> {
        if case .failure(let error) = connectIfNeeded() {
            return .failure(error)
        }
        guard let connection else {
            return .failure(tracker.lastError ?? AMQPError(kind: .connectionLost, message: "not connected"))
        }
        do throws(AMQPError) {
            return .success(try body(connection))
        } catch {
            if !connection.isAlive {
                connectionLost(error)
            } else if !connection.isChannelOpen {
                channelClosed(error, causedByPublish: false)
            }
            return .failure(error)
        }
    }

    // MARK: - Connection lifecycle

    private func connectIfNeeded() -> Result<Void, AMQPError> {
        if let connection, connection.isAlive {
            if connection.isChannelOpen { return .success(()) }
            channelClosed(AMQPError(kind: .channelClosed, message: "channel closed"), causedByPublish: false)
            if let connection = self.connection, connection.isAlive, connection.isChannelOpen {
                return .success(())
            }
        }
        return connectNow()
    }

    private func connectNow() -> Result<Void, AMQPError> {
        if let old = connection {
            old.abort()
            connection = nil
            tracker.connectionLost(nil)
        }
        do throws(AMQPError) {
            let connection = try ConnectionHandle(configuration: configuration)
            try connection.confirmSelect()
            if !topology.isEmpty {
                try connection.declare(topology)
            }
            self.connection = connection
            // A new connection starts unblocked; the broker says again if the alarm persists.
            tracker.connected()
            shared.blocked.store(false, ordering: .relaxed)
            generation += 1
            lastInbound = monotonicNow()
            reconnectAttempt = 0
            nextReconnectAt = nil
            wantConnection = true
            shared.connected.store(true, ordering: .relaxed)
            logger.info(
                "AMQP publisher connected",
                metadata: [
                    LogKey.generation: "\(generation)", LogKey.heartbeat: "\(connection.heartbeatSeconds)",
                ]
            )
            flushBacklog()
            return .success(())
        } catch {
            logger.debug("AMQP publisher connect attempt failed", metadata: [LogKey.error: "\(error)"])
            resume(tracker.connectFailed(error))
            if wantConnection || tracker.hasBacklog {
                scheduleReconnect()
            }
            return .failure(error)
        }
    }

    private func scheduleReconnect() {
        guard closeDeadline == nil || tracker.hasBacklog else { return }
        reconnectAttempt += 1
        let delay = backoff.delay(afterAttempt: reconnectAttempt, random: Double.random(in: 0...1))
        nextReconnectAt = deadline(after: delay)
        logger.info(
            "AMQP publisher reconnecting",
            metadata: [
                LogKey.reconnectAttempt: "\(reconnectAttempt)",
                LogKey.delayMilliseconds: "\(delay.wholeMilliseconds)",
                LogKey.error: "\(tracker.lastError?.description ?? "")",
            ]
        )
    }

    /// The connection died: keep every unconfirmed message for republishing and schedule a reconnect.
    private func connectionLost(_ error: AMQPError) {
        guard let connection else { return }
        connection.abort()
        self.connection = nil
        shared.connected.store(false, ordering: .relaxed)
        tracker.connectionLost(error)
        logger.warning(
            "AMQP publisher connection lost",
            metadata: [
                LogKey.generation: "\(generation)", LogKey.error: "\(error)",
                LogKey.count: "\(tracker.backlogCount)",
            ]
        )
        scheduleReconnect()
    }

    /// The broker closed the channel (close-ok already sent). Confirms queued before the close are
    /// processed first; then messages that caused it fail, the others are republished on a new channel.
    private func channelClosed(_ error: AMQPError, causedByPublish: Bool) {
        var frame = amqp_frame_t()
        while let connection, connection.isAlive, connection.hasQueuedFrames {
            let status = connection.nextFrame(&frame)
            guard status == AMQP_STATUS_OK.rawValue else { break }
            handleFrame(frame, on: connection)
        }
        guard let connection else { return }
        resume(tracker.channelClosed(error, causedByPublish: causedByPublish))

        guard connection.isAlive else {
            connectionLost(error)
            return
        }
        do throws(AMQPError) {
            try connection.openChannel()
            try connection.confirmSelect()
            tracker.channelOpened()
        } catch {
            if connection.isAlive {
                // A channel that cannot be reopened: start over with a new connection.
                connection.close()
            }
            connectionLost(error)
            return
        }
        flushBacklog()
    }

    /// librabbitmq statuses that say the frame could not be encoded, not that the socket failed.
    static func isEncodingFailure(_ status: Int32) -> Bool {
        status == AMQP_STATUS_TABLE_TOO_BIG.rawValue || status == AMQP_STATUS_BAD_AMQP_DATA.rawValue
            || status == AMQP_STATUS_INVALID_PARAMETER.rawValue || status == AMQP_STATUS_UNKNOWN_CLASS.rawValue
            || status == AMQP_STATUS_UNKNOWN_METHOD.rawValue
    }

    // MARK: - Closing

    private func finishClose() {
        resume(tracker.close())
        if let connection {
            connection.close()
            self.connection = nil
        }
        shared.connected.store(false, ordering: .relaxed)
        for command in shared.markExited() {
            if case .close(let continuation) = command {
                continuation?.resume()
            } else {
                command.rejectClosed()
            }
        }
        logger.info("AMQP publisher closed", metadata: [LogKey.generation: "\(generation)"])
        for waiter in closeWaiters {
            waiter.resume()
        }
        closeWaiters.removeAll()
    }
}
