import CRabbitMQ
import Foundation
import Logging

/// A batch handed to `publish`, while its confirms are outstanding.
///
/// - Important: Created and used only on the publisher's loop thread.
final class BatchOp {
    let messages: [OutgoingMessage]
    let deadline: UInt64
    let timeout: Duration
    private var results: [AMQPError?]
    private(set) var settled: [Bool]
    private(set) var remaining: Int
    private let continuation: CheckedContinuation<[AMQPError?], Never>

    init(
        messages: [OutgoingMessage],
        deadline: UInt64,
        timeout: Duration,
        continuation: CheckedContinuation<[AMQPError?], Never>
    ) {
        self.messages = messages
        self.deadline = deadline
        self.timeout = timeout
        self.results = Array(repeating: nil, count: messages.count)
        self.settled = Array(repeating: false, count: messages.count)
        self.remaining = messages.count
        self.continuation = continuation
    }

    var isDone: Bool { remaining == 0 }

    /// Records the outcome of message `index` (nil: confirmed); resumes the caller when all are in.
    func settle(_ index: Int, _ result: AMQPError?) {
        guard !settled[index] else { return }
        settled[index] = true
        results[index] = result
        remaining -= 1
        if remaining == 0 {
            continuation.resume(returning: results)
        }
    }

    /// Settles every message still open with `error`.
    func settleAll(_ error: AMQPError) {
        for index in settled.indices where !settled[index] {
            settle(index, error)
        }
    }
}

/// One message of a batch on its way: waiting to be (re)published, or published and unconfirmed.
struct PendingPublish {
    let op: BatchOp
    let index: Int
    /// The publisher-confirm sequence number on the current channel (0 until published).
    var sequence: UInt64 = 0
    /// Set when the broker answered for this sequence number.
    var confirmed = false
    /// Set when the broker returned the message as unroutable (its ack follows).
    var returned: AMQPError?

    var isSettled: Bool { op.settled[index] }
    var message: OutgoingMessage { op.messages[index] }
}

/// The publisher's connection loop: runs on its own thread, owns the connection and all publish state.
///
/// - Important: Every member is used only on the loop thread; callers reach it through `PublisherShared`.
final class PublisherLoop {
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
    private var lastError: AMQPError?
    private var lastInbound: UInt64 = 0

    /// Published on the current channel, in sequence order (contiguous numbers from `unconfirmed[head]`).
    private var unconfirmed: [PendingPublish] = []
    private var unconfirmedHead = 0
    private var nextSequence: UInt64 = 1
    /// Waiting for a connection (or a reopened channel) to be published, oldest first.
    private var backlog: [PendingPublish] = []
    /// The broker blocked the connection (connection.blocked, a resource alarm): it stopped
    /// reading the socket, so a publish written now would only fill the socket's buffer and then
    /// block this thread inside librabbitmq, with no deadline. Publishes wait in the backlog.
    private var blocked = false
    /// The socket had no room for the next publish: the backlog is tried again at this time
    /// (a broker that stopped reading must not hold the thread inside a write).
    private var writeRetryAt: UInt64?
    private var ops: [BatchOp] = []
    private var opsSweepThreshold = 64
    private var nextDeadline: UInt64 = .max

    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var closeDeadline: UInt64?
    private var commands: [PublisherCommand] = []

    init(configuration: AMQPConfiguration, logger: Logger, shared: PublisherShared) {
        self.configuration = configuration
        self.logger = logger
        self.logger[metadataKey: LogKey.role] = "publisher"
        self.logger[metadataKey: LogKey.url] = .string(configuration.redactedURL)
        self.shared = shared
        self.backoff = Backoff(policy: configuration.reconnect)
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
            if connection != nil, !blocked, !backlog.isEmpty, writeRetryAt.map({ now >= $0 }) ?? true {
                writeRetryAt = nil
                flushBacklog()
            }
            if now >= nextDeadline || ops.count >= opsSweepThreshold {
                sweepOps(now: now)
            }
            if connection == nil, let at = nextReconnectAt, now >= at {
                nextReconnectAt = nil
                _ = connectNow()
            }
            if let closeDeadline, now >= closeDeadline || !hasOutstandingWork {
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
        wakeAt = min(wakeAt, nextDeadline)
        if let nextReconnectAt { wakeAt = min(wakeAt, nextReconnectAt) }
        if let writeRetryAt, !blocked { wakeAt = min(wakeAt, writeRetryAt) }
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
            settleConfirms(upTo: ack.delivery_tag, multiple: ack.multiple != 0, nacked: false)
        case CRABBITMQ_BASIC_NACK_METHOD:
            guard let nack = method.decoded?.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee else { return }
            settleConfirms(upTo: nack.delivery_tag, multiple: nack.multiple != 0, nacked: true)
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
            blocked = true
            shared.blocked.store(true, ordering: .relaxed)
            logger.warning("AMQP publisher blocked by the broker (resource alarm); publishes wait")
        case CRABBITMQ_CONNECTION_UNBLOCKED_METHOD:
            blocked = false
            shared.blocked.store(false, ordering: .relaxed)
            logger.info("AMQP publisher unblocked by the broker")
            flushBacklog()
        default:
            break
        }
    }

