import AstroDomain
import Foundation
import Synchronization
import WorkerRuntime

/// A job store in memory: the `jobs` rows (status, attempts, error, result), the outbox rows and
/// the delivery counts the runtime keeps in PostgreSQL, with the same rules, so the runtime's
/// processor, group commit and outbox relay run against it unchanged.
///
/// Transactions are serialized and atomic: `withTransaction` works on a copy of the state that
/// replaces it only when the body returns, so a throwing handler or a failing step leaves nothing
/// behind, as a rollback would. Handlers commit through `Transaction`, whose key-value records
/// stand in for the rows a real handler writes, and roll back with the rest.
///
/// Faults can be scripted: the store made unavailable, the next transactions failed, a job left out
/// of a claim's answer; and transactions can be held back (`pauseTransactions`), so that jobs
/// queue up behind one another as they do behind a slow commit.
///
/// - Important: read the store (`jobs`, `outbox`, …) between operations, never from inside a
///   transaction's body (a handler's commit): the store's lock is held there. Inside, use the
///   `Transaction`.
public final class InMemoryJobStore: Sendable {
    /// A row of `jobs`.
    public struct JobRow: Sendable, Hashable {
        public var id: JobID
        public var kind: String
        public var status: JobStatus
        public var attempts: Int
        public var result: JSONValue?
        public var error: JobError?
        public var userID: UUID?

        public init(
            id: JobID,
            kind: String,
            status: JobStatus,
            attempts: Int = 1,
            result: JSONValue? = nil,
            error: JobError? = nil,
            userID: UUID? = nil
        ) {
            self.id = id
            self.kind = kind
            self.status = status
            self.attempts = attempts
            self.result = result
            self.error = error
            self.userID = userID
        }
    }

    /// A row of `outbox`.
    public struct OutboxRow: Sendable, Hashable {
        public var id: Int64
        public var messageID: UUID
        public var message: OutboxMessage
        public var jobID: JobID?
        public var contentType: String
        /// Published and confirmed.
        public var isSent: Bool
        /// Failed publishing rounds.
        public var attempts: Int
        public var lastError: String?
        /// Held by a relay until then (claimed at insert, or by a relay's round).
        public var claimedUntil: ContinuousClock.Instant?
    }

    /// The state a transaction works on.
    struct State {
        var jobs: [JobID: JobRow] = [:]
        var outbox: [OutboxRow] = []
        var nextOutboxID: Int64 = 1
        var deliveries: [DeliveryKey: Int] = [:]
        var records: [String: String] = [:]
    }

    struct DeliveryKey: Hashable {
        var queue: String
        var body: Data
    }

    /// Scripted faults, and what happened: kept outside `State` so a rollback does not undo them.
    struct Script {
        var unavailable: (any Error)?
        var failingTransactions: [any Error] = []
        var omittedClaims: Set<JobID> = []
        var writesUnclaimed = false
        var claims: [[JobID]] = []
        var committedTransactions = 0
        var paused = false
        var waitingTransactions = 0
    }

    private let state = Mutex(State())
    private let script = Mutex(Script())

    public init() {}

    // MARK: - Transactions

    /// What a transaction's statements and a handler's commit run on: the store's state as this
    /// transaction sees it (its own writes included).
    ///
    /// - Important: use it only inside the body it was given to.
    public final class Transaction {
        var state: State

        init(_ state: State) {
            self.state = state
        }

        /// Writes a record, as a handler writes its rows: committed with the job, or rolled back.
        public func write(_ value: String, forKey key: String) {
            state.records[key] = value
        }

        /// A record as this transaction sees it.
        public func value(forKey key: String) -> String? {
            state.records[key]
        }

        /// A job's row as this transaction sees it.
        public func job(_ id: JobID) -> JobRow? {
            state.jobs[id]
        }
    }

    /// Runs `body` on a copy of the state that replaces the state when `body` returns: all or
    /// nothing. Transactions run one at a time.
    /// - Throws: a scripted fault (`makeUnavailable`, `failNextTransactions`), or what `body` throws.
    package func withTransaction<T: Sendable>(
        _ body: @Sendable @escaping (Transaction) throws -> T
    ) async throws -> T {
        try await waitWhilePaused()
        try takeFault(transaction: true)
        let result = try state.withLock { state throws -> T in
            let transaction = Transaction(state)
            let result = try body(transaction)
            state = transaction.state
            return result
        }
        script.withLock { $0.committedTransactions += 1 }
        return result
    }

    /// Runs `body` with each statement taking effect at once: what it did before throwing stays.
    /// - Throws: a scripted fault (`makeUnavailable`), or what `body` throws.
    package func withConnection<T: Sendable>(
        _ body: @Sendable @escaping (Transaction) throws -> T
    ) async throws -> T {
        try takeFault(transaction: false)
        return try state.withLock { state throws -> T in
            let transaction = Transaction(state)
            defer { state = transaction.state }
            return try body(transaction)
        }
    }

