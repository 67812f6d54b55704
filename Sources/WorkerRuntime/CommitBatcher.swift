import AstroDomain
import Foundation
import Synchronization

/// Commits prepared jobs in shared transactions: group commit.
///
/// A durable commit costs a WAL flush; one transaction per job caps a worker at the disk's
/// flush rate (INFRA.md: 3,000–4,600 single-row commits/s on a quiet machine, far less when the
/// disk is busy). Jobs that finish preparing while a commit is under way wait for the next one
/// and go in together, so under load a flush serves many jobs, while a lone job still commits
/// at once (no artificial delay). If a shared transaction fails, each of its jobs is committed
/// again on its own, so one job's constraint violation or rejection never fails its neighbours.
final class CommitBatcher<Store: JobStorage>: Sendable {
    /// One job waiting for its commit.
    struct Item: Sendable {
        var work: PreparedJob<Store.Transaction>
        var continuation: CheckedContinuation<JobCommitResult, any Error>
    }

    private struct State {
        var queue: [Item] = []
        var committers = 0
    }

    private let store: Store
    private let maxBatch: Int
    private let maxCommitters: Int
    private let state = Mutex(State())
    private let metrics: WorkerMetrics
    private let outboxSignal: WakeSignal

    /// - Parameters:
    ///   - maxBatch: jobs per transaction at most.
    ///   - maxCommitters: transactions under way at once (each holds a database connection).
    ///   - outboxSignal: the relay's; the rows a shared transaction commits to the outbox are
    ///     handed to it already claimed.
    init(
        store: Store,
        maxBatch: Int,
        maxCommitters: Int,
        metrics: WorkerMetrics,
        outboxSignal: WakeSignal
    ) {
        self.store = store
        self.metrics = metrics
        self.outboxSignal = outboxSignal
        self.maxBatch = max(1, maxBatch)
        self.maxCommitters = max(1, maxCommitters)
    }

