import AMQP
import ArgumentParser
import Foundation

/// Retry settings that name the delay queues (they must match the workers' to share queues).
struct RetryOptions: ParsableArguments {
    @Option(parsing: .unconditional, help: "Attempts before dead-lettering (workers: MAX_ATTEMPTS).")
    var maxAttempts: Int = Int(ProcessInfo.processInfo.environment["MAX_ATTEMPTS"] ?? "") ?? 5

    @Option(parsing: .unconditional, help: "First retry delay in ms (workers: RETRY_INITIAL_DELAY_MS).")
    var retryInitialDelayMs: Int = Int(ProcessInfo.processInfo.environment["RETRY_INITIAL_DELAY_MS"] ?? "") ?? 1000

    @Option(parsing: .unconditional, help: "Retry delay cap in ms (workers: RETRY_MAX_DELAY_MS).")
    var retryMaxDelayMs: Int = Int(ProcessInfo.processInfo.environment["RETRY_MAX_DELAY_MS"] ?? "") ?? 60000

    @Option(help: "classic or quorum (workers: QUEUE_TYPE).")
    var queueType: String = ProcessInfo.processInfo.environment["QUEUE_TYPE"] ?? "classic"

    func validate() throws {
        guard maxAttempts >= 1 else { throw ValidationError("--max-attempts must be at least 1") }
        guard retryInitialDelayMs >= 1, retryMaxDelayMs >= retryInitialDelayMs else {
            throw ValidationError("--retry-max-delay-ms must be at least --retry-initial-delay-ms (both ≥ 1)")
        }
        guard QueueSpec.QueueType(rawValue: queueType) != nil else {
            throw ValidationError("--queue-type must be classic or quorum, not \(queueType.debugDescription)")
        }
    }
}
