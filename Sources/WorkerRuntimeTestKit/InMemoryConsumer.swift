import AMQP
import Synchronization
import WorkerRuntime

/// Records how deliveries were settled: acknowledged, or returned (`nack`, requeued or not).
public final class InMemoryAcknowledger: Sendable {
    /// How one delivery was settled.
    public enum Settlement: Sendable, Hashable {
        /// Acknowledged: the message is done.
        case ack(deliveryTag: UInt64)
        /// Returned to its queue (`requeue`) or handed to the broker's dead-lettering.
        case nack(deliveryTag: UInt64, requeue: Bool)

        public var deliveryTag: UInt64 {
            switch self {
            case .ack(let tag), .nack(let tag, _): tag
            }
        }
    }

    private struct State {
        var settlements: [Settlement] = []
        var failure: AMQPError?
    }

    private let state = Mutex(State())

    public init() {}

    /// Every settlement, in order.
    public var settlements: [Settlement] { state.withLock { $0.settlements } }

    /// The settlements of one delivery (more than one would be a bug of the runtime).
    public func settlements(of delivery: Delivery) -> [Settlement] {
        settlements.filter { $0.deliveryTag == delivery.deliveryTag }
    }

    /// Makes every later settlement throw `error` (e.g. `.staleDelivery`, `.closed`) until called
    /// with nil; failed settlements are not recorded.
    public func failSettlements(with error: AMQPError?) {
        state.withLock { $0.failure = error }
    }

    /// Waits until `count` settlements were recorded, polling every 5 ms.
    /// - Returns: whether they were before `timeout` ran out.
    public func waitForSettlements(_ count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while settlements.count < count {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    fileprivate func record(_ settlement: Settlement) throws(AMQPError) {
        let failure = state.withLock { state -> AMQPError? in
            if let failure = state.failure { return failure }
            state.settlements.append(settlement)
            return nil
        }
        if let failure { throw failure }
    }
}

extension InMemoryAcknowledger: DeliveryAcknowledger {
    /// Records an acknowledgement.
    /// - Throws: the error set by `failSettlements`.
    public func ack(_ delivery: Delivery) async throws(AMQPError) {
        try record(.ack(deliveryTag: delivery.deliveryTag))
    }

    /// Records a negative acknowledgement.
    /// - Throws: the error set by `failSettlements`.
    public func nack(_ delivery: Delivery, requeue: Bool) async throws(AMQPError) {
        try record(.nack(deliveryTag: delivery.deliveryTag, requeue: requeue))
    }
}

/// A consumer fed by the test: deliveries handed to `deliver` arrive in `deliveries`, settlements
/// are recorded by `acknowledger`. Like a broker's consumer, it stops delivering after
/// `stopConsuming()` and refuses settlements after `close()` (`.closed`).
public final class InMemoryConsumer: Sendable {
    private struct State {
        var started = false
        var stopped = false
        var closed = false
        var startFailures: [AMQPError] = []
    }

    /// Records the settlements.
    public let acknowledger = InMemoryAcknowledger()
    public let deliveries: AsyncStream<Delivery>
    private let continuation: AsyncStream<Delivery>.Continuation
    private let state = Mutex(State())

    public init() {
        (deliveries, continuation) = AsyncStream<Delivery>.makeStream()
    }

    /// Hands a delivery to the consumer's stream.
    /// - Returns: false when consuming has stopped (the broker would not deliver it).
    @discardableResult
    public func deliver(_ delivery: Delivery) -> Bool {
        guard !state.withLock({ $0.stopped || $0.closed }) else { return false }
        continuation.yield(delivery)
        return true
    }

    /// Makes the next starts fail with these errors, one each.
    public func failNextStarts(_ errors: AMQPError...) {
        state.withLock { $0.startFailures += errors }
    }

    /// Whether `start()` succeeded.
    public var isStarted: Bool { state.withLock { $0.started } }
    /// Whether `stopConsuming()` was called.
    public var isStopped: Bool { state.withLock { $0.stopped } }
    /// Whether `close()` was called.
    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Starts consuming.
    /// - Throws: the next error of `failNextStarts`.
    nonisolated(nonsending) public func start() async throws(AMQPError) {
        let failure = state.withLock { state -> AMQPError? in
            guard state.startFailures.isEmpty else { return state.startFailures.removeFirst() }
            state.started = true
            return nil
        }
        if let failure { throw failure }
    }

    /// Stops new deliveries; those in flight can still be settled.
    nonisolated(nonsending) public func stopConsuming() async {
        state.withLock { $0.stopped = true }
    }

    /// Closes: `deliveries` finishes, later settlements throw `.closed`.
    nonisolated(nonsending) public func close() async {
        state.withLock { $0.closed = true }
        acknowledger.failSettlements(with: AMQPError(kind: .closed, message: "the consumer is closed"))
        continuation.finish()
    }
}

extension InMemoryConsumer: DeliverySource {
    /// Records an acknowledgement (see `acknowledger`).
    /// - Throws: `.closed` after `close()`.
    public func ack(_ delivery: Delivery) async throws(AMQPError) {
        try await acknowledger.ack(delivery)
    }

    /// Records a negative acknowledgement (see `acknowledger`).
    /// - Throws: `.closed` after `close()`.
    public func nack(_ delivery: Delivery, requeue: Bool) async throws(AMQPError) {
        try await acknowledger.nack(delivery, requeue: requeue)
    }
}
