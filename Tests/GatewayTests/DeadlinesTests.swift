import Synchronization
import Testing

@testable import Gateway

/// The shared request timer: actions fire at their deadline (never before, at most a resolution
/// after), cancelled ones never fire, and the timer stops when nothing is registered.
@Suite("Deadlines")
struct DeadlinesTests {
    @Test func anActionFiresAtItsDeadlineNotBefore() async throws {
        let deadlines = Deadlines(resolution: .milliseconds(10))
        let fired = Mutex<ContinuousClock.Instant?>(nil)
        let start = ContinuousClock.now
        _ = deadlines.schedule(after: .milliseconds(150)) { fired.withLock { $0 = .now } }
        try await Task.sleep(for: .milliseconds(100))
        #expect(fired.withLock { $0 } == nil)
        let deadline = ContinuousClock.now + .seconds(5)
        while fired.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let at = try #require(fired.withLock { $0 })
        #expect(at - start >= .milliseconds(150))
        #expect(deadlines.pending == 0)
    }

    @Test func aCancelledActionNeverFires() async throws {
        let deadlines = Deadlines(resolution: .milliseconds(10))
        let count = Mutex<Int>(0)
        let token = deadlines.schedule(after: .milliseconds(30)) { count.withLock { $0 += 1 } }
        _ = deadlines.schedule(after: .milliseconds(30)) { count.withLock { $0 += 10 } }
        deadlines.cancel(token)
        #expect(deadlines.pending == 1)
        // Bounded polling, not a fixed sleep: on a loaded machine the timer may run late.
        let deadline = ContinuousClock.now + .seconds(5)
        while count.withLock({ $0 }) == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        // Long after the cancelled one's deadline, only the other one has fired.
        try await Task.sleep(for: .milliseconds(100))
        #expect(count.withLock { $0 } == 10)
        #expect(deadlines.pending == 0)
    }

    @Test func manyRegistrationsCostNothingOnceCancelled() async throws {
        // The reason for the type: 10,000 waits that end early leave no timer behind.
        let deadlines = Deadlines(resolution: .milliseconds(10))
        let tokens = (0..<10_000).map { _ in deadlines.schedule(after: .seconds(30)) {} }
        #expect(deadlines.pending == 10_000)
        for token in tokens { deadlines.cancel(token) }
        #expect(deadlines.pending == 0)
        // The timer restarts after it stopped for want of registrations.
        try await Task.sleep(for: .milliseconds(50))
        let fired = Mutex<Bool>(false)
        _ = deadlines.schedule(after: .milliseconds(20)) { fired.withLock { $0 = true } }
        let deadline = ContinuousClock.now + .seconds(5)
        while !fired.withLock({ $0 }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(fired.withLock { $0 })
    }
}
