/// Why a test could not go on: a wait that gave up, a process that would not start or end. Its
/// description says what was expected and what was seen.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Waits that mean "broken", not "busy": each names what it waits for, and when it gives up says
/// for how long it looked, how often, and the last value it saw.
public enum Wait {
    /// Polls `condition` until it holds or `timeout` passes.
    /// - Throws: `TestFailure` naming `what` and how often it was checked, when `timeout` passes
    ///   first; the condition's own error at once.
    public static func until(
        _ what: String,
        timeout: Duration = .seconds(20),
        _ condition: () async throws -> Bool
    ) async throws {
        _ = try await until(what, timeout: timeout, observe: condition, accept: { $0 })
    }

    /// Reads a value with `observe` until `accept` takes it or `timeout` passes, and returns the
    /// accepted value.
    /// - Throws: `TestFailure` naming `what`, how often and for how long it looked, and the last
    ///   value it saw, when `timeout` passes first; `observe`'s own error at once.
    @discardableResult
    public static func until<Value>(
        _ what: String,
        timeout: Duration = .seconds(20),
        observe: () async throws -> Value,
        accept: (Value) -> Bool
    ) async throws -> Value {
        let start = ContinuousClock.now
        var checks = 0
        var last: Value?
        while checks == 0 || ContinuousClock.now < start + timeout {
            let value = try await observe()
            checks += 1
            if accept(value) { return value }
            last = value
            try await Task.sleep(for: .milliseconds(50))
        }
        let seen = last.map { String(describing: $0) } ?? "nothing"
        throw TestFailure(
            "timed out after \(ContinuousClock.now - start) waiting for: \(what) (checked \(checks) times; last seen: \(seen))"
        )
    }
}
