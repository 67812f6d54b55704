import AMQP
import AstroDomain
import Foundation
import Synchronization
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// A failure a test handler throws, classified as a service's error would be.
struct ScriptedFailure: Error, RetryClassifiedError, CustomStringConvertible {
    var failureCode: String
    var isTransient: Bool
    var description: String { "scripted \(isTransient ? "transient" : "permanent") failure" }
}

/// A gate that holds what waits on it until opened; waiting is cancellable.
final class Gate: Sendable {
    private let state = Mutex((open: false, waiting: 0))

    var waiting: Int { state.withLock { $0.waiting } }

    func open() { state.withLock { $0.open = true } }

    /// - Throws: `CancellationError` when the waiting task is cancelled first.
    func wait() async throws {
        state.withLock { $0.waiting += 1 }
        defer { state.withLock { $0.waiting -= 1 } }
        while !state.withLock({ $0.open }) {
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// The job type of the test handler, and what it does with a job: its body's fields say.
///
/// - `prepare`: `transient` or `permanent` (a classified failure), `reject` (invalid input),
///   `interrupt` (a shutdown's cancellation, as a crash leaves a delivery unsettled), `wait`
///   (until `gate` opens).
/// - `commit`: `reject` (a constraint the job's rows violate).
/// - `events`: how many events its outcome publishes.
///
/// A committed job writes the record `job:<id>` through the store's transaction.
final class TestHandler: Sendable {
    static let jobType: JobType = "test.sample"
    static let doneEvent = "test.sample.done"
    static let refund: JobType = "test.refund"

    let gate = Gate()
    private let counts = Mutex((prepares: [JobID: Int](), prepared: 0, commits: [JobID: Int]()))

    struct Script: Decodable, Sendable {
        var prepare: String?
        var commit: String?
        var events: Int?
    }

    func prepares(of id: JobID) -> Int { counts.withLock { $0.prepares[id] ?? 0 } }
    func commits(of id: JobID) -> Int { counts.withLock { $0.commits[id] ?? 0 } }
    var preparesInAll: Int { counts.withLock { $0.prepares.values.reduce(0, +) } }
    /// Prepares that returned: each job's next step, queueing for its commit, has no suspension
    /// point in between.
    var preparedInAll: Int { counts.withLock { $0.prepared } }

    var handler: InMemoryJobHandler { handler(looksUpBeforePrepare: true) }

    /// The handler; `looksUpBeforePrepare` as `JobHandler.looksUpBeforePrepare`.
    func handler(looksUpBeforePrepare: Bool) -> InMemoryJobHandler {
        InMemoryJobHandler(
            jobType: Self.jobType,
            prepare: { [self] job in
                counts.withLock { $0.prepares[job.jobID, default: 0] += 1 }
                let script = try job.decode(Script.self)
                switch script.prepare {
                case "transient": throw ScriptedFailure(failureCode: "test-transient", isTransient: true)
                case "permanent": throw ScriptedFailure(failureCode: "test-permanent", isTransient: false)
                case "reject": throw JobRejection(code: "test-invalid", message: "the test said so")
                case "refuse": throw JobRejection(code: .duplicateProfileName, message: "a profile is named so")
                case "refuse-broken": throw JobRejection(code: .invalidPayload, message: "missing field 'name'")
                case "interrupt": throw CancellationError()
                case "wait": try await gate.wait()
                default: break
                }
                counts.withLock { $0.prepared += 1 }
                return script
            },
            commit: { [self] script, job, transaction in
                counts.withLock { $0.commits[job.jobID, default: 0] += 1 }
                if script.commit == "reject" {
                    throw JobRejection(code: "test-constraint", message: "a row of this job violates a constraint")
                }
                transaction.write("done", forKey: "job:\(job.jobID)")
                let events = (0..<(script.events ?? 0)).map { index in
                    OutboxMessage(
                        exchange: BrokerNames.eventsExchange,
                        routingKey: Self.doneEvent,
                        body: Data("{\"jobId\":\"\(job.jobID)\",\"n\":\(index)}".utf8),
                        mandatory: false
                    )
                }
                return JobOutcome(result: ["ok": true], messages: events)
            },
            compensation: { job, _ in
                [OutboxMessage.job(Self.refund, body: Data("{\"jobId\":\"\(job.jobID)\"}".utf8))]
            },
            looksUpBeforePrepare: looksUpBeforePrepare
        )
    }
}

/// Waits until `condition` holds, polling every 2 ms.
/// - Returns: whether it held before `timeout`.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}

extension OutgoingMessage {
    /// A header's text or number, as text.
    func header(_ name: String) -> String? {
        switch properties.headers[name] {
        case .string(let text)?: text
        case .int(let number)?: String(number)
        default: nil
        }
    }
}

/// Retry delays short enough for tests (the delay queues' names carry them).
let testRetryPolicy = RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(100), maxDelay: .milliseconds(400))
