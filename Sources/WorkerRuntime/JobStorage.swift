import AMQP
import AstroDomain
import Foundation

/// What the runtime needs from the database that holds the `jobs` and `outbox` tables: one
/// transaction at a time, and the row operations the processor, the group commit and the outbox
/// relay run inside it.
///
/// The runtime's decisions (which job is a duplicate, how a batch is written, what a dead job
/// records, how a failed round of the relay is released) are written once, on top of these
/// operations, so the PostgreSQL store (`PostgresJobStorage`) and an in-memory store (the
/// `WorkerRuntimeTestKit`'s) run the same logic.
///
/// Handlers write their own effects through `Transaction`, which a store hands to the handler's
/// `commit` inside the job's transaction: `PostgresConnection` for the real store (what
/// `JobHandler.commit` takes), a store's own type elsewhere. The runtime never looks inside it.
///
/// - Important: the row operations run synchronously inside `withTransaction` or `withConnection`
///   and must not block on async work.
package protocol JobStorage: Sendable {
    /// What a transaction's statements, and handlers' commits, run on.
    associatedtype Transaction

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// - Throws: the store's errors (classified by `FailureClassifier`: connection loss and
    ///   pool exhaustion are transient), or what `body` throws.
    func withTransaction<T: Sendable>(_ body: @Sendable @escaping (Transaction) throws -> T) async throws -> T

    /// Runs `body` with each statement committed on its own (no enclosing transaction), for reads
    /// and single-statement writes.
    /// - Throws: as `withTransaction`.
    func withConnection<T: Sendable>(_ body: @Sendable @escaping (Transaction) throws -> T) async throws -> T

    /// Claims the rows of jobs (distinct ids): inserts each job's row as running, or takes over a
    /// row an unfinished earlier attempt left, and locks it until the transaction ends.
    /// - Returns: a claim for every job of `jobs`; a row not claimed is reported as finished
    ///   before or as another job type's.
    /// - Important: call inside the jobs' transaction.
    func claim(_ jobs: [JobClaimRequest], in transaction: Transaction) throws -> [JobID: JobClaim]

    /// Whether a batch of first deliveries is committed without claiming the jobs' rows first
    /// (see `CommitBatcher.commitUnclaimed`): its finish writes each row once and takes the
    /// claim's row lock; a row found taken rolls the batch back to the claiming way.
    var writesFirstDeliveriesUnclaimed: Bool { get }

    /// The job's row, if it has one the store lets this worker see.
    func recorded(_ jobID: JobID, in transaction: Transaction) throws -> RecordedJob?

    /// Records the end of jobs (creating a row an earlier attempt did not leave). A row already
    /// finished, or of another job type, is left as it is.
    /// - Returns: the jobs whose rows were written.
    func finish(_ jobs: [JobFinish], in transaction: Transaction) throws -> Set<JobID>

    /// Adds messages to the outbox in this order. With a lease the rows are claimed for the
    /// caller's relay, which the caller hands the returned rows once the transaction has
    /// committed; without one they are left for any relay.
    /// - Returns: the inserted rows (empty without a lease is fine: nobody is handed them).
    func enqueue(
        _ messages: [(message: OutboxMessage, jobID: JobID?)],
        lease: Duration?,
        in transaction: Transaction
    ) throws -> [PendingOutboxMessage]

    /// Records a failed attempt that will be retried (its number and error), unless the job's row
    /// is finished or another job type's.
    func recordAttempt(
        jobID: JobID,
        kind: JobType,
        attempt: Int,
        error: JobError,
        in transaction: Transaction
    ) throws

    /// Counts one more delivery of a message (its queue and body).
    /// - Returns: the deliveries so far, at least `atLeast`.
    func countDelivery(queue: String, body: Data, atLeast: Int, in transaction: Transaction) throws -> Int

    /// Takes back one delivery `countDelivery` counted (never below one).
    func uncountDelivery(queue: String, body: Data, in transaction: Transaction) throws

    /// Claims up to `limit` unsent outbox rows for `lease`, oldest first: rows nobody holds, and
    /// rows whose claim lapsed.
    func claimPending(limit: Int, lease: Duration, in transaction: Transaction) throws -> [PendingOutboxMessage]

    /// Marks outbox rows as sent.
    func markSent(ids: [Int64], in transaction: Transaction) throws

    /// Releases outbox rows that failed to publish for a later round, after a pause that grows
    /// with their failures, and notes why.
    func markFailed(ids: [Int64], error: String, in transaction: Transaction) throws

    /// Marks a job an operator cancelled (`cancelled`, terminal, so `claim` never takes it) as
    /// announced, unless it already was. Called in the transaction that enqueues the job's
    /// `<type>.cancelled` event and its handler's compensation, so a redelivery or a second copy
    /// of the message finds the row marked and enqueues nothing (see JobCancellation.swift).
    /// - Returns: the job's user and reason when this call marked it; nil when the row is not a
    ///   cancelled job of `kind`, or was announced before.
    func announceCancellation(_ jobID: JobID, kind: JobType, in transaction: Transaction) throws -> CancelledJob?

    /// Which of `users` are deleted or being deleted, seen under each user's lock (taken shared
    /// until the transaction ends), so a deletion marked later waits for this transaction
    /// (UserDeletionGuard.swift). A store without users answers none.
    func usersBeingDeleted(_ users: [UUID], in transaction: Transaction) throws -> Set<UUID>
}

