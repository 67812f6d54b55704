import Foundation
import Logging
import Synchronization

/// A bounded pool of PostgreSQL connections, each confined to its own dedicated thread.
///
/// Callers `await` a lease; the body then runs synchronously on the leased connection's thread, never
/// on the Swift concurrency pool. Connections open lazily up to `maxConnections`; broken ones are
/// discarded and replaced on their next lease.
public final class PostgresPool: Sendable {
    /// Pool settings.
    public struct Options: Sendable {
        /// The most connections (and threads) the pool opens.
        public var maxConnections: Int
        /// How long a caller waits for a free connection before `.poolTimeout`.
        public var acquireTimeout: Duration
        /// A connection idle this long is checked for a dead server before it is handed out.
        public var idleCheckAfter: Duration

        /// Makes options; every setting has a default.
        public init(
            maxConnections: Int = 8,
            acquireTimeout: Duration = .seconds(5),
            idleCheckAfter: Duration = .seconds(10)
        ) {
            self.maxConnections = maxConnections
            self.acquireTimeout = acquireTimeout
            self.idleCheckAfter = idleCheckAfter
        }
    }

    /// A snapshot of the pool's counters.
    public struct Statistics: Sendable {
        /// Connections currently open.
        public var open: Int
        /// Connections (threads) leased to callers right now.
        public var leased: Int
        /// Callers waiting for a lease.
        public var waiting: Int
        /// The pool's bound.
        public var maxConnections: Int
        /// Connections opened since the pool was made (replacements included).
        public var connectionsOpened: Int
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<ConnectionThread, any Error>
        /// Waiters queue in FIFO order with one timeout, so the first has the earliest deadline.
        let deadline: ContinuousClock.Instant
    }

    private struct State {
        var threads: [ConnectionThread] = []
        var idle: [ConnectionThread] = []
        var leased = 0
        var open = 0
        var opened = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var closed = false
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        /// Whether the one task that times waiters out is running (it stops when none wait).
        var timerRunning = false
    }

    private let configuration: PostgresConfiguration
    private let options: Options
    private let logger: Logger
    private let state = Mutex(State())

    /// Makes a pool; no connection opens until the first lease.
    public init(configuration: PostgresConfiguration, options: Options = .init(), logger: Logger) {
        self.configuration = configuration
        var options = options
        options.maxConnections = max(1, options.maxConnections)
        self.options = options
        self.logger = logger
    }

    deinit {
        let threads = state.withLock { $0.threads }
        for thread in threads { thread.stop() }
    }

    /// Leases a connection, runs `body` on that connection's thread, and returns the connection.
    ///
    /// Waits up to `acquireTimeout` when all connections are busy. A connection idle for
    /// `idleCheckAfter` or longer is checked first and replaced if the server dropped it. A connection
    /// that is broken after `body` (or whose `body` threw a connection-loss error) is discarded; an
    /// open transaction left behind by `body` is rolled back.
    /// - Important: `body` runs synchronously on the connection's dedicated thread; it must not block
    ///   on async work. Do not keep the connection after `body` returns.
    /// - Returns: What `body` returned.
    /// - Throws: `.poolTimeout`, `.poolClosed`, `CancellationError` while waiting, `.connectionFailed`
    ///   when a connection cannot be opened, or the body's error.
    public func withConnection<T: Sendable>(
        _ body: @Sendable @escaping (PostgresConnection) throws -> T
    ) async throws -> T {
        let thread = try await acquire()
        let result: Result<T, any Error>
        do {
            result = .success(
                try await thread.run { [configuration, options, logger] context in
                    try Self.runLeased(
                        context,
                        configuration: configuration,
                        options: options,
                        logger: logger,
                        pool: self,
                        body: body
                    )
                }
            )
        } catch {
            result = .failure(error)
        }
        release(thread)
        return try result.get()
    }

