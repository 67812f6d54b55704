import Foundation
import Logging
import Synchronization

/// A publishing connection with publisher confirms.
///
/// Owns one connection and one channel (in confirm mode) on a dedicated thread. `publish` returns once
/// the broker confirmed the message (basic.ack); batches are pipelined and confirmed together. If the
/// connection is lost before a confirm arrives, the publisher reconnects with capped exponential backoff,
/// declares the remembered topology again and republishes the unconfirmed messages until their timeout:
/// delivery is at-least-once, so consumers must deduplicate (for example on `messageID`).
///
/// - Important: All calls are safe from any task; each is carried out on the publisher's own thread, in
///   the order received. Call `close()` when done; a publisher that is dropped without `close()` closes
///   its connection in the background.
public final class AMQPPublisher: Sendable {
    private let shared: PublisherShared
    private let maxBodyBytes: Int?

    /// Creates a publisher and starts its thread; nothing connects until `connect()`, `declare` or `publish`.
    /// - Parameters:
    ///   - configuration: Where to connect.
    ///   - logger: Receives connection events (`amqp.*` metadata).
    public init(configuration: AMQPConfiguration, logger: Logger) {
        let shared = PublisherShared()
        self.shared = shared
        self.maxBodyBytes = configuration.maxBodyBytes
        startLoopThread(name: "amqp-publisher") {
            PublisherLoop(configuration: configuration, logger: logger, shared: shared).run()
        }
    }

    deinit {
        shared.requestClose(nil)
    }