/// One job to claim, for `JobStorage.claim`.
package struct JobClaimRequest: Sendable, Hashable {
    package var jobID: JobID
    package var kind: JobType
    package var attempt: Int

    package init(jobID: JobID, kind: JobType, attempt: Int) {
        self.jobID = jobID
        self.kind = kind
        self.attempt = attempt
    }
}

/// What a job's transaction found when it claimed the job's row.
package enum JobClaim: Sendable, Hashable {
    /// The row is ours (new, or left non-terminal by an earlier attempt) and locked.
    case claimed
    /// Another delivery already finished this job: do nothing.
    case alreadyFinished(JobStatus)
    /// The jobId was used before for a job of another type.
    case kindMismatch(existing: String)

    /// What a claim reports for a row it cannot see: one of another service's job types.
    package static let anotherService = "another service's"

    /// Why a job's row was not claimed: finished before, or another job's. A row the store does
    /// not show this worker belongs to another service's job type (row-level security).
    package static func unclaimed(_ row: RecordedJob?, kind: JobType) -> JobClaim {
        guard let row else { return .kindMismatch(existing: anotherService) }
        if row.kind != kind.rawValue { return .kindMismatch(existing: row.kind) }
        return .alreadyFinished(row.status)
    }
}

/// A job's row as the idempotency checks need it.
package struct RecordedJob: Sendable, Hashable {
    package var status: JobStatus
    package var kind: String

    package init(status: JobStatus, kind: String) {
        self.status = status
        self.kind = kind
    }

    /// The status, when a delivery of a job of `kind` is a duplicate of one already finished: the
    /// row is terminal and of the same type (a row of another type is a reused id, not a duplicate).
    package func finished(as kind: JobType) -> JobStatus? {
        self.kind == kind.rawValue && status.isTerminal ? status : nil
    }
}

/// One job's end, for `JobStorage.finish`.
package struct JobFinish: Sendable {
    package var jobID: JobID
    package var kind: JobType
    package var status: JobStatus
    package var attempts: Int
    package var result: JSONValue?
    package var error: JobError?
    package var userID: UUID?

    package init(
        jobID: JobID,
        kind: JobType,
        status: JobStatus,
        attempts: Int,
        result: JSONValue?,
        error: JobError?,
        userID: UUID?
    ) {
        self.jobID = jobID
        self.kind = kind
        self.status = status
        self.attempts = attempts
        self.result = result
        self.error = error
        self.userID = userID
    }
}

/// A claimed outbox row, waiting to be published.
package struct PendingOutboxMessage: Sendable {
    package var id: Int64
    package var messageID: UUID
    package var message: OutboxMessage
    package var contentType: String
    package var jobID: UUID?

    package init(id: Int64, messageID: UUID, message: OutboxMessage, contentType: String, jobID: UUID?) {
        self.id = id
        self.messageID = messageID
        self.message = message
        self.contentType = contentType
        self.jobID = jobID
    }
}

/// A job store broke its contract. Classified at the source: see `isTransient`.
package struct JobStoreError: Error, Sendable, Hashable, RetryClassifiedError, CustomStringConvertible {
    package enum Code: String, Sendable, Hashable {
        /// `claim` returned no answer for a job it was asked to claim.
        case claimMissing = "job-claim-missing"
    }

    package var code: Code
    package var jobID: JobID

    package init(code: Code, jobID: JobID) {
        self.code = code
        self.jobID = jobID
    }

    package var failureCode: String { code.rawValue }

    /// A missing claim says nothing about the message: the store's answer was incomplete, the job's
    /// transaction rolls back with nothing written and the handler's commit has not run. A retry
    /// claims again from scratch, and the attempts are bounded (MAX_ATTEMPTS), so a store that keeps
    /// failing still ends with the job dead-lettered and its failed event published. Neither a
    /// rejection (a valid job dead-lettered for the store's fault) nor a success (a job acknowledged
    /// that never ran) is true.
    package var isTransient: Bool { true }

    package var description: String {
        switch code {
        case .claimMissing: "the job store returned no claim for job \(jobID); nothing was written"
        }
    }
}