    // MARK: - Confirms and returns

    private func settleConfirms(upTo tag: UInt64, multiple: Bool, nacked: Bool) {
        guard unconfirmedHead < unconfirmed.count else { return }
        let first = unconfirmed[unconfirmedHead].sequence
        if multiple {
            var i = unconfirmedHead
            while i < unconfirmed.count, unconfirmed[i].sequence <= tag {
                settleSequence(at: i, nacked: nacked)
                i += 1
            }
        } else if tag >= first, tag - first < UInt64(unconfirmed.count - unconfirmedHead) {
            // The tag comes from the broker: checked against the window before it becomes an index.
            let i = unconfirmedHead + Int(tag - first)
            if unconfirmed[i].sequence == tag {
                settleSequence(at: i, nacked: nacked)
            }
        }
        while unconfirmedHead < unconfirmed.count, unconfirmed[unconfirmedHead].confirmed {
            unconfirmedHead += 1
        }
        if unconfirmedHead == unconfirmed.count {
            unconfirmed.removeAll(keepingCapacity: true)
            unconfirmedHead = 0
        } else if unconfirmedHead >= 1024, unconfirmedHead * 2 >= unconfirmed.count {
            unconfirmed.removeFirst(unconfirmedHead)
            unconfirmedHead = 0
        }
    }

    private func settleSequence(at i: Int, nacked: Bool) {
        guard !unconfirmed[i].confirmed else { return }
        unconfirmed[i].confirmed = true
        let pending = unconfirmed[i]
        if nacked {
            pending.op.settle(
                pending.index,
                AMQPError(
                    kind: .publishNacked,
                    message: "the broker refused the message (basic.nack); publish it again"
                )
            )
        } else {
            pending.op.settle(pending.index, pending.returned)
        }
    }

