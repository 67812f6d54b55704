import Synchronization

/// The finished spans waiting for export: bounded, never blocking. A span that finds the buffer
/// full is dropped and counted, so a slow or absent collector costs memory up to the bound and
/// nothing else — job processing never waits for it.
public final class SpanBuffer: Sendable {
    private struct State {
        var spans: [SpanRecord] = []
        var dropped = 0
    }

    private let state = Mutex(State())
    /// Spans held at most.
    public let capacity: Int

    /// - Parameter capacity: spans held at most (at least 1).
    public init(capacity: Int) { self.capacity = max(1, capacity) }

    /// Adds a span unless the buffer is full.
    /// - Returns: the spans now held, or nil when the span was dropped.
    @discardableResult
    public func append(_ span: SpanRecord) -> Int? {
        state.withLock { state in
            guard state.spans.count < capacity else {
                state.dropped += 1
                return nil
            }
            state.spans.append(span)
            return state.spans.count
        }
    }

    /// Takes up to `limit` spans, oldest first.
    public func take(limit: Int) -> [SpanRecord] {
        state.withLock { state in
            let count = min(max(0, limit), state.spans.count)
            defer { state.spans.removeFirst(count) }
            return Array(state.spans.prefix(count))
        }
    }

    /// Spans held now.
    public var count: Int { state.withLock { $0.spans.count } }

    /// Spans dropped because the buffer was full, since it was made.
    public var dropped: Int { state.withLock { $0.dropped } }
}