extension JobStorage {
    /// Claims one job's row.
    /// - Throws: `JobStoreError` (`job-claim-missing`, transient) when the store answers nothing
    ///   for the job; the store's errors.
    /// - Important: call inside the job's transaction.
    func claim(jobID: JobID, kind: JobType, attempt: Int, in transaction: Transaction) throws -> JobClaim {
        let claims = try claim([JobClaimRequest(jobID: jobID, kind: kind, attempt: attempt)], in: transaction)
        return try Self.claim(of: jobID, in: claims)
    }

    /// The claim of one job in a `claim` answer.
    /// - Throws: `JobStoreError` (`job-claim-missing`) when the answer has none: the job's row
    ///   state is unknown, and taking it for finished would acknowledge a job that never ran.
    static func claim(of jobID: JobID, in claims: [JobID: JobClaim]) throws(JobStoreError) -> JobClaim {
        guard let claim = claims[jobID] else { throw JobStoreError(code: .claimMissing, jobID: jobID) }
        return claim
    }

    /// The status of a job finished before, when a delivery of a job of `kind` is a duplicate.
    func finishedBefore(_ jobID: JobID, kind: JobType, in transaction: Transaction) throws -> JobStatus? {
        try recorded(jobID, in: transaction)?.finished(as: kind)
    }

    /// Why a job's row was not claimed (or not finished): finished before, or another job's.
    func unclaimed(_ jobID: JobID, kind: JobType, in transaction: Transaction) throws -> JobClaim {
        JobClaim.unclaimed(try recorded(jobID, in: transaction), kind: kind)
    }

    /// Records one job's end.
    /// - Returns: whether the row was written; not when it is already finished or belongs to a
    ///   job of another type (which this never overwrites).
    @discardableResult
    func finish(_ job: JobFinish, in transaction: Transaction) throws -> Bool {
        try !finish([job], in: transaction).isEmpty
    }

    /// Adds one job's messages to the outbox, unclaimed: any relay publishes them once the
    /// transaction commits.
    func enqueue(_ messages: [OutboxMessage], jobID: JobID?, in transaction: Transaction) throws {
        guard !messages.isEmpty else { return }
        _ = try enqueue(messages.map { (message: $0, jobID: jobID) }, lease: nil, in: transaction)
    }
}

/// What the runtime publishes with: publisher confirms, one message or a pipelined batch.
/// `AMQPPublisher` is the production conformer.
package protocol MessagePublisher: Sendable {
    /// Publishes one message and returns once the broker confirmed it.
    /// - Throws: `AMQPError`: refused (nack, unroutable, no exchange, too large), or not confirmed
    ///   within `timeout`.
    nonisolated(nonsending) func publish(_ message: OutgoingMessage, timeout: Duration) async throws(AMQPError)

    /// Publishes messages in this order and waits for all their confirms.
    /// - Throws: `AMQPBatchError` listing the indices that failed (every other one was
    ///   confirmed); any other error when nothing is known to be confirmed.
    nonisolated(nonsending) func publish(_ messages: [OutgoingMessage], timeout: Duration) async throws
}

extension AMQPPublisher: MessagePublisher {}

/// Where a consumer's deliveries come from, and how they are settled. `AMQPConsumer` is the
/// production conformer.
package protocol DeliverySource: DeliveryAcknowledger {
    /// Every delivery, in arrival order; finishes after `close()`.
    var deliveries: AsyncStream<Delivery> { get }

    /// Starts consuming.
    /// - Throws: `AMQPError`; a retriable one (`isRetriable`) is retried by the consumer service.
    nonisolated(nonsending) func start() async throws(AMQPError)

    /// Stops new deliveries; those in flight can still be settled.
    nonisolated(nonsending) func stopConsuming() async

    /// Closes: deliveries not settled go back to their queues, `deliveries` finishes.
    nonisolated(nonsending) func close() async
}

extension AMQPConsumer: DeliverySource {}