    /// Leases a connection and runs `body` in a transaction on it (see `PostgresConnection.withTransaction`).
    /// - Throws: as `withConnection(_:)` and `PostgresConnection.withTransaction(isolation:_:)`.
    public func withTransaction<T: Sendable>(
        isolation: PostgresConnection.IsolationLevel = .readCommitted,
        _ body: @Sendable @escaping (PostgresConnection) throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try connection.withTransaction(isolation: isolation, body)
        }
    }

    /// Runs `SELECT 1` through the pool, for readiness probes.
    /// - Returns: false on any failure.
    public func ping() async -> Bool {
        do {
            return try await withConnection { connection in
                try connection.query("SELECT 1 AS ok").first?.decode(Int.self, "ok") == 1
            }
        } catch {
            return false
        }
    }

    /// The pool's current counters.
    public var statistics: Statistics {
        state.withLock { state in
            Statistics(
                open: state.open,
                leased: state.leased,
                waiting: state.waiters.count,
                maxConnections: options.maxConnections,
                connectionsOpened: state.opened
            )
        }
    }

    /// Closes the pool: waiting and later callers get `.poolClosed`; waits for leased connections to
    /// come back, then closes every connection and ends the threads. Idempotent.
    public func close() async {
        let waiters = state.withLock { state in
            state.closed = true
            let waiters = state.waiters
            state.waiters = []
            return waiters
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: Self.closedError())
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let drained = state.withLock { state in
                if state.leased == 0 { return true }
                state.drainWaiters.append(continuation)
                return false
            }
            if drained { continuation.resume() }
        }
        let threads = state.withLock { state in
            state.idle = []
            return state.threads
        }
        for thread in threads { thread.stop() }
        for thread in threads { await thread.waitForExit() }
        state.withLock { $0.open = 0 }
        logger.debug("postgres pool closed")
    }

    // MARK: - Leasing

    private static func closedError() -> PostgresError {
        PostgresError(kind: .poolClosed, message: "the connection pool is closed")
    }

    private enum Decision {
        case lease(ConnectionThread)
        case fail(any Error)
        case wait(startTimer: Bool)
    }

    /// Takes an idle thread, starts a new one below the bound, or waits in FIFO order.
    private func acquire() async throws -> ConnectionThread {
        let waiterID = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<ConnectionThread, any Error>) in
                let decision = state.withLock { state -> Decision in
                    if state.closed { return .fail(Self.closedError()) }
                    if Task.isCancelled { return .fail(CancellationError()) }
                    if let thread = state.idle.popLast() {
                        state.leased += 1
                        return .lease(thread)
                    }
                    if state.threads.count < options.maxConnections {
                        let thread = ConnectionThread(
                            id: state.threads.count + 1,
                            configuration: configuration,
                            logger: logger
                        )
                        state.threads.append(thread)
                        state.leased += 1
                        return .lease(thread)
                    }
                    let deadline = ContinuousClock.now.advanced(by: options.acquireTimeout)
                    state.waiters.append(Waiter(id: waiterID, continuation: continuation, deadline: deadline))
                    let startTimer = !state.timerRunning
                    state.timerRunning = true
                    return .wait(startTimer: startTimer)
                }
                switch decision {
                case .lease(let thread):
                    continuation.resume(returning: thread)
                case .fail(let error):
                    continuation.resume(throwing: error)
                case .wait(let startTimer):
                    if startTimer { Task { await self.timeOutWaiters() } }
                }
            }
        } onCancel: {
            self.removeWaiter(waiterID, error: CancellationError())
        }
    }

    /// Fails every waiter whose deadline passed, sleeping until the first one's, for as long as
    /// anyone waits. One task per pool rather than a sleeping task per waiter: a cancelled
    /// `Task.sleep` keeps its timer and its task's memory until the deadline it was given, and
    /// at thousands of waits per second those add up to tens of megabytes (measured in the
    /// gateway: issue 16's memory goal).
    private func timeOutWaiters() async {
        while true {
            let now = ContinuousClock.now
            let (expired, next) = state.withLock { state -> ([Waiter], ContinuousClock.Instant?) in
                var expired: [Waiter] = []
                while let first = state.waiters.first, first.deadline <= now {
                    expired.append(state.waiters.removeFirst())
                }
                guard let first = state.waiters.first else {
                    state.timerRunning = false
                    return (expired, nil)
                }
                return (expired, first.deadline)
            }
            if !expired.isEmpty {
                let error = PostgresError(
                    kind: .poolTimeout,
                    message:
                        "no connection became free within \(Self.format(options.acquireTimeout)) "
                        + "(pool of \(options.maxConnections) connections, all leased)"
                )
                for waiter in expired { waiter.continuation.resume(throwing: error) }
            }
            guard let next else { return }
            // Not cancellable on purpose: this sleep always runs to its deadline, so no timer
            // outlives it.
            try? await Task.sleep(until: max(next, now.advanced(by: .milliseconds(1))), clock: .continuous)
        }
    }

    private func removeWaiter(_ waiterID: UInt64, error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == waiterID }) else { return nil }
            return state.waiters.remove(at: index)
        }
        guard let waiter else { return }
        waiter.continuation.resume(throwing: error)
    }

    /// Hands the thread to the first waiter, or back to the idle list.
    private func release(_ thread: ConnectionThread) {
        let (waiter, drained) = state.withLock { state -> (Waiter?, [CheckedContinuation<Void, Never>]) in
            if !state.closed, !state.waiters.isEmpty {
                return (state.waiters.removeFirst(), [])
            }
            state.leased -= 1
            state.idle.append(thread)
            guard state.closed, state.leased == 0 else { return (nil, []) }
            let drained = state.drainWaiters
            state.drainWaiters = []
            return (nil, drained)
        }
        if let waiter {
            waiter.continuation.resume(returning: thread)
        }
        for continuation in drained { continuation.resume() }
    }

    // MARK: - On the connection's thread

    private static func runLeased<T>(
        _ context: ConnectionThread.Context,
        configuration: PostgresConfiguration,
        options: Options,
        logger: Logger,
        pool: PostgresPool,
        body: (PostgresConnection) throws -> T
    ) throws -> T {
        let connection = try usableConnection(context, options: options, pool: pool)
        defer { context.lastUsed = .now }
        do {
            let value = try body(connection)
            settle(context, connection, error: nil, pool: pool)
            return value
        } catch {
            settle(context, connection, error: error, pool: pool)
            throw error
        }
    }

    /// The thread's connection if it is alive, else a new one.
    private static func usableConnection(
        _ context: ConnectionThread.Context,
        options: Options,
        pool: PostgresPool
    ) throws(PostgresError) -> PostgresConnection {
        if let connection = context.connection {
            if connection.isBroken {
                discard(context, reason: "broken", pool: pool)
            } else if ContinuousClock.now - context.lastUsed >= options.idleCheckAfter, !connection.checkIdle() {
                discard(context, reason: "dead after idling", pool: pool)
            } else {
                return connection
            }
        }
        let connection = try PostgresConnection.connect(context.configuration, logger: context.logger)
        context.connection = connection
        pool.state.withLock { state in
            state.open += 1
            state.opened += 1
        }
        return connection
    }

    /// After a body: drops a broken connection and rolls back a transaction the body left open.
    private static func settle(
        _ context: ConnectionThread.Context,
        _ connection: PostgresConnection,
        error: (any Error)?,
        pool: PostgresPool
    ) {
        if connection.isBroken || (error as? PostgresError)?.isConnectionLoss == true {
            discard(context, reason: "connection lost", pool: pool)
        } else if connection.isInTransaction {
            do {
                try connection.executeScript("ROLLBACK")
            } catch {
                discard(context, reason: "rollback of a leaked transaction failed", pool: pool)
            }
        }
    }

    private static func discard(_ context: ConnectionThread.Context, reason: String, pool: PostgresPool) {
        guard let connection = context.connection else { return }
        context.logger.info("postgres connection discarded", metadata: ["postgres.reason": "\(reason)"])
        connection.close()
        context.connection = nil
        pool.state.withLock { $0.open -= 1 }
    }

    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 && milliseconds > 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
