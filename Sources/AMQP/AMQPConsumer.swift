import Foundation
import Logging
import Synchronization

/// A consuming connection: one channel, basic.qos prefetch, manual acknowledgements, one basic.consume
/// per queue, on its own thread.
///
/// After a lost connection it reconnects with capped exponential backoff, declares the topology again
/// and resumes consuming. Deliveries of the lost connection are requeued by the broker and come again
/// (with `redelivered` set); acknowledging one of the old deliveries throws `.staleDelivery` instead of
/// acknowledging the wrong message.
///
/// - Important: Acknowledge each delivery exactly once (`ack`, `nack` or `reject`), from any task. The
///   connection itself lives on the consumer's thread; acknowledgements are queued to it and sent without
///   waiting for a poll timeout. Iterate `deliveries` from one task.
public final class AMQPConsumer: Sendable {
    private let shared: ConsumerShared
    private let configuration: AMQPConfiguration
    private let topology: Topology
    private let queues: [String]
    private let prefetch: UInt16
    private let logger: Logger

    /// Creates a consumer; nothing connects until `start()`.
    /// - Parameters:
    ///   - configuration: Where to connect.
    ///   - topology: Declared on every (re)connect before consuming.
    ///   - queues: The queues to consume from.
    ///   - prefetch: The most unacknowledged deliveries per queue consumer (basic.qos, per consumer).
    ///   - logger: Receives connection events (`amqp.*` metadata).
    public init(
        configuration: AMQPConfiguration,
        topology: Topology,
        queues: [String],
        prefetch: UInt16,
        logger: Logger
    ) {
        self.configuration = configuration
        self.topology = topology
        self.queues = queues
        self.prefetch = prefetch
        self.logger = logger
        self.shared = ConsumerShared()
    }

    deinit {
        shared.requestClose(nil)
    }

    /// Connects, declares the topology, sets the prefetch and starts consuming. Returns at once if the
    /// consumer is already started; after a failed start it may be called again.
    /// - Throws: The error of the first connection attempt (`.connectionFailed`, `.authenticationFailed`,
    ///   `.tls`, `.notFound` for a missing queue…), or `.closed`. Later losses reconnect by themselves.
    nonisolated(nonsending) public func start() async throws(AMQPError) {
        guard shared.claimStart() else {
            if shared.isClosed { throw .consumerClosed }
            return
        }
        let shared = self.shared
        let configuration = self.configuration
        let topology = self.topology
        let queues = self.queues
        let prefetch = self.prefetch
        let logger = self.logger
        let result: Result<Void, AMQPError> = await withCheckedContinuation { continuation in
            startLoopThread(name: "amqp-consumer") {
                let loop = ConsumerLoop(
                    configuration: configuration,
                    topology: topology,
                    queues: queues,
                    prefetch: prefetch,
                    logger: logger,
                    shared: shared
                )
                loop.run(started: continuation)
            }
        }
        try result.get()
    }

    /// Every delivery of every queue, in arrival order. Finishes after `close()`.
    ///
    /// The broker never has more than `prefetch` unacknowledged deliveries outstanding per queue consumer.
    public var deliveries: AsyncStream<Delivery> {
        shared.deliveries
    }

    /// Acknowledges a delivery.
    /// - Parameters:
    ///   - delivery: The delivery.
    ///   - multiple: Also acknowledge every earlier unacknowledged delivery of the same connection.
    /// - Throws: `.staleDelivery` if the delivery came on an earlier connection (the broker requeued it)
    ///   or was already acknowledged, rejected or nacked; `.closed`.
    nonisolated(nonsending) public func ack(_ delivery: Delivery, multiple: Bool = false) async throws(AMQPError) {
        try shared.settle(delivery, .ack, multiple: multiple)
    }

    /// Negatively acknowledges a delivery.
    /// - Parameters:
    ///   - delivery: The delivery.
    ///   - multiple: Also nack every earlier unacknowledged delivery of the same connection.
    ///   - requeue: Put it back in the queue (true) or drop / dead-letter it (false).
    /// - Throws: `.staleDelivery`, `.closed`.
    nonisolated(nonsending) public func nack(
        _ delivery: Delivery,
        multiple: Bool = false,
        requeue: Bool
    ) async throws(AMQPError) {
        try shared.settle(delivery, requeue ? .nackRequeue : .nackDrop, multiple: multiple)
    }

    /// Rejects a delivery.
    /// - Parameters:
    ///   - delivery: The delivery.
    ///   - requeue: Put it back in the queue (true) or drop / dead-letter it (false).
    /// - Throws: `.staleDelivery`, `.closed`.
    nonisolated(nonsending) public func reject(_ delivery: Delivery, requeue: Bool) async throws(AMQPError) {
        try shared.settle(delivery, requeue ? .rejectRequeue : .rejectDrop, multiple: false)
    }

    /// Cancels every consumer (basic.cancel): no new deliveries arrive, and the channel stays open so that
    /// in-flight deliveries can still be acknowledged (graceful drain). Not undone by reconnects.
    nonisolated(nonsending) public func stopConsuming() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !shared.send(.stopConsuming(continuation)) {
                continuation.resume()
            }
        }
    }

    /// Closes the channel and connection cleanly: unacknowledged deliveries return to their queues (on the
    /// broker). `deliveries` and `events` finish; later acknowledgements throw `.closed`.
    nonisolated(nonsending) public func close() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            shared.requestClose(continuation)
        }
    }

    /// Whether the consumer currently holds an open connection.
    public var isConnected: Bool {
        shared.isConnected
    }

    /// Connection state changes, for logs and readiness. Keeps only the newest events if nobody reads.
    public var events: AsyncStream<ConnectionEvent> {
        shared.events
    }
}

