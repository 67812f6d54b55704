import Foundation
import Logging

/// A dedicated thread that owns at most one `PostgresConnection` and runs jobs on it in order.
///
/// `@unchecked Sendable`: the mutable job queue and `stopped` flag are only touched while holding
/// `condition`'s lock, and the connection itself lives in a `ConnectionThread.Context` that only the
/// thread's own loop ever sees.
final class ConnectionThread: @unchecked Sendable {
    /// Thread-confined state, handed to jobs on the thread.
    final class Context {
        let configuration: PostgresConfiguration
        var logger: Logger
        var connection: PostgresConnection?
        var lastUsed: ContinuousClock.Instant = .now

        init(configuration: PostgresConfiguration, logger: Logger) {
            self.configuration = configuration
            self.logger = logger
        }
    }

    typealias Job = @Sendable (Context) -> Void

    let id: Int
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var stopped = false
    private var exitWaiters: [CheckedContinuation<Void, Never>] = []
    private var exited = false

    /// Starts the thread.
    init(id: Int, configuration: PostgresConfiguration, logger: Logger) {
        self.id = id
        var logger = logger
        logger[metadataKey: "postgres.pool.thread"] = "\(id)"
        let thread = Thread { [self, logger] in
            self.run(Context(configuration: configuration, logger: logger))
        }
        thread.name = "postgres-connection-\(id)"
        thread.start()
    }

    private func run(_ context: Context) {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                break
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job(context)
        }
        context.connection?.close()
        context.connection = nil
        condition.lock()
        exited = true
        let waiters = exitWaiters
        exitWaiters = []
        condition.unlock()
        for waiter in waiters { waiter.resume() }
    }

    /// Queues a job; false if the thread is stopping.
    @discardableResult
    func submit(_ job: @escaping Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopped else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `work` on the thread and returns its result to the awaiting caller.
    /// - Throws: `work`'s error, or `.poolClosed` if the thread is stopping.
    func run<T: Sendable>(_ work: @escaping @Sendable (Context) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let queued = submit { context in
                continuation.resume(with: Result { try work(context) })
            }
            if !queued {
                continuation.resume(
                    throwing: PostgresError(kind: .poolClosed, message: "the connection pool is closed")
                )
            }
        }
    }

    /// Lets queued jobs finish, then closes the connection and ends the thread (without waiting).
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    /// Waits until the thread has closed its connection and ended.
    func waitForExit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if exited {
                condition.unlock()
                continuation.resume()
            } else {
                exitWaiters.append(continuation)
                condition.unlock()
            }
        }
    }
}
