import AstroDomain
import Foundation
import Postgres
import Synchronization

/// Commits prepared jobs in shared transactions: group commit.
///
/// A durable commit costs a WAL flush; one transaction per job caps a worker at the disk's
/// flush rate (INFRA.md: 3,000–4,600 single-row commits/s on a quiet machine, far less when the
/// disk is busy). Jobs that finish preparing while a commit is under way wait for the next one
/// and go in together, so under load a flush serves many jobs, while a lone job still commits
/// at once (no artificial delay). If a shared transaction fails, each of its jobs is committed
/// again on its own, so one job's constraint violation or rejection never fails its neighbours.
final class CommitBatcher: Sendable {
    /// One job waiting for its commit.
    struct Item: Sendable {
        var job: JobEnvelope
        var handler: AnyJobHandler
        var prepared: any Sendable
        var userID: UUID?
        var continuation: CheckedContinuation<JobCommitResult, any Error>
    }

    private struct State {
        var queue: [Item] = []
        var committers = 0
    }

    private let pool: PostgresPool
    private let maxBatch: Int
    private let maxCommitters: Int
    private let state = Mutex(State())
    private let metrics: WorkerMetrics?
    private let outboxSignal: WakeSignal?

    /// - Parameters:
    ///   - maxBatch: jobs per transaction at most.
    ///   - maxCommitters: transactions under way at once (each holds a database connection).
    ///   - outboxSignal: the relay's; committed outbox rows are handed to it already claimed.
    ///     Without one, rows are left for a relay to claim.
    init(
        pool: PostgresPool,
        maxBatch: Int,
        maxCommitters: Int,
        metrics: WorkerMetrics? = nil,
        outboxSignal: WakeSignal? = nil
    ) {
        self.pool = pool
        self.metrics = metrics
        self.outboxSignal = outboxSignal
        self.maxBatch = max(1, maxBatch)
        self.maxCommitters = max(1, maxCommitters)
    }

    /// Commits the job (its handler's writes, its `jobs` row, its outbox messages) and returns
    /// what the transaction found.
    /// - Throws: the job's own error: `JobRejection` from its handler, or a database error.
    func commit(
        job: JobEnvelope,
        handler: AnyJobHandler,
        prepared: any Sendable,
        userID: UUID?
    ) async throws
        -> JobCommitResult
    {
        try await withCheckedThrowingContinuation { continuation in
            let item = Item(job: job, handler: handler, prepared: prepared, userID: userID, continuation: continuation)
            let startCommitter = state.withLock { state -> Bool in
                state.queue.append(item)
                guard state.committers < maxCommitters else { return false }
                state.committers += 1
                return true
            }
            if startCommitter { Task { await self.runCommitter() } }
        }
    }

    private func runCommitter() async {
        while true {
            let batch = state.withLock { state -> [Item]? in
                guard !state.queue.isEmpty else {
                    state.committers -= 1
                    return nil
                }
                let count = min(maxBatch, state.queue.count)
                defer { state.queue.removeFirst(count) }
                return Array(state.queue.prefix(count))
            }
            guard let batch else { return }
            await commitBatch(batch)
        }
    }