    /// basic.return comes before the message's ack and carries no sequence number: match the returned
    /// message with the oldest unconfirmed one of the same exchange, routing key, message id and body.
    private func handleReturn(_ method: amqp_method_t, on connection: ConnectionHandle) {
        guard let returned = method.decoded?.assumingMemoryBound(to: amqp_basic_return_t.self).pointee else { return }
        let exchange = returned.exchange.string
        let routingKey = returned.routing_key.string
        let error = AMQPError(
            kind: .unroutable,
            message: "no queue is bound for routing key '\(routingKey)' on exchange '\(exchange)' "
                + "(\(returned.reply_text.string)); declare the queue and binding first",
            replyCode: returned.reply_code
        )
        let content: (MessageProperties, Data, size: UInt64)
        do throws(AMQPError) {
            // A returned message is one of ours, so no larger than what we may publish.
            content = try connection.readContent(maxBodyBytes: configuration.maxBodyBytes ?? 1 << 27)
        } catch {
            connectionLost(error)
            return
        }
        for i in unconfirmedHead..<unconfirmed.count {
            let pending = unconfirmed[i]
            guard !pending.confirmed, pending.returned == nil else { continue }
            let message = pending.message
            if message.exchange == exchange, message.routingKey == routingKey,
                message.properties.messageID == content.0.messageID, message.body == content.1
            {
                unconfirmed[i].returned = error
                return
            }
        }
        logger.debug("AMQP publisher got a return for no unconfirmed message", metadata: [LogKey.error: "\(error)"])
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
            let op = BatchOp(messages: messages, deadline: deadline, timeout: timeout, continuation: continuation)
            startPublishing(op)
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

    private func startPublishing(_ op: BatchOp) {
        ops.append(op)
        nextDeadline = min(nextDeadline, op.deadline)
        if let connection, connection.isAlive, connection.isChannelOpen {
            for index in op.messages.indices {
                enqueue(PendingPublish(op: op, index: index))
            }
            return
        }
        for index in op.messages.indices {
            backlog.append(PendingPublish(op: op, index: index))
        }
        if connection == nil, nextReconnectAt == nil {
            // Not connected and no attempt scheduled: connect now (first use, or after an idle loss).
            _ = connectNow()
        }
    }

    /// Publishes now if the channel is usable, nothing waits before it, and the socket has room;
    /// else keeps the message in the backlog (in order) for the loop to publish later.
    private func enqueue(_ pending: PendingPublish) {
        guard backlog.isEmpty, let connection = writableConnection(for: pending) else {
            backlog.append(pending)
            return
        }
        publishNow(pending, on: connection)
    }

    /// The connection, when `pending` can be written to it now without blocking the thread.
    private func writableConnection(for pending: PendingPublish) -> ConnectionHandle? {
        guard let connection, connection.isAlive, connection.isChannelOpen, !blocked else { return nil }
        // The method and header frames: exchange, routing key and properties, bounded well below this.
        guard connection.canWriteWithoutBlocking(pending.message.body.count + 4096) else {
            writeRetryAt = monotonicNow() + 1_000_000
            return nil
        }
        return connection
    }

    private func publishNow(_ pending: PendingPublish, on connection: ConnectionHandle) {
        let status = connection.publish(pending.message)
        guard status == AMQP_STATUS_OK.rawValue else {
            let lost = connection.lost(status: status, "publishing")
            if Self.isEncodingFailure(status) {
                // The message itself cannot be framed (properties too large or malformed): it
                // fails for good instead of being republished after every reconnect. The
                // method frame may already be on the wire, so the connection is reset too.
                pending.op.settle(
                    pending.index,
                    AMQPError(
                        kind: .messageTooLarge,
                        message: "the message could not be encoded (\(statusText(status))); it was not published"
                    )
                )
            } else {
                backlog.append(pending)
            }
            connectionLost(lost)
            return
        }
        var published = pending
        published.sequence = nextSequence
        published.confirmed = false
        published.returned = nil
        nextSequence += 1
        unconfirmed.append(published)
    }

    /// Publishes the backlog in order, as far as the connection and the socket's room allow.
    private func flushBacklog() {
        guard !backlog.isEmpty else { return }
        let waiting = backlog
        backlog.removeAll(keepingCapacity: true)
        var next = waiting.startIndex
        while next < waiting.endIndex {
            let pending = waiting[next]
            if !pending.isSettled {
                guard let connection = writableConnection(for: pending) else { break }
                publishNow(pending, on: connection)
            }
            next += 1
        }
        // What could not go yet, after anything a failed publish put back.
        backlog.append(contentsOf: waiting[next...].filter { !$0.isSettled })
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
            return .failure(lastError ?? AMQPError(kind: .connectionLost, message: "not connected"))
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
            requeueUnconfirmed()
        }
        do throws(AMQPError) {
            let connection = try ConnectionHandle(configuration: configuration)
            try connection.confirmSelect()
            if !topology.isEmpty {
                try connection.declare(topology)
            }
            self.connection = connection
            // A new connection starts unblocked; the broker says again if the alarm persists.
            blocked = false
            shared.blocked.store(false, ordering: .relaxed)
            generation += 1
            nextSequence = 1
            unconfirmed.removeAll(keepingCapacity: true)
            unconfirmedHead = 0
            lastInbound = monotonicNow()
            reconnectAttempt = 0
            nextReconnectAt = nil
            lastError = nil
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
            lastError = error
            logger.debug("AMQP publisher connect attempt failed", metadata: [LogKey.error: "\(error)"])
            if !error.isRetriable {
                failBacklog(error)
            }
            if wantConnection || !backlog.isEmpty {
                scheduleReconnect()
            }
            return .failure(error)
        }
    }

    private func scheduleReconnect() {
        guard closeDeadline == nil || !backlog.isEmpty else { return }
        reconnectAttempt += 1
        let delay = backoff.delay(attempt: reconnectAttempt)
        nextReconnectAt = deadline(after: delay)
        logger.info(
            "AMQP publisher reconnecting",
            metadata: [
                LogKey.reconnectAttempt: "\(reconnectAttempt)",
                LogKey.delayMilliseconds: "\(delay.wholeMilliseconds)",
                LogKey.error: "\(lastError?.description ?? "")",
            ]
        )
    }

    /// The connection died: keep every unconfirmed message for republishing and schedule a reconnect.
    private func connectionLost(_ error: AMQPError) {
        guard let connection else { return }
        connection.abort()
        self.connection = nil
        shared.connected.store(false, ordering: .relaxed)
        lastError = error
        requeueUnconfirmed()
        logger.warning(
            "AMQP publisher connection lost",
            metadata: [
                LogKey.generation: "\(generation)", LogKey.error: "\(error)", LogKey.count: "\(backlog.count)",
            ]
        )
        scheduleReconnect()
    }