    /// Commits the job (its handler's writes, its `jobs` row, its outbox messages) and returns
    /// what the transaction found.
    /// - Throws: the job's own error: `JobRejection` from its handler, or a database error.
    func commit(_ work: PreparedJob<Store.Transaction>) async throws -> JobCommitResult {
        try await withCheckedThrowingContinuation { continuation in
            let item = Item(work: work, continuation: continuation)
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
        let work = batch.map(\.work)
        // A jobId twice in one batch (a redelivery racing the first delivery) must see the first
        // one finished before it claims, so such a batch records each job as it goes.
        let distinct = Set(work.map(\.job.jobID)).count == batch.count
        // Rows are claimed at insert for this process's relay, which is handed them.
        let claimFor = OutboxRelayLease.standard
        let store = self.store
        // First deliveries only: a redelivery or retry is likely to find its row taken, which
        // would cost the unclaimed attempt a rollback.
        let unclaimed =
            store.writesFirstDeliveriesUnclaimed && distinct
            && work.allSatisfy { $0.job.attempt == 1 && !$0.job.redelivered }
        do {
            var unclaimedResults: (results: [JobCommitResult], pending: [PendingOutboxMessage])?
            if unclaimed {
                do {
                    unclaimedResults = try await store.withTransaction { transaction in
                        try Self.commitUnclaimed(work, claimFor: claimFor, store: store, transaction: transaction)
                    }
                } catch is RowTaken {
                    // Rolled back: the claiming transaction below decides each job.
                }
            }
            let results: [JobCommitResult]
            let pending: [PendingOutboxMessage]
            if let unclaimedResults {
                (results, pending) = unclaimedResults
            } else {
                (results, pending) = try await store.withTransaction { transaction in
                    if distinct {
                        return try Self.commitShared(work, claimFor: claimFor, store: store, transaction: transaction)
                    }
                    let results = try work.map { job in
                        try Self.commitOne(job, store: store, transaction: transaction)
                    }
                    return (results, [PendingOutboxMessage]())
                }
            }
            // Committed: the relay may publish them now (the jobs' processors wake it).
            outboxSignal.handOff(pending)
            metrics.recordCommitBatch(jobs: batch.count)
            for (item, result) in zip(batch, results) { item.continuation.resume(returning: result) }
        } catch {
            guard batch.count > 1 else {
                batch[0].continuation.resume(throwing: error)
                return
            }
            // Find the culprit by committing each job alone; the others succeed as usual.
            for item in batch {
                let job = item.work
                do {
                    let result = try await store.withTransaction { transaction in
                        try Self.commitOne(job, store: store, transaction: transaction)
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
    /// - Throws: `JobStoreError` when the store's claim leaves a job unanswered; `JobRejection`
    ///   (`job-id-reused`); what a handler or the store throws. The transaction then rolls back.
    static func commitShared(
        _ work: [PreparedJob<Store.Transaction>],
        claimFor: Duration,
        store: Store,
        transaction: Store.Transaction
    ) throws -> (results: [JobCommitResult], pending: [PendingOutboxMessage]) {
        var results = [JobCommitResult?](repeating: nil, count: work.count)
        var finished: [JobFinish] = []
        var messages: [(message: OutboxMessage, jobID: JobID?)] = []
        let claims = try store.claim(
            work.map { JobClaimRequest(jobID: $0.job.jobID, kind: $0.job.type, attempt: $0.job.attempt) },
            in: transaction
        )
        // Jobs of deleted users are refused, not written (UserDeletionGuard.swift).
        let deletedUsers = try store.usersBeingDeleted(UserDeletionGuard.checkedUsers(work), in: transaction)
        // Claimed jobs of one type waiting to be written together: positions in `work`.
        var run: [Int] = []
        func writeRun() throws {
            guard let first = run.first else { return }
            let outcomes = try work[first].handler.commitBatch(
                run.map { (prepared: work[$0].prepared, job: work[$0].job) },
                transaction
            )
            for (index, outcome) in zip(run, outcomes) {
                let job = work[index].job
                let (status, error) = recorded(outcome)
                finished.append(
                    JobFinish(
                        jobID: job.jobID,
                        kind: job.type,
                        status: status,
                        attempts: job.attempt,
                        result: outcome.result,
                        error: error,
                        userID: work[index].userID
                    )
                )
                messages += outcome.messages.map { (message: $0.traced(by: job.traceContext), jobID: job.jobID) }
                results[index] = .committed(
                    status,
                    messageCount: outcome.messages.count,
                    measurements: outcome.measurements
                )
            }
            run.removeAll(keepingCapacity: true)
        }
        for (index, item) in work.enumerated() {
            switch try Store.claim(of: item.job.jobID, in: claims) {
            case .alreadyFinished(let status):
                // Another delivery finished it: nothing to write, so the run goes on.
                results[index] = .duplicate(status)
            case .kindMismatch(let existing):
                throw Self.reused(item.job, existing: existing)
            case .claimed where UserDeletionGuard.isRefused(item, deleted: deletedUsers):
                let outcome = try UserDeletionGuard.refusal(item.job, user: item.userID)
                let (status, error) = recorded(outcome)
                finished.append(
                    JobFinish(
                        jobID: item.job.jobID,
                        kind: item.job.type,
                        status: status,
                        attempts: item.job.attempt,
                        result: nil,
                        error: error,
                        userID: item.userID
                    )
                )
                messages += outcome.messages.map {
                    (message: $0.traced(by: item.job.traceContext), jobID: item.job.jobID)
                }
                results[index] = .committed(status, messageCount: outcome.messages.count)
            case .claimed:
                // A different job type ends the run: jobs keep their order across types.
                if let last = run.last, work[last].handler.jobType != item.handler.jobType { try writeRun() }
                run.append(index)
            }
        }
        try writeRun()
        _ = try store.finish(finished, in: transaction)
        let pending = try store.enqueue(messages, lease: claimFor, in: transaction)
        return (results.map { $0! }, pending)
    }

    /// Thrown by `commitUnclaimed` to roll its transaction back: a job's row was there already.
    private struct RowTaken: Error {}

    /// Several first deliveries (distinct ids) in one transaction without claiming their rows
    /// first: the handlers' writes, then the jobs' rows and outbox messages, in three statements
    /// per job type instead of four, and each `jobs` row written once instead of inserted as
    /// running and then rewritten as finished (an index entry less in each of its indexes).
    /// The row lock the claim would take is taken by the finish, which writes only a row that
    /// is absent or unfinished and of the job's type; if any job's row is finished, cancelled
    /// or another type's, this throws `RowTaken`, the transaction rolls back with all its
    /// writes, and the caller commits the batch the claiming way, which tells each job apart.
    /// - Throws: `RowTaken`; what a handler or the store throws.
    static func commitUnclaimed(
        _ work: [PreparedJob<Store.Transaction>],
        claimFor: Duration,
        store: Store,
        transaction: Store.Transaction
    ) throws -> (results: [JobCommitResult], pending: [PendingOutboxMessage]) {
        // A deleted user's job is refused, not written (UserDeletionGuard.swift): the claiming
        // way records the refusal, so such a batch goes that way.
        let deletedUsers = try store.usersBeingDeleted(UserDeletionGuard.checkedUsers(work), in: transaction)
        if work.contains(where: { UserDeletionGuard.isRefused($0, deleted: deletedUsers) }) { throw RowTaken() }
        var results: [JobCommitResult] = []
        var finished: [JobFinish] = []
        var messages: [(message: OutboxMessage, jobID: JobID?)] = []
        var start = 0
        // Runs of one job type, in the jobs' order, as `commitShared` writes them.
        while start < work.count {
            var end = start + 1
            while end < work.count, work[end].handler.jobType == work[start].handler.jobType { end += 1 }
            let run = work[start..<end]
            let outcomes = try work[start].handler.commitBatch(
                run.map { (prepared: $0.prepared, job: $0.job) },
                transaction
            )
            for (item, outcome) in zip(run, outcomes) {
                let (status, error) = recorded(outcome)
                finished.append(
                    JobFinish(
                        jobID: item.job.jobID,
                        kind: item.job.type,
                        status: status,
                        attempts: item.job.attempt,
                        result: outcome.result,
                        error: error,
                        userID: item.userID
                    )
                )
                messages += outcome.messages.map {
                    (message: $0.traced(by: item.job.traceContext), jobID: item.job.jobID)
                }
                results.append(
                    .committed(status, messageCount: outcome.messages.count, measurements: outcome.measurements)
                )
            }
            start = end
        }
        guard try store.finish(finished, in: transaction).count == work.count else { throw RowTaken() }
        let pending = try store.enqueue(messages, lease: claimFor, in: transaction)
        return (results, pending)
    }

    /// One job's part of a transaction: claim its row, run the handler's writes, record its
    /// status and queue its messages.
    /// - Throws: as `commitShared`.
    static func commitOne(
        _ work: PreparedJob<Store.Transaction>,
        store: Store,
        transaction: Store.Transaction
    ) throws -> JobCommitResult {
        let job = work.job
        let claim = try store.claim(jobID: job.jobID, kind: job.type, attempt: job.attempt, in: transaction)
        let outcome: JobOutcome
        let status: JobStatus
        let error: JobError?
        switch claim {
        case .alreadyFinished(let finished):
            return .duplicate(finished)
        case .kindMismatch(let existing):
            throw reused(job, existing: existing)
        case .claimed:
            let deleted = try store.usersBeingDeleted(UserDeletionGuard.checkedUsers([work]), in: transaction)
            if UserDeletionGuard.isRefused(work, deleted: deleted) {
                outcome = try UserDeletionGuard.refusal(job, user: work.userID)
            } else {
                outcome = try work.handler.commit(work.prepared, job, transaction)
            }
            (status, error) = recorded(outcome)
        }
        try store.finish(
            JobFinish(
                jobID: job.jobID,
                kind: job.type,
                status: status,
                attempts: job.attempt,
                result: outcome.result,
                error: error,
                userID: work.userID
            ),
            in: transaction
        )
        try store.enqueue(outcome.messages.map { $0.traced(by: job.traceContext) }, jobID: job.jobID, in: transaction)
        return .committed(status, messageCount: outcome.messages.count, measurements: outcome.measurements)
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
        JobRejection(code: .jobIDReused, message: "jobId \(job.jobID) was already used for a \(existing) job")
    }
}

/// A job whose handler prepared it, waiting for its transaction.
package struct PreparedJob<Transaction>: Sendable {
    package var job: JobEnvelope
    package var handler: AnyJobHandler<Transaction>
    /// What `handler`'s prepare returned for `job`.
    package var prepared: any Sendable
    package var userID: UUID?

    package init(job: JobEnvelope, handler: AnyJobHandler<Transaction>, prepared: any Sendable, userID: UUID?) {
        self.job = job
        self.handler = handler
        self.prepared = prepared
        self.userID = userID
    }
}

/// What a job's transaction found.
package enum JobCommitResult: Sendable, Hashable {
    /// Another delivery had already finished the job; nothing was written.
    case duplicate(JobStatus)
    /// Written with this status and this many outbox messages; `measurements` are the handler's
    /// business facts, to be counted now that they are committed.
    case committed(JobStatus, messageCount: Int, measurements: [BusinessMeasurement] = [])
}