    private func commitBatch(_ batch: [Item]) async {
        let work = batch.map { ($0.job, $0.handler, $0.prepared, $0.userID) }
        // A jobId twice in one batch (a redelivery racing the first delivery) must see the first
        // one finished before it claims, so such a batch records each job as it goes.
        let distinct = Set(batch.map(\.job.jobID)).count == batch.count
        // Rows are claimed at insert only when this process's relay will be handed them.
        let claimFor = outboxSignal == nil ? nil : OutboxRelay.defaultLease
        do {
            let (results, pending) = try await pool.withTransaction { database in
                if distinct {
                    return try Self.commitShared(work, claimFor: claimFor, database: database)
                }
                let results = try work.map { job, handler, prepared, userID in
                    try Self.commitOne(
                        job: job,
                        handler: handler,
                        prepared: prepared,
                        userID: userID,
                        database: database
                    )
                }
                return (results, [JobStore.PendingMessage]())
            }
            // Committed: the relay may publish them now (the jobs' processors wake it).
            outboxSignal?.handOff(pending)
            metrics?.recordCommitBatch(jobs: batch.count)
            for (item, result) in zip(batch, results) { item.continuation.resume(returning: result) }
        } catch {
            guard batch.count > 1 else {
                batch[0].continuation.resume(throwing: error)
                return
            }
            // Find the culprit by committing each job alone; the others succeed as usual.
            for item in batch {
                let (job, handler, prepared, userID) = (item.job, item.handler, item.prepared, item.userID)
                do {
                    let result = try await pool.withTransaction { database in
                        try Self.commitOne(
                            job: job,
                            handler: handler,
                            prepared: prepared,
                            userID: userID,
                            database: database
                        )
                    }
                    item.continuation.resume(returning: result)
                } catch {
                    item.continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Several jobs (distinct ids) in one transaction: all are claimed in one statement, the
    /// claimed jobs' writes go to their handlers in runs of one job type (`commit(batch:)`, in
    /// the jobs' order), then the jobs' statuses and all their outbox messages are recorded in
    /// one statement each — the same rows `commitOne` writes, in a few statements per batch
    /// instead of a few per job.
    static func commitShared(
        _ work: [(JobEnvelope, AnyJobHandler, any Sendable, UUID?)],
        claimFor: Duration?,
        database: PostgresConnection
    ) throws -> (results: [JobCommitResult], pending: [JobStore.PendingMessage]) {
        var results = [JobCommitResult?](repeating: nil, count: work.count)
        var finished: [JobStore.Finish] = []
        var messages: [(message: OutboxMessage, jobID: JobID?)] = []
        let claims = try JobStore.claim(
            work.map { job, _, _, _ in (jobID: job.jobID, kind: job.type, attempt: job.attempt) },
            database: database
        )
        // Claimed jobs of one type waiting to be written together: positions in `work`.
        var run: [Int] = []
        func writeRun() throws {
            guard let first = run.first else { return }
            let outcomes = try work[first].1.commitBatch(
                run.map { (prepared: work[$0].2, job: work[$0].0) },
                database
            )
            for (index, outcome) in zip(run, outcomes) {
                let (job, _, _, userID) = work[index]
                let (status, error) = recorded(outcome)
                finished.append(
                    JobStore.Finish(
                        id: job.jobID.uuid,
                        kind: job.type.rawValue,
                        status: status.rawValue,
                        attempts: job.attempt,
                        result: outcome.result,
                        error: error,
                        userID: userID
                    )
                )
                messages += outcome.messages.map { (message: $0, jobID: job.jobID) }
                results[index] = .committed(status, messageCount: outcome.messages.count)
            }
            run.removeAll(keepingCapacity: true)
        }
        for (index, (job, handler, _, _)) in work.enumerated() {
            switch claims[job.jobID] ?? .alreadyFinished(.succeeded) {
            case .alreadyFinished(let status):
                // Another delivery finished it: nothing to write, so the run goes on.
                results[index] = .duplicate(status)
            case .kindMismatch(let existing):
                throw Self.reused(job, existing: existing)
            case .claimed:
                // A different job type ends the run: jobs keep their order across types.
                if let last = run.last, work[last].1.jobType != handler.jobType { try writeRun() }
                run.append(index)
            }
        }
        try writeRun()
        try JobStore.finish(finished, database: database)
        let pending = try JobStore.enqueueClaimed(messages, lease: claimFor, database: database)
        return (results.map { $0! }, pending)
    }

    /// One job's part of a transaction: claim its row, run the handler's writes, record its
    /// status and queue its messages.
    static func commitOne(
        job: JobEnvelope,
        handler: AnyJobHandler,
        prepared: any Sendable,
        userID: UUID?,
        database: PostgresConnection
    ) throws -> JobCommitResult {
        let claim = try JobStore.claim(jobID: job.jobID, kind: job.type, attempt: job.attempt, database: database)
        let outcome: JobOutcome
        let status: JobStatus
        let error: JobError?
        switch try run(claim, job, handler, prepared, database) {
        case .finishedBefore(let finished): return .duplicate(finished)
        case .ran(let ranOutcome, let ranStatus, let ranError):
            (outcome, status, error) = (ranOutcome, ranStatus, ranError)
        }
        try JobStore.finish(
            jobID: job.jobID,
            kind: job.type,
            status: status,
            attempts: job.attempt,
            result: outcome.result,
            error: error,
            userID: userID,
            database: database
        )
        try JobStore.enqueue(outcome.messages, jobID: job.jobID, database: database)
        return .committed(status, messageCount: outcome.messages.count)
    }
}

extension CommitBatcher {
    /// What `run` did with a job.
    enum Ran {
        /// Another delivery had finished it (with this status): the handler did not run.
        case finishedBefore(JobStatus)
        /// The handler ran: its outcome, and the status and error to record.
        case ran(JobOutcome, JobStatus, JobError?)
    }

    /// Runs the handler of a job given its claim.
    /// - Throws: `JobRejection` (`job-id-reused`) when its id was used for another job type;
    ///   whatever the handler throws.
    static func run(
        _ claim: JobStore.Claim,
        _ job: JobEnvelope,
        _ handler: AnyJobHandler,
        _ prepared: any Sendable,
        _ database: PostgresConnection
    ) throws -> Ran {
        switch claim {
        case .alreadyFinished(let status):
            return .finishedBefore(status)
        case .kindMismatch(let existing):
            throw reused(job, existing: existing)
        case .claimed:
            let outcome = try handler.commit(prepared, job, database)
            let (status, error) = recorded(outcome)
            return .ran(outcome, status, error)
        }
    }

    /// The status and error to record for a handler's outcome.
    static func recorded(_ outcome: JobOutcome) -> (JobStatus, JobError?) {
        switch outcome.status {
        case .succeeded: (.succeeded, nil)
        case .failed(let failure): (.failed, failure)
        }
    }

    /// The rejection of a job whose id was first used for another job type.
    static func reused(_ job: JobEnvelope, existing: String) -> JobRejection {
        JobRejection(code: "job-id-reused", message: "jobId \(job.jobID) was already used for a \(existing) job")
    }
}

/// What a job's transaction found.
enum JobCommitResult: Sendable {
    /// Another delivery had already finished the job; nothing was written.
    case duplicate(JobStatus)
    /// Written with this status and this many outbox messages.
    case committed(JobStatus, messageCount: Int)
}