    /// Moves every published but unconfirmed message to the front of the backlog, oldest first.
    private func requeueUnconfirmed() {
        var again: [PendingPublish] = []
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !unconfirmed[i].isSettled {
            again.append(unconfirmed[i])
        }
        unconfirmed.removeAll(keepingCapacity: true)
        unconfirmedHead = 0
        if !again.isEmpty {
            backlog = again + backlog
        }
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

        let failed = causedByPublish ? Self.refusedTarget(in: error.message) : nil
        var again: [PendingPublish] = []
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !unconfirmed[i].isSettled {
            let pending = unconfirmed[i]
            let caused =
                failed.map { target in
                    pending.message.exchange == target.exchange
                        && (target.routingKey == nil || pending.message.routingKey == target.routingKey)
                } ?? true
            if causedByPublish && caused {
                pending.op.settle(pending.index, error)
            } else {
                again.append(pending)
            }
        }
        unconfirmed.removeAll(keepingCapacity: true)
        unconfirmedHead = 0
        backlog = again + backlog

        guard connection.isAlive else {
            connectionLost(error)
            return
        }
        do throws(AMQPError) {
            try connection.openChannel()
            try connection.confirmSelect()
            nextSequence = 1
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

    /// The exchange a broker error text names (`… no exchange 'x' in vhost '/'`), if any.
    static func exchangeNamed(in text: String) -> String? {
        quoted(after: "exchange '", in: text)
    }

    /// What a channel close caused by a publish refused: the exchange (`amq.default` is the
    /// default exchange, `""`) and, for a topic permission (`access to topic 'k' in exchange
    /// 'x'`), the routing key — so only those messages fail and the others are published again.
    static func refusedTarget(in text: String) -> (exchange: String, routingKey: String?)? {
        guard let exchange = exchangeNamed(in: text) else { return nil }
        return (exchange == "amq.default" ? "" : exchange, quoted(after: "access to topic '", in: text))
    }

    private static func quoted(after prefix: String, in text: String) -> String? {
        guard let start = text.range(of: prefix) else { return nil }
        let rest = text[start.upperBound...]
        guard let end = rest.firstIndex(of: "'") else { return nil }
        return String(rest[..<end])
    }

    /// librabbitmq statuses that say the frame could not be encoded, not that the socket failed.
    static func isEncodingFailure(_ status: Int32) -> Bool {
        status == AMQP_STATUS_TABLE_TOO_BIG.rawValue || status == AMQP_STATUS_BAD_AMQP_DATA.rawValue
            || status == AMQP_STATUS_INVALID_PARAMETER.rawValue || status == AMQP_STATUS_UNKNOWN_CLASS.rawValue
            || status == AMQP_STATUS_UNKNOWN_METHOD.rawValue
    }

    private func failBacklog(_ error: AMQPError) {
        for pending in backlog {
            pending.op.settle(pending.index, error)
        }
        backlog.removeAll(keepingCapacity: true)
    }

    // MARK: - Deadlines and closing

    private func sweepOps(now: UInt64) {
        nextDeadline = .max
        ops.removeAll { op in
            if op.isDone { return true }
            if op.deadline <= now {
                op.settleAll(timeoutError(for: op))
                return true
            }
            nextDeadline = min(nextDeadline, op.deadline)
            return false
        }
        opsSweepThreshold = max(64, ops.count * 2)
    }

    private func timeoutError(for op: BatchOp) -> AMQPError {
        let seconds = op.timeout.seconds
        if connection == nil, let lastError {
            var error = lastError
            error.message = "not confirmed within \(seconds) s while reconnecting: \(lastError.message)"
            return error
        }
        if blocked {
            return AMQPError(
                kind: .timeout,
                message: "the broker has blocked publishing (a memory or disk alarm) for more than \(seconds) s; "
                    + "publish it again later"
            )
        }
        return AMQPError(
            kind: .timeout,
            message: "the broker did not confirm the message within \(seconds) s; it may or may not have been "
                + "delivered, publish it again"
        )
    }

    private var hasOutstandingWork: Bool {
        if backlog.contains(where: { !$0.isSettled }) { return true }
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !unconfirmed[i].isSettled {
            return true
        }
        return false
    }

    private func finishClose() {
        let error = AMQPError(
            kind: .closed,
            message: "the publisher was closed before the broker confirmed the message"
        )
        for op in ops where !op.isDone {
            op.settleAll(error)
        }
        ops.removeAll()
        backlog.removeAll()
        unconfirmed.removeAll()
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