    /// Connects now, so that start-up fails fast with a clear error. `declare` and `publish` also connect
    /// lazily.
    /// - Throws: `.connectionFailed`, `.authenticationFailed`, `.tls`, `.closed`.
    nonisolated(nonsending) public func connect() async throws(AMQPError) {
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.connect(continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        try result.get()
    }

    /// Declares exchanges, then queues, then bindings, idempotently, and remembers them: after a reconnect
    /// the remembered topology is declared again.
    ///
    /// A declaration that conflicts with an existing entity throws `.preconditionFailed` (406) with the
    /// broker's text; the publisher reopens its channel and stays usable.
    /// - Parameter topology: What to declare.
    nonisolated(nonsending) public func declare(_ topology: Topology) async throws(AMQPError) {
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.declare(topology, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        try result.get()
    }

    /// Publishes one message and returns once the broker confirmed it.
    ///
    /// If the connection is lost before the confirm, the message is published again after reconnecting
    /// (with capped exponential backoff and jitter) until `timeout` is over.
    /// - Parameters:
    ///   - message: The message.
    ///   - timeout: How long to keep trying for a confirm.
    /// - Throws: `.publishNacked` (basic.nack), `.unroutable` (a mandatory message no queue is bound for),
    ///   `.notFound` (no such exchange), `.timeout` or the last connection error, `.closed`.
    nonisolated(nonsending) public func publish(
        _ message: OutgoingMessage,
        timeout: Duration = .seconds(30)
    ) async throws(AMQPError) {
        let results = await publishAll([message], timeout: timeout)
        if let error = results.first ?? nil {
            throw error
        }
    }

    /// Publishes all messages pipelined (not one round trip each) and waits for all their confirms.
    ///
    /// Same reconnect rule as the single publish. Every message not listed in the thrown error was confirmed.
    /// - Parameters:
    ///   - messages: The messages, published in this order.
    ///   - timeout: How long to keep trying for the confirms.
    /// - Throws: `AMQPBatchError` listing which indices failed and why, after the others were confirmed
    ///   (every index fails with `.closed` if the publisher is closed).
    nonisolated(nonsending) public func publish(
        _ messages: [OutgoingMessage],
        timeout: Duration = .seconds(30)
    ) async throws {
        let results = await publishAll(messages, timeout: timeout)
        var failures: [Int: AMQPError] = [:]
        for (index, result) in results.enumerated() {
            if let result { failures[index] = result }
        }
        if !failures.isEmpty {
            throw AMQPBatchError(failures: failures)
        }
    }

    nonisolated(nonsending) private func publishAll(
        _ messages: [OutgoingMessage],
        timeout: Duration
    ) async -> [AMQPError?] {
        guard !messages.isEmpty else { return [] }
        // A body over the limit is refused here: the broker would close the channel on it, and a
        // republish after the reconnect would close it again.
        if let limit = maxBodyBytes, messages.contains(where: { $0.body.count > limit }) {
            var results = [AMQPError?](repeating: nil, count: messages.count)
            var fitting: [Int] = []
            for (index, message) in messages.enumerated() {
                if message.body.count > limit {
                    results[index] = AMQPError(
                        kind: .messageTooLarge,
                        message: "the message body has \(message.body.count) bytes, over the limit of \(limit) "
                            + "(MAX_MESSAGE_BYTES); it was not published"
                    )
                } else {
                    fitting.append(index)
                }
            }
            let sent = await sendAll(fitting.map { messages[$0] }, timeout: timeout)
            for (index, result) in zip(fitting, sent) { results[index] = result }
            return results
        }
        return await sendAll(messages, timeout: timeout)
    }

    nonisolated(nonsending) private func sendAll(
        _ messages: [OutgoingMessage],
        timeout: Duration
    ) async -> [AMQPError?] {
        guard !messages.isEmpty else { return [] }
        let due = deadline(after: timeout)
        return await withCheckedContinuation { continuation in
            if !shared.send(.publish(messages, deadline: due, timeout: timeout, continuation)) {
                continuation.resume(returning: Array(repeating: .publisherClosed, count: messages.count))
            }
        }
    }

    /// A queue's depth and consumer count.
    public struct QueueState: Sendable, Hashable {
        /// Messages ready for delivery (not counting unacknowledged ones).
        public var messageCount: UInt32
        /// Active consumers.
        public var consumerCount: UInt32

        /// Creates a queue state.
        public init(messageCount: UInt32, consumerCount: UInt32) {
            self.messageCount = messageCount
            self.consumerCount = consumerCount
        }
    }

    /// A passive queue.declare: the queue's depth and consumers.
    /// - Parameter queue: The queue name.
    /// - Throws: `.notFound` if there is no such queue (the channel is reopened internally).
    nonisolated(nonsending) public func queueState(_ queue: String) async throws(AMQPError) -> QueueState {
        let result: Result<QueueState, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.queueState(queue, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        return try result.get()
    }

    /// Removes every ready message from a queue.
    /// - Parameter queue: The queue name.
    /// - Returns: How many messages were removed.
    /// - Throws: `.notFound` if there is no such queue.
    nonisolated(nonsending) public func purgeQueue(_ queue: String) async throws(AMQPError) -> UInt32 {
        let result: Result<UInt32, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.purge(queue, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        return try result.get()
    }

    /// Deletes a queue and its messages, and forgets it (and its bindings) in the remembered topology.
    /// - Parameter queue: The queue name.
    nonisolated(nonsending) public func deleteQueue(_ queue: String) async throws(AMQPError) {
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.deleteQueue(queue, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        try result.get()
    }

    /// Deletes an exchange, and forgets it (and its bindings) in the remembered topology.
    /// - Parameter exchange: The exchange name.
    nonisolated(nonsending) public func deleteExchange(_ exchange: String) async throws(AMQPError) {
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.deleteExchange(exchange, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        try result.get()
    }

    /// Removes an exchange-to-exchange binding, and forgets it in the remembered topology. Removing
    /// a binding that does not exist succeeds (the broker cannot tell which was the case).
    /// - Parameter binding: The binding, as it was declared.
    /// - Throws: `.notFound` if either exchange is missing; `.channelClosed` (403) without the rights.
    nonisolated(nonsending) public func unbindExchange(_ binding: ExchangeBindingSpec) async throws(AMQPError) {
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            if !shared.send(.unbindExchange(binding, continuation)) {
                continuation.resume(returning: .failure(.publisherClosed))
            }
        }
        try result.get()
    }

    /// Whether the publisher currently holds an open connection.
    public var isConnected: Bool {
        shared.connected.load(ordering: .relaxed)
    }

    /// Whether the broker has blocked this connection (a memory or disk alarm): publishes wait,
    /// unsent, until it is unblocked, and fail at their timeout meanwhile.
    public var isBlocked: Bool {
        shared.blocked.load(ordering: .relaxed)
    }

    /// Waits (at most 5 s) for outstanding confirms, closes the channel and connection cleanly and stops
    /// the thread. Later calls throw `.closed`; calling `close()` again returns at once.
    nonisolated(nonsending) public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.requestClose(continuation)
        }
    }
}

extension AMQPError {
    static var publisherClosed: AMQPError {
        AMQPError(kind: .closed, message: "the publisher is closed")
    }

    static var consumerClosed: AMQPError {
        AMQPError(kind: .closed, message: "the consumer is closed")
    }
}

/// A request to the publisher's loop thread.
enum PublisherCommand: Sendable {
    case connect(CheckedContinuation<Result<Void, AMQPError>, Never>)
    case declare(Topology, CheckedContinuation<Result<Void, AMQPError>, Never>)
    case publish(
        [OutgoingMessage],
        deadline: UInt64,
        timeout: Duration,
        CheckedContinuation<[AMQPError?], Never>
    )
    case queueState(String, CheckedContinuation<Result<AMQPPublisher.QueueState, AMQPError>, Never>)
    case purge(String, CheckedContinuation<Result<UInt32, AMQPError>, Never>)
    case deleteQueue(String, CheckedContinuation<Result<Void, AMQPError>, Never>)
    case deleteExchange(String, CheckedContinuation<Result<Void, AMQPError>, Never>)
    case unbindExchange(ExchangeBindingSpec, CheckedContinuation<Result<Void, AMQPError>, Never>)
    case close(CheckedContinuation<Void, Never>?)

    /// Answers the command with `.closed` (it arrived after the loop stopped).
    func rejectClosed() {
        let error = AMQPError.publisherClosed
        switch self {
        case .connect(let c): c.resume(returning: .failure(error))
        case .declare(_, let c): c.resume(returning: .failure(error))
        case .publish(let messages, _, _, let c): c.resume(returning: Array(repeating: error, count: messages.count))
        case .queueState(_, let c): c.resume(returning: .failure(error))
        case .purge(_, let c): c.resume(returning: .failure(error))
        case .deleteQueue(_, let c): c.resume(returning: .failure(error))
        case .deleteExchange(_, let c): c.resume(returning: .failure(error))
        case .unbindExchange(_, let c): c.resume(returning: .failure(error))
        case .close(let c): c?.resume()
        }
    }
}

/// The state callers share with the publisher's loop thread: a command inbox guarded by a mutex, and the
/// waker that interrupts the loop's `poll`.
final class PublisherShared: Sendable {
    struct State {
        var commands: [PublisherCommand] = []
        var wakePending = false
        var closed = false
        var loopExited = false
    }

    let state = Mutex(State())
    let waker = Waker()
    let connected = Atomic<Bool>(false)
    let blocked = Atomic<Bool>(false)

    /// Queues a command and wakes the loop; false if the publisher is closed.
    func send(_ command: PublisherCommand) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.commands.append(command)
            if state.wakePending { return (true, false) }
            state.wakePending = true
            return (true, true)
        }
        if wake { waker.signal() }
        return accepted
    }

    /// Marks the publisher closed and asks the loop to finish; resumes `continuation` once it has.
    func requestClose(_ continuation: CheckedContinuation<Void, Never>?) {
        let queued = state.withLock { state -> Bool in
            state.closed = true
            guard !state.loopExited else { return false }
            state.commands.append(.close(continuation))
            state.wakePending = true
            return true
        }
        if queued {
            waker.signal()
        } else {
            continuation?.resume()
        }
    }

    /// Moves the queued commands into `buffer` (the loop's reusable array).
    func takeCommands(into buffer: inout [PublisherCommand]) {
        state.withLock { state in
            state.wakePending = false
            if !state.commands.isEmpty {
                swap(&buffer, &state.commands)
            }
        }
    }

    /// Marks the loop finished and returns commands that arrived too late.
    func markExited() -> [PublisherCommand] {
        state.withLock { state in
            state.loopExited = true
            state.closed = true
            let leftover = state.commands
            state.commands = []
            return leftover
        }
    }
}
