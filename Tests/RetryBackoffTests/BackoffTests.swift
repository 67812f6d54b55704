import RetryBackoff
import Testing

@Suite("Backoff")
struct BackoffTests {
    @Test func theCeilingGrowsByTheMultiplierUpToTheCap() {
        let backoff = Backoff(initialDelay: .milliseconds(100), maxDelay: .seconds(1), multiplier: 3, jitter: 0)
        #expect(
            (1...5).map { backoff.ceiling(afterAttempt: $0) } == [
                .milliseconds(100), .milliseconds(300), .milliseconds(900), .seconds(1), .seconds(1),
            ]
        )
        #expect(backoff.steps == [.milliseconds(100), .milliseconds(300), .milliseconds(900), .seconds(1)])
        // Attempt numbers below 1 count as 1; a huge one is the cap.
        #expect(backoff.ceiling(afterAttempt: 0) == .milliseconds(100))
        #expect(backoff.ceiling(afterAttempt: .max) == .seconds(1))
    }

    @Test func jitterTakesItsShareOffTheCeiling() {
        let full = Backoff(initialDelay: .seconds(2), maxDelay: .seconds(8), jitter: 1)
        #expect(full.delay(afterAttempt: 2, random: 0) == .zero)
        #expect(full.delay(afterAttempt: 2, random: 0.5) == .seconds(2))
        #expect(full.delay(afterAttempt: 2, random: 1) == .seconds(4))
        let half = Backoff(initialDelay: .seconds(2), maxDelay: .seconds(8), jitter: 0.5)
        #expect(half.delay(afterAttempt: 1, random: 0) == .seconds(1))
        #expect(half.delay(afterAttempt: 1, random: 1) == .seconds(2))
        let none = Backoff(initialDelay: .seconds(2), maxDelay: .seconds(8), jitter: 0)
        #expect(none.delay(afterAttempt: 3, random: 0) == .seconds(8))
        // Out-of-range draws and shares are forced into range.
        #expect(full.delay(afterAttempt: 1, random: 7) == .seconds(2))
        #expect(full.delay(afterAttempt: 1, random: -1) == .zero)
        #expect(
            Backoff(initialDelay: .seconds(1), maxDelay: .seconds(1), jitter: 3).delay(afterAttempt: 1, random: 0)
                == .zero
        )
    }

    @Test func oddValuesStaySane() {
        // No growth: one step.
        #expect(
            Backoff(initialDelay: .seconds(1), maxDelay: .seconds(9), multiplier: 0.5, jitter: 0).steps == [.seconds(1)]
        )
        // A cap below the initial delay is raised to it; a negative delay is zero.
        #expect(
            Backoff(initialDelay: .seconds(3), maxDelay: .seconds(1), jitter: 0).ceiling(afterAttempt: 4) == .seconds(3)
        )
        #expect(Backoff(initialDelay: .seconds(-1), maxDelay: .seconds(1), jitter: 0).ceiling(afterAttempt: 2) == .zero)
        #expect(Backoff(initialDelay: .zero, maxDelay: .seconds(1), jitter: 0).steps == [.zero])
    }

    @Test func attemptsAreBoundedOnlyWhenAsked() {
        let three = Backoff(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(1), jitter: 0)
        #expect(three.allowsAttempt(after: 2))
        #expect(!three.allowsAttempt(after: 3))
        #expect(Backoff(initialDelay: .seconds(1), maxDelay: .seconds(1), jitter: 0).allowsAttempt(after: 1_000_000))
    }
}