/// How a delivery is settled.
enum SettleKind: Sendable {
    case ack, nackRequeue, nackDrop, rejectRequeue, rejectDrop
}

/// A request to the consumer's loop thread.
enum ConsumerCommand: Sendable {
    case settle(SettleKind, tag: UInt64, multiple: Bool, generation: UInt64)
    case stopConsuming(CheckedContinuation<Void, Never>)
    case close(CheckedContinuation<Void, Never>?)

    var isSettle: Bool {
        if case .settle = self { return true }
        return false
    }
}

/// The state callers share with the consumer's loop thread, under one mutex: the command inbox, the
/// connection generation and the delivery tags handed out and not yet settled (so a second ack of a tag,
/// or an ack from an earlier connection, never reaches the broker).
final class ConsumerShared: Sendable {
    struct State {
        var commands: [ConsumerCommand] = []
        var wakePending = false
        var closed = false
        var started = false
        var loopRunning = false
        var generation: UInt64 = 0
        var connected = false
        var outstanding = Set<UInt64>()
    }

    let state = Mutex(State())
    let waker = Waker()
    let deliveries: AsyncStream<Delivery>
    let deliveryContinuation: AsyncStream<Delivery>.Continuation
    let events: AsyncStream<ConnectionEvent>
    let eventContinuation: AsyncStream<ConnectionEvent>.Continuation

    init() {
        (deliveries, deliveryContinuation) = AsyncStream.makeStream(of: Delivery.self)
        (events, eventContinuation) = AsyncStream.makeStream(
            of: ConnectionEvent.self,
            bufferingPolicy: .bufferingNewest(64)
        )
    }

    var isConnected: Bool {
        state.withLock { $0.connected }
    }

    var isClosed: Bool {
        state.withLock { $0.closed }
    }

    /// Claims the right to start the loop thread; false if it runs already or the consumer is closed.
    func claimStart() -> Bool {
        state.withLock { state in
            guard !state.closed, !state.started else { return false }
            state.started = true
            state.loopRunning = true
            return true
        }
    }

    /// Validates and queues an acknowledgement.
    func settle(_ delivery: Delivery, _ kind: SettleKind, multiple: Bool) throws(AMQPError) {
        let tag = delivery.deliveryTag
        let outcome = state.withLock { state -> (AMQPError?, Bool) in
            if state.closed { return (.consumerClosed, false) }
            guard state.connected, delivery.generation == state.generation else {
                return (
                    AMQPError(
                        kind: .staleDelivery,
                        message: "delivery \(tag) came on connection generation \(delivery.generation), which is "
                            + "gone (now \(state.generation)); the broker requeued it, do not settle it again"
                    ), false
                )
            }
            guard state.outstanding.contains(tag) else {
                return (
                    AMQPError(
                        kind: .staleDelivery,
                        message: "delivery \(tag) of generation \(delivery.generation) was already acknowledged, "
                            + "rejected or nacked"
                    ), false
                )
            }
            if multiple {
                state.outstanding = state.outstanding.filter { $0 > tag }
            } else {
                state.outstanding.remove(tag)
            }
            state.commands.append(.settle(kind, tag: tag, multiple: multiple, generation: delivery.generation))
            if state.wakePending { return (nil, false) }
            state.wakePending = true
            return (nil, true)
        }
        if outcome.1 { waker.signal() }
        if let error = outcome.0 { throw error }
    }

    /// Queues a command and wakes the loop; false if no loop runs.
    func send(_ command: ConsumerCommand) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            guard state.loopRunning, !state.closed else { return (false, false) }
            state.commands.append(command)
            if state.wakePending { return (true, false) }
            state.wakePending = true
            return (true, true)
        }
        if wake { waker.signal() }
        return accepted
    }

    /// Marks the consumer closed and asks the loop to finish; resumes `continuation` once it has.
    func requestClose(_ continuation: CheckedContinuation<Void, Never>?) {
        let queued = state.withLock { state -> Bool in
            state.closed = true
            guard state.loopRunning else { return false }
            state.commands.append(.close(continuation))
            state.wakePending = true
            return true
        }
        if queued {
            waker.signal()
        } else {
            deliveryContinuation.finish()
            eventContinuation.finish()
            continuation?.resume()
        }
    }

    /// Moves the queued commands into `buffer`; returns the lowest unsettled delivery tag and the
    /// generation, for coalescing acknowledgements.
    func takeCommands(into buffer: inout [ConsumerCommand]) -> UInt64 {
        state.withLock { state in
            state.wakePending = false
            guard !state.commands.isEmpty else { return .max }
            swap(&buffer, &state.commands)
            return state.outstanding.min() ?? .max
        }
    }

    /// Records the deliveries about to be handed out.
    func recordDelivered(_ tags: [UInt64]) {
        state.withLock { state in
            for tag in tags { state.outstanding.insert(tag) }
        }
    }

    /// A new connection is consuming: acknowledgements are accepted for `generation` only.
    func connected(generation: UInt64) {
        state.withLock { state in
            state.generation = generation
            state.connected = true
            state.outstanding.removeAll()
        }
    }

    /// The connection is gone: every handed-out tag is stale, and queued acknowledgements are dropped.
    func disconnected() {
        state.withLock { state in
            state.connected = false
            state.outstanding.removeAll()
            state.commands.removeAll { $0.isSettle }
        }
    }

    /// The loop ended (closed, or its first connection failed); returns commands that arrived too late.
    func loopExited(closed: Bool) -> [ConsumerCommand] {
        state.withLock { state in
            state.loopRunning = false
            state.connected = false
            state.outstanding.removeAll()
            if closed {
                state.closed = true
            } else {
                state.started = false
            }
            let leftover = state.commands
            state.commands = []
            return leftover
        }
    }
}
