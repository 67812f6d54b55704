import AMQP
import Synchronization
import WorkerRuntime

/// A broker that confirms in memory: records what was published, and can be scripted to refuse
/// messages the way RabbitMQ does (nack, unroutable, a confirm that never comes, any error).
///
/// Each message published, alone or in a batch, takes the next scripted outcome; with none
/// scripted it gets the standing outcome (`confirm` unless `setStandingOutcome` said otherwise).
public final class InMemoryPublisher: Sendable {
    /// What the broker does with one message.
    public enum Outcome: Sendable {
        /// Confirmed (basic.ack): recorded in `published`.
        case confirm
        /// Refused with basic.nack (`.publishNacked`, retriable).
        case nack
        /// No confirm within the timeout (`.timeout`, retriable). Reported at once: nothing waits.
        case timeOut
        /// Returned as unroutable (`.unroutable`, a mandatory message no queue is bound for).
        case unroutable
        /// Refused with this error.
        case fail(AMQPError)
    }

    /// A message that was not confirmed, and why.
    public struct Refusal: Sendable {
        public var message: OutgoingMessage
        public var error: AMQPError
    }

    private struct State {
        var script: [Outcome] = []
        var standing: Outcome = .confirm
        var published: [OutgoingMessage] = []
        var refused: [Refusal] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// The outcomes of the next messages, one each, in order.
    public func script(_ outcomes: Outcome...) {
        state.withLock { $0.script += outcomes }
    }

    /// The outcome of every message once the script is used up (e.g. `.fail` for a broker that is
    /// down, `.confirm` again once it is back).
    public func setStandingOutcome(_ outcome: Outcome) {
        state.withLock { $0.standing = outcome }
    }

    /// Every confirmed message, in the order published.
    public var published: [OutgoingMessage] { state.withLock { $0.published } }

    /// Every message that was not confirmed, in the order published.
    public var refused: [Refusal] { state.withLock { $0.refused } }

    /// The confirmed messages sent to `exchange` (and `routingKey`, when given).
    public func published(to exchange: String, routingKey: String? = nil) -> [OutgoingMessage] {
        published.filter { $0.exchange == exchange && (routingKey == nil || $0.routingKey == routingKey) }
    }

    /// Publishes one message: takes the next outcome.
    /// - Throws: `AMQPError` for any outcome but `.confirm`.
    nonisolated(nonsending) public func publish(_ message: OutgoingMessage, timeout: Duration) async throws(AMQPError) {
        if let error = settle(message) { throw error }
    }

    /// Publishes messages in order, each taking the next outcome.
    /// - Throws: `AMQPBatchError` listing the messages not confirmed (the others were).
    nonisolated(nonsending) public func publish(_ messages: [OutgoingMessage], timeout: Duration) async throws {
        var failures: [Int: AMQPError] = [:]
        for (index, message) in messages.enumerated() {
            if let error = settle(message) { failures[index] = error }
        }
        if !failures.isEmpty { throw AMQPBatchError(failures: failures) }
    }

    private func settle(_ message: OutgoingMessage) -> AMQPError? {
        state.withLock { state in
            let outcome = state.script.isEmpty ? state.standing : state.script.removeFirst()
            let error: AMQPError
            switch outcome {
            case .confirm:
                state.published.append(message)
                return nil
            case .nack:
                error = AMQPError(kind: .publishNacked, message: "the broker nacked the message (scripted)")
            case .timeOut:
                error = AMQPError(kind: .timeout, message: "no confirm within the timeout (scripted)")
            case .unroutable:
                error = AMQPError(
                    kind: .unroutable,
                    message: "no queue is bound for \(message.exchange)/\(message.routingKey) (scripted)"
                )
            case .fail(let scripted):
                error = scripted
            }
            state.refused.append(Refusal(message: message, error: error))
            return error
        }
    }
}

extension InMemoryPublisher: MessagePublisher {}