    private func waitWhilePaused() async throws {
        guard script.withLock({ $0.paused }) else { return }
        script.withLock { $0.waitingTransactions += 1 }
        defer { script.withLock { $0.waitingTransactions -= 1 } }
        // Polling keeps a held transaction cancellable; tests are not a hot path.
        while script.withLock({ $0.paused }) {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    private func takeFault(transaction: Bool) throws {
        let fault = script.withLock { script -> (any Error)? in
            if let error = script.unavailable { return error }
            guard transaction, !script.failingTransactions.isEmpty else { return nil }
            return script.failingTransactions.removeFirst()
        }
        if let fault { throw fault }
    }

    // MARK: - Scripting

    /// Makes every operation throw `error` (a database outage) until `makeAvailable()`.
    public func makeUnavailable(throwing error: any Error) {
        script.withLock { $0.unavailable = error }
    }

    /// Ends an outage begun by `makeUnavailable`.
    public func makeAvailable() {
        script.withLock { $0.unavailable = nil }
    }

    /// Makes the next `count` transactions fail with `error` before their body runs.
    public func failNextTransactions(_ count: Int = 1, throwing error: any Error) {
        script.withLock { $0.failingTransactions += Array(repeating: error, count: count) }
    }

    /// Leaves `jobID` out of every claim's answer, as a store that lost track of the job's row
    /// would (the runtime must not take the job for finished).
    /// As `JobStorage.writesFirstDeliveriesUnclaimed`; off unless a test turns it on, so the
    /// claiming way stays what most tests see.
    package var writesFirstDeliveriesUnclaimed: Bool {
        get { script.withLock { $0.writesUnclaimed } }
        set { script.withLock { $0.writesUnclaimed = newValue } }
    }

    public func omitFromClaims(_ jobID: JobID) {
        script.withLock { _ = $0.omittedClaims.insert(jobID) }
    }

    /// Holds every transaction that begins from now on before it starts, until
    /// `resumeTransactions()`: as a commit slowed by the disk, it lets jobs queue up behind it.
    public func pauseTransactions() {
        script.withLock { $0.paused = true }
    }

    /// Lets held transactions go on.
    public func resumeTransactions() {
        script.withLock { $0.paused = false }
    }

    /// How many transactions are being held by `pauseTransactions`.
    public var waitingTransactions: Int { script.withLock { $0.waitingTransactions } }

    /// Ends every relay's hold on unsent outbox rows, as if their leases and back-off pauses had
    /// run out.
    public func expireOutboxClaims() {
        state.withLock { state in
            for index in state.outbox.indices { state.outbox[index].claimedUntil = nil }
        }
    }

    /// Adds or replaces a job's row (e.g. a job that finished before a test's delivery).
    public func insert(_ row: JobRow) {
        state.withLock { $0.jobs[row.id] = row }
    }

    // MARK: - Inspection

    /// Every job row, in no particular order.
    public var jobs: [JobRow] { state.withLock { Array($0.jobs.values) } }

    /// A job's row.
    public func job(_ id: JobID) -> JobRow? { state.withLock { $0.jobs[id] } }

    /// Every outbox row, oldest first.
    public var outbox: [OutboxRow] { state.withLock { $0.outbox } }

    /// The outbox rows of a job, oldest first.
    public func outbox(of jobID: JobID) -> [OutboxRow] { outbox.filter { $0.jobID == jobID } }

    /// A committed record (see `Transaction.write`).
    public func value(forKey key: String) -> String? { state.withLock { $0.records[key] } }

    /// The deliveries counted for a message.
    public func deliveries(queue: String, body: Data) -> Int {
        state.withLock { $0.deliveries[DeliveryKey(queue: queue, body: body)] ?? 0 }
    }

    /// The job ids of each claim, in the order they were made, committed or not: a group commit
    /// claims a batch's jobs together.
    public var claims: [[JobID]] { script.withLock { $0.claims } }

    /// How many transactions committed.
    public var committedTransactions: Int { script.withLock { $0.committedTransactions } }
}

extension InMemoryJobStore: JobStorage {
    package func claim(_ jobs: [JobClaimRequest], in transaction: Transaction) throws -> [JobID: JobClaim] {
        let omitted = script.withLock { script in
            script.claims.append(jobs.map(\.jobID))
            return script.omittedClaims
        }
        var claims: [JobID: JobClaim] = [:]
        for request in jobs where !omitted.contains(request.jobID) {
            if let row = transaction.state.jobs[request.jobID],
                row.status.isTerminal || row.kind != request.kind.rawValue
            {
                claims[request.jobID] = JobClaim.unclaimed(
                    RecordedJob(status: row.status, kind: row.kind),
                    kind: request.kind
                )
                continue
            }
            var row =
                transaction.state.jobs[request.jobID]
                ?? JobRow(id: request.jobID, kind: request.kind.rawValue, status: .running)
            row.status = .running
            row.attempts = request.attempt
            transaction.state.jobs[request.jobID] = row
            claims[request.jobID] = .claimed
        }
        return claims
    }

    package func recorded(_ jobID: JobID, in transaction: Transaction) throws -> RecordedJob? {
        transaction.state.jobs[jobID].map { RecordedJob(status: $0.status, kind: $0.kind) }
    }

    package func finish(_ jobs: [JobFinish], in transaction: Transaction) throws -> Set<JobID> {
        var written: Set<JobID> = []
        for job in jobs {
            let existing = transaction.state.jobs[job.jobID]
            if let existing, existing.status.isTerminal || existing.kind != job.kind.rawValue { continue }
            transaction.state.jobs[job.jobID] = JobRow(
                id: job.jobID,
                kind: job.kind.rawValue,
                status: job.status,
                attempts: job.attempts,
                result: job.result,
                error: job.error,
                userID: job.userID ?? existing?.userID
            )
            written.insert(job.jobID)
        }
        return written
    }

    package func enqueue(
        _ messages: [(message: OutboxMessage, jobID: JobID?)],
        lease: Duration?,
        in transaction: Transaction
    ) throws -> [PendingOutboxMessage] {
        let claimedUntil = lease.map { ContinuousClock.now + $0 }
        return messages.map { item in
            let row = OutboxRow(
                id: transaction.state.nextOutboxID,
                messageID: UUID(),
                message: item.message,
                jobID: item.jobID,
                contentType: "application/json",
                isSent: false,
                attempts: 0,
                lastError: nil,
                claimedUntil: claimedUntil
            )
            transaction.state.nextOutboxID += 1
            transaction.state.outbox.append(row)
            return Self.pending(row)
        }
    }

    package func recordAttempt(
        jobID: JobID,
        kind: JobType,
        attempt: Int,
        error: JobError,
        in transaction: Transaction
    ) throws {
        var row =
            transaction.state.jobs[jobID] ?? JobRow(id: jobID, kind: kind.rawValue, status: .queued)
        guard !row.status.isTerminal, row.kind == kind.rawValue else { return }
        row.status = .queued
        row.attempts = attempt
        row.error = error
        transaction.state.jobs[jobID] = row
    }

    package func countDelivery(queue: String, body: Data, atLeast: Int, in transaction: Transaction) throws -> Int {
        let key = DeliveryKey(queue: queue, body: body)
        let count = transaction.state.deliveries[key].map { max($0 + 1, atLeast) } ?? atLeast
        transaction.state.deliveries[key] = count
        return count
    }

    package func uncountDelivery(queue: String, body: Data, in transaction: Transaction) throws {
        let key = DeliveryKey(queue: queue, body: body)
        if let count = transaction.state.deliveries[key], count > 1 { transaction.state.deliveries[key] = count - 1 }
    }

    package func claimPending(
        limit: Int,
        lease: Duration,
        in transaction: Transaction
    ) throws -> [PendingOutboxMessage] {
        let now = ContinuousClock.now
        var claimed: [PendingOutboxMessage] = []
        for index in transaction.state.outbox.indices where claimed.count < limit {
            let row = transaction.state.outbox[index]
            guard !row.isSent, row.claimedUntil.map({ $0 < now }) ?? true else { continue }
            transaction.state.outbox[index].claimedUntil = now + lease
            claimed.append(Self.pending(row))
        }
        return claimed
    }

    package func markSent(ids: [Int64], in transaction: Transaction) throws {
        let sent = Set(ids)
        for index in transaction.state.outbox.indices where sent.contains(transaction.state.outbox[index].id) {
            transaction.state.outbox[index].isSent = true
            transaction.state.outbox[index].claimedUntil = nil
        }
    }

    package func markFailed(ids: [Int64], error: String, in transaction: Transaction) throws {
        let failed = Set(ids)
        let now = ContinuousClock.now
        for index in transaction.state.outbox.indices where failed.contains(transaction.state.outbox[index].id) {
            // As the SQL: a pause of 2^(earlier failures) seconds, at most five minutes.
            let pause = min(1 << min(transaction.state.outbox[index].attempts, 16), 300)
            transaction.state.outbox[index].attempts += 1
            transaction.state.outbox[index].lastError = error
            transaction.state.outbox[index].claimedUntil = now + .seconds(pause)
        }
    }

    private static func pending(_ row: OutboxRow) -> PendingOutboxMessage {
        PendingOutboxMessage(
            id: row.id,
            messageID: row.messageID,
            message: row.message,
            contentType: row.contentType,
            jobID: row.jobID?.uuid
        )
    }
}
