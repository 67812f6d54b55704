import AMQP
import AstroDomain
import Foundation
import Logging
import Postgres
import UUIDText

/// A handler with its prepared value's type erased, so one consumer can serve several job types.
///
/// `Transaction` is what its commit writes through: the job store's (`JobStorage.Transaction`),
/// `PostgresConnection` for every `JobHandler`.
package struct AnyJobHandler<Transaction>: Sendable {
    package let jobType: JobType
    let prepare: @Sendable (JobEnvelope) async throws -> any Sendable
    let commit: @Sendable (any Sendable, JobEnvelope, Transaction) throws -> JobOutcome
    let commitBatch: @Sendable ([(prepared: any Sendable, job: JobEnvelope)], Transaction) throws -> [JobOutcome]
    let compensation: @Sendable (JobEnvelope, JobError) -> [OutboxMessage]
    /// As `JobHandler.looksUpBeforePrepare`.
    let looksUpBeforePrepare: Bool

    /// A handler from closures, for a store whose transaction is not a `PostgresConnection` (an
    /// in-memory store's test handlers). A batch is committed one job after another.
    /// - Parameters:
    ///   - prepare: as `JobHandler.prepare`.
    ///   - commit: as `JobHandler.commit`, given what `prepare` returned for the job.
    ///   - compensation: as `JobHandler.compensation(for:error:)`.
    ///   - looksUpBeforePrepare: as `JobHandler.looksUpBeforePrepare`.
    package init<Prepared: Sendable>(
        jobType: JobType,
        prepare: @escaping @Sendable (JobEnvelope) async throws -> Prepared,
        commit: @escaping @Sendable (Prepared, JobEnvelope, Transaction) throws -> JobOutcome,
        compensation: @escaping @Sendable (JobEnvelope, JobError) -> [OutboxMessage] = { _, _ in [] },
        looksUpBeforePrepare: Bool = true
    ) {
        self.jobType = jobType
        self.looksUpBeforePrepare = looksUpBeforePrepare
        self.prepare = { job in try await prepare(job) }
        self.compensation = compensation
        @Sendable func commitOne(
            _ prepared: any Sendable,
            _ job: JobEnvelope,
            _ transaction: Transaction
        ) throws
            -> JobOutcome
        {
            guard let prepared = prepared as? Prepared else {
                preconditionFailure("prepared value of a \(jobType) handler has the wrong type")
            }
            return try commit(prepared, job, transaction)
        }
        self.commit = commitOne
        self.commitBatch = { batch, transaction in
            try batch.map { try commitOne($0.prepared, $0.job, transaction) }
        }
    }
}

extension AnyJobHandler where Transaction == PostgresConnection {
    /// A `JobHandler`, whose commit writes through the job's PostgreSQL transaction.
    init<Handler: JobHandler>(_ handler: Handler) {
        jobType = handler.jobType
        looksUpBeforePrepare = handler.looksUpBeforePrepare
        prepare = { job in try await handler.prepare(job) }
        compensation = { job, error in handler.compensation(for: job, error: error) }
        commit = { prepared, job, database in
            // The runtime hands back exactly what this handler's prepare returned.
            guard let prepared = prepared as? Handler.Prepared else {
                preconditionFailure("prepared value of \(Handler.self) has the wrong type")
            }
            return try handler.commit(prepared, job: job, database: database)
        }
        commitBatch = { batch, database in
            let typed = batch.map { entry in
                guard let prepared = entry.prepared as? Handler.Prepared else {
                    preconditionFailure("prepared value of \(Handler.self) has the wrong type")
                }
                return (prepared: prepared, job: entry.job)
            }
            let outcomes = try handler.commit(batch: typed, database: database)
            // One outcome per job is the protocol's promise; a handler that breaks it fails the
            // shared transaction, and the runtime then commits each job through `commit`.
            guard outcomes.count == batch.count else {
                throw BatchOutcomeMismatch(handler: "\(Handler.self)", jobs: batch.count, outcomes: outcomes.count)
            }
            return outcomes
        }
    }
}

/// A handler's batch commit returned a different number of outcomes than it was given jobs.
struct BatchOutcomeMismatch: Error, CustomStringConvertible {
    var handler: String
    var jobs: Int
    var outcomes: Int
    var description: String { "\(handler) returned \(outcomes) outcomes for a batch of \(jobs) jobs" }
}

/// How one delivery is settled with the broker.
package protocol DeliveryAcknowledger: Sendable {
    /// Acknowledges the delivery: its message is done.
    /// - Throws: `AMQPError` (`.staleDelivery` when it came on an earlier connection, `.closed`).
    func ack(_ delivery: Delivery) async throws(AMQPError)
    /// Returns the delivery to its queue (`requeue`) or has the broker dead-letter it.
    /// - Throws: as `ack`.
    func nack(_ delivery: Delivery, requeue: Bool) async throws(AMQPError)
}

extension AMQPConsumer: DeliveryAcknowledger {
    package func ack(_ delivery: Delivery) async throws(AMQPError) { try await ack(delivery, multiple: false) }
    package func nack(_ delivery: Delivery, requeue: Bool) async throws(AMQPError) {
        try await nack(delivery, multiple: false, requeue: requeue)
    }
}

/// Takes one delivery from decoding to acknowledgement: the idempotency check, the handler,
/// the job's transaction, and the sorting of failures into rejections and retries.
///
/// Ordering guarantees: a delivery is acknowledged only after what it decided is durable —
/// the job's transaction committed (its events are then in the outbox), or its retry copy or
/// dead letter was confirmed by the broker.
///
/// The database and the broker come in through `JobStorage` and `MessagePublisher`: in a worker
/// they are PostgreSQL and RabbitMQ (`PostgresJobStorage`, `AMQPPublisher`); the
/// `WorkerRuntimeTestKit` has in-memory ones.
package final class JobProcessor<Store: JobStorage, Publisher: MessagePublisher>: Sendable {
    private let handlers: [String: AnyJobHandler<Store.Transaction>]
    private let store: Store
    private let publisher: Publisher
    private let retry: RetryPolicy
    private let metrics: WorkerMetrics
    private let logger: Logger
    private let outboxSignal: WakeSignal
    private let batcher: CommitBatcher<Store>
    private let deliveryLimit: Int

    /// - Parameters:
    ///   - handlers: one per queue consumed (a queue's name is its job type).
    ///   - outboxSignal: the relay's: committed outbox rows are handed to it, and it is woken.
    ///   - commitBatchSize: jobs per shared transaction at most (group commit).
    ///   - committers: shared transactions under way at once.
    ///   - deliveryLimit: deliveries of one message without an outcome after which it is
    ///     dead-lettered with `delivery-limit` instead of run again (a message that crashes its
    ///     worker each time).
    package init(
        handlers: [AnyJobHandler<Store.Transaction>],
        store: Store,
        publisher: Publisher,
        retry: RetryPolicy,
        metrics: WorkerMetrics,
        logger: Logger,
        outboxSignal: WakeSignal,
        commitBatchSize: Int = 32,
        committers: Int = 2,
        deliveryLimit: Int = WorkerConfiguration.defaultDeliveryLimit
    ) {
        self.deliveryLimit = max(1, deliveryLimit)
        self.batcher = CommitBatcher(
            store: store,
            maxBatch: commitBatchSize,
            maxCommitters: committers,
            metrics: metrics,
            outboxSignal: outboxSignal
        )
        self.handlers = Dictionary(handlers.map { ($0.jobType.rawValue, $0) }, uniquingKeysWith: { first, _ in first })
        self.store = store
        self.publisher = publisher
        self.retry = retry
        self.metrics = metrics
        self.logger = logger
        self.outboxSignal = outboxSignal
    }

    /// Processes one delivery and settles it with the broker. Never throws: every failure is
    /// sorted into an outcome, so a worker never crashes on a message.
    package func process(_ delivery: Delivery, acknowledger: some DeliveryAcknowledger) async {
        // The delivery's span (JobTracing.swift): its context is what everything the job
        // publishes carries, and its id is on every log line about the job.
        let trace = JobTrace.start(delivery, queue: delivery.queue)
        await JobTrace.$active.withValue(trace) {
            await processTraced(delivery, acknowledger: acknowledger, trace: trace)
        }
        trace.end()
    }

    private func processTraced(_ delivery: Delivery, acknowledger: some DeliveryAcknowledger, trace: JobTrace) async {
        let started = ContinuousClock.now
        let queue = delivery.queue
        var logger = self.logger
        logger[metadataKey: LogKey.queue] = "\(queue)"
        trace.annotate(&logger)
        metrics.adjustInFlight(queue: queue, by: 1)
        defer {
            metrics.adjustInFlight(queue: queue, by: -1)
            metrics.recordDuration(queue: queue, ContinuousClock.now - started)
        }

        // A header beyond the policy's attempts (a forged or stale one) means none are left.
        let attempt = min(DeliveryHeaders.attempt(of: delivery), retry.maxAttempts)
        guard let handler = handlers[queue] else {
            // Consuming a queue without a handler is a wiring bug; keep the message.
            logger.error("no handler for queue; message returned to the queue")
            try? await acknowledger.nack(delivery, requeue: true)
            return
        }

        // 0. A body over MAX_MESSAGE_BYTES was never held whole: rejected without requeue, the
        //    broker dead-letters the intact message to `<queue>.dead`.
        if delivery.isBodyWithheld {
            await refuseOversized(delivery, attempt: attempt, acknowledger: acknowledger, logger: logger)
            return
        }
        // A message the broker hands out again had no outcome last time: its worker may have
        // died on it. Counted, and past the limit quarantined before anything reads its body.
        if delivery.redelivered || DeliveryHeaders.earlierDeliveries(of: delivery) > 0 {
            let deliveries = await countDelivery(delivery, logger: logger)
            if deliveries > deliveryLimit {
                await quarantine(
                    delivery,
                    deliveries: deliveries,
                    attempt: attempt,
                    acknowledger: acknowledger,
                    logger: logger
                )
                return
            }
        }

        // 1. The envelope: a JSON object with a UUID jobId.
        let head: JobHead
        switch JobHead.parse(delivery.body) {
        case .success(let parsed): head = parsed
        case .failure(let rejection):
            FailureLogging.log(
                "unreadable job dead-lettered",
                level: .warning,
                code: rejection.code,
                publicReason: rejection.publicReason,
                detail: rejection.message,
                logger: logger
            )
            guard await deadLetterDirectly(delivery, rejection: rejection, attempt: attempt, logger: logger) else {
                await giveBack(delivery, after: .seconds(1), acknowledger: acknowledger)
                return
            }
            metrics.recordJob(queue: queue, outcome: .rejected)
            metrics.recordDeadLetter(queue: queue, reason: rejection.code)
            await settle(delivery, acknowledger: acknowledger, logger: logger)
            return
        }
        logger[metadataKey: LogKey.jobID] = "\(head.jobID)"
        logger[metadataKey: LogKey.attempt] = "\(attempt)"
        let job = JobEnvelope(
            jobID: head.jobID,
            type: handler.jobType,
            body: delivery.body,
            attempt: attempt,
            redelivered: delivery.redelivered,
            correlationID: delivery.properties.correlationID,
            traceContext: trace.context
        )
        trace.describe(jobID: head.jobID, attempt: attempt)

        do {
            // 2. The job's row, looked up before the handler's slow part: a job an operator
            //    cancelled must not run even its `prepare` (an LLM call, say), so every delivery
            //    pays one primary-key read. A redelivery or retry may belong to a job that is
            //    already done: then acknowledge without running again. (Should a first delivery's
            //    row finish meanwhile, the job's transaction finds it finished and writes nothing.)
            //    A handler with a cheap, effect-free `prepare` skips the read on a first delivery:
            //    its claim still finds a cancelled row (see `looksUpBeforePrepare`).
            let lookUp = handler.looksUpBeforePrepare || delivery.redelivered || attempt > 1
            let status = lookUp ? try await finishedBefore(head.jobID, kind: handler.jobType) : nil
            if status == .cancelled {
                await acknowledgeCancelled(
                    delivery,
                    job: job,
                    handler: handler,
                    acknowledger: acknowledger,
                    logger: logger
                )
                return
            }
            if delivery.redelivered || attempt > 1, let status {
                logger.debug("job already finished; duplicate acknowledged", metadata: [LogKey.status: "\(status)"])
                metrics.recordJob(queue: queue, outcome: .duplicate)
                await settle(delivery, acknowledger: acknowledger, logger: logger)
                return
            }

            // 3. The handler's slow part, outside any transaction.
            let prepared = try await handler.prepare(job)

            // 4. The work, the job's row and its outbox messages: one transaction, shared with
            //    other jobs ready at the same moment (group commit).
            let result = try await trace.child("db.transaction", kind: .client) {
                try await batcher.commit(
                    PreparedJob(job: job, handler: handler, prepared: prepared, userID: head.userID)
                )
            }
            switch result {
            case .duplicate(.cancelled):
                // Cancelled between the look-up and the claim: the claim's row lock decided it.
                await acknowledgeCancelled(
                    delivery,
                    job: job,
                    handler: handler,
                    acknowledger: acknowledger,
                    logger: logger
                )
                return
            case .duplicate(let status):
                logger.debug(
                    "job finished concurrently; duplicate acknowledged",
                    metadata: [LogKey.status: "\(status)"]
                )
                metrics.recordJob(queue: queue, outcome: .duplicate)
            case .committed(let status, let messageCount, let measurements):
                if messageCount > 0 { outboxSignal.notify() }
                metrics.record(measurements)
                logger.debug("job committed", metadata: [LogKey.status: "\(status)"])
                metrics.recordJob(queue: queue, outcome: status == .succeeded ? .succeeded : .failed)
            }
            await settle(delivery, acknowledger: acknowledger, logger: logger)
        } catch let rejection as JobRejection {
            await reject(
                delivery,
                job: job,
                userID: head.userID,
                rejection: rejection,
                acknowledger: acknowledger,
                logger: logger
            )
        } catch {
            if error is CancellationError || Task.isCancelled {
                // Shutdown interrupted the job before its commit: nothing was written and the
                // delivery stays unacknowledged, so the broker redelivers it.
                logger.info("job interrupted by shutdown; it will be redelivered")
                return
            }
            switch FailureClassifier.classify(error) {
            case .permanent(let failure):
                // A retry would fail the same way: dead-lettered now, with its code.
                await reject(
                    delivery,
                    job: job,
                    userID: head.userID,
                    rejection: JobRejection(
                        code: failure.code,
                        message: failure.message,
                        publicReason: FailureLogging.publicReason(of: error)
                    ),
                    acknowledger: acknowledger,
                    logger: logger,
                    permanentFailure: true
                )
            case .transient:
                await retryOrDeadLetter(
                    delivery,
                    job: job,
                    userID: head.userID,
                    error: error,
                    acknowledger: acknowledger,
                    logger: logger
                )
            }
        }
    }

    // MARK: - Poison messages

    /// A body too large to read: rejected without requeue, so the broker moves the whole
    /// message to `<queue>.dead` (its `x-death` says `rejected`). When the kept ends of the body
    /// name its job, the job is recorded dead with `message-too-large` and its failed event
    /// published first, so the client hears why.
    private func refuseOversized(
        _ delivery: Delivery,
        attempt: Int,
        acknowledger: some DeliveryAcknowledger,
        logger: Logger
    ) async {
        let head = JobHead.find(in: delivery.withheldExcerpts)
        logger.warning(
            "message over MAX_MESSAGE_BYTES refused unread; the broker dead-letters it",
            metadata: [
                LogKey.reasonCode: "message-too-large", LogKey.messageBytes: "\(delivery.bodySize)",
                "message.id": "\(InputQuote.short(delivery.properties.messageID ?? ""))",
                LogKey.jobID: "\(head.map { "\($0.jobID)" } ?? "unknown")",
            ]
        )
        if let head, let handler = handlers[delivery.queue] {
            let job = JobEnvelope(jobID: head.jobID, type: handler.jobType, body: Data(), attempt: attempt)
            let error = JobError(
                code: .messageTooLarge,
                message: "the message has \(delivery.bodySize) bytes, more than this worker accepts "
                    + "(MAX_MESSAGE_BYTES); it was dead-lettered unread"
            )
            do {
                if case .recorded = try await recordDeadJob(
                    delivery,
                    job: job,
                    userID: head.userID,
                    error: error,
                    ending: .deadLetterSent
                ) {
                    outboxSignal.notify()
                }
            } catch {
                // Best effort: the broker keeps the message in `<queue>.dead` either way.
                logger.warning("could not record the oversized job", metadata: [LogKey.reason: "\(error)"])
            }
        }
        do {
            try await acknowledger.nack(delivery, requeue: false)
            metrics.recordJob(queue: delivery.queue, outcome: .rejected)
            metrics.recordDeadLetter(queue: delivery.queue, reason: ErrorCode.messageTooLarge.rawValue)
        } catch {
            logger.warning(
                "could not reject an oversized message; it will be redelivered",
                metadata: [LogKey.reason: "\(error)"]
            )
        }
    }

    /// Counts a delivery of a message the broker redelivered (or a quorum queue reports as
    /// delivered before), in the database, which survives the worker's crashes and takes back
    /// the deliveries the worker handed back itself (`giveBack`). The broker's `x-delivery-count`
    /// counts those too, and any publisher can set it on a message, so it stands in only when
    /// the database cannot be reached and the broker itself says the message was delivered before.
    /// - Returns: the deliveries so far, this one included.
    private func countDelivery(_ delivery: Delivery, logger: Logger) async -> Int {
        // A redelivered message was delivered at least once before.
        let least = delivery.redelivered ? 2 : 1
        let (store, queue, body) = (self.store, delivery.queue, delivery.body)
        do {
            return try await store.withConnection { transaction in
                try store.countDelivery(queue: queue, body: body, atLeast: least, in: transaction)
            }
        } catch {
            logger.debug("delivery not counted", metadata: [LogKey.reason: "\(error)"])
            guard delivery.redelivered else { return least }
            return max(DeliveryHeaders.earlierDeliveries(of: delivery), 1) + 1
        }
    }

    /// A message delivered more than `deliveryLimit` times without an outcome: dead-lettered
    /// as it is, without decoding or running it, then recorded dead when its head can be read.
    private func quarantine(
        _ delivery: Delivery,
        deliveries: Int,
        attempt: Int,
        acknowledger: some DeliveryAcknowledger,
        logger: Logger
    ) async {
        let rejection = JobRejection(
            code: .deliveryLimit,
            message: "delivered \(deliveries) times without an outcome (DELIVERY_LIMIT \(deliveryLimit)); "
                + "it may crash its worker, so it is quarantined unprocessed"
        )
        let head = try? JobHead.parse(delivery.body).get()
        // A message whose job is already finished is a duplicate (a redelivery whose
        // acknowledgement was lost, or a copy reusing a finished job's id): nothing to quarantine.
        if let head, let handler = handlers[delivery.queue],
            let status = try? await finishedBefore(head.jobID, kind: handler.jobType)
        {
            logger.info(
                "job already finished; over-delivered duplicate acknowledged",
                metadata: [LogKey.jobID: "\(head.jobID)", LogKey.status: "\(status)"]
            )
            metrics.recordJob(queue: delivery.queue, outcome: .duplicate)
            await settle(delivery, acknowledger: acknowledger, logger: logger)
            return
        }
        logger.error(
            "message quarantined after too many deliveries",
            metadata: [LogKey.reasonCode: "\(rejection.code)", LogKey.messageDeliveries: "\(deliveries)"]
        )
        guard await deadLetterDirectly(delivery, rejection: rejection, attempt: attempt, logger: logger) else {
            await giveBack(delivery, after: .seconds(1), acknowledger: acknowledger)
            return
        }
        metrics.recordJob(queue: delivery.queue, outcome: .rejected)
        metrics.recordDeadLetter(queue: delivery.queue, reason: rejection.code)
        // The dead letter is safe; the job's row, failed event and compensation (a report's
        // refund, decoded from the body — decoding is not what crashes a worker) follow when
        // the head parses (best effort: the operator has the dead letter either way).
        if let head, let handler = handlers[delivery.queue] {
            let job = JobEnvelope(jobID: head.jobID, type: handler.jobType, body: delivery.body, attempt: attempt)
            do {
                _ = try await recordDeadJob(
                    delivery,
                    job: job,
                    userID: head.userID,
                    error: rejection.jobError,
                    ending: .deadLetterSent
                )
                outboxSignal.notify()
            } catch {
                logger.warning("could not record the quarantined job", metadata: [LogKey.reason: "\(error)"])
            }
        }
        await settle(delivery, acknowledger: acknowledger, logger: logger)
    }

    // MARK: - Failures

    /// A job that cannot succeed: record it with its reason and put the `<type>.failed` event
    /// in the outbox, in one transaction; then acknowledge. A refusal of what the user asked
    /// (`ErrorCode.refusesTheUsersRequest`) ends `failed` with no dead letter: there is nothing
    /// for an operator to replay. Anything else (a broken message, a permanent failure) ends
    /// `dead`, with its dead letter in the same transaction.
    private func reject(
        _ delivery: Delivery,
        job: JobEnvelope,
        userID: UUID?,
        rejection: JobRejection,
        acknowledger: some DeliveryAcknowledger,
        logger: Logger,
        permanentFailure: Bool = false
    ) async {
        let refusal = !permanentFailure && ErrorCode(rawValue: rejection.code).refusesTheUsersRequest
        FailureLogging.log(
            permanentFailure
                ? "job failed in a way no retry can mend; dead-lettered"
                : refusal ? "job refused: the user's request cannot be granted" : "job rejected and dead-lettered",
            level: permanentFailure ? .error : refusal ? .info : .warning,
            code: rejection.code,
            publicReason: rejection.publicReason,
            detail: rejection.message,
            logger: logger
        )
        do {
            let recorded = try await recordDeadJob(
                delivery,
                job: job,
                userID: userID,
                error: rejection.jobError,
                ending: refusal ? .refused : .deadLettered
            )
            if case .finishedBefore(let status) = recorded {
                logger.info(
                    "job already finished; the duplicate's rejection changes nothing",
                    metadata: [LogKey.status: "\(status)"]
                )
                metrics.recordJob(queue: delivery.queue, outcome: .duplicate)
            } else {
                outboxSignal.notify()
                metrics.recordJob(queue: delivery.queue, outcome: .rejected)
                if !refusal { metrics.recordDeadLetter(queue: delivery.queue, reason: rejection.code) }
            }
            await settle(delivery, acknowledger: acknowledger, logger: logger)
        } catch {
            // The rejection could not be recorded (database down): try again later rather than
            // lose the failed event.
            await retryOrDeadLetter(
                delivery,
                job: job,
                userID: userID,
                error: error,
                acknowledger: acknowledger,
                logger: logger
            )
        }
    }

    /// A transient failure: another attempt through the delay queue, or dead-lettered when the
    /// attempts are used up.
    private func retryOrDeadLetter(
        _ delivery: Delivery,
        job: JobEnvelope,
        userID: UUID?,
        error: any Error,
        acknowledger: some DeliveryAcknowledger,
        logger: Logger
    ) async {
        let failure = FailureClassifier.classify(error).jobError
        let publicReason = FailureLogging.publicReason(of: error)
        guard retry.allowsAttempt(after: job.attempt) else {
            FailureLogging.log(
                "job failed on its last attempt; dead-lettered",
                level: .error,
                code: failure.code,
                publicReason: publicReason,
                detail: failure.message,
                logger: logger
            )
            let exhausted = JobError(
                code: .retriesExhausted,
                message: "failed \(job.attempt) times; last error: \(failure.message)"
            )
            do {
                if case .finishedBefore = try await recordDeadJob(delivery, job: job, userID: userID, error: exhausted)
                {
                    metrics.recordJob(queue: delivery.queue, outcome: .duplicate)
                    await settle(delivery, acknowledger: acknowledger, logger: logger)
                    return
                }
                outboxSignal.notify()
            } catch {
                // The database is still unavailable: the dead letter goes straight to the broker so
                // the message is kept; the job row and failed event cannot be written now.
                logger.error("could not record the dead job; publishing the dead letter directly")
                let rejection = JobRejection(code: exhausted.code, message: exhausted.message)
                guard await deadLetterDirectly(delivery, rejection: rejection, attempt: job.attempt, logger: logger)
                else {
                    await giveBack(delivery, after: .seconds(1), acknowledger: acknowledger)
                    return
                }
            }
            metrics.recordJob(queue: delivery.queue, outcome: .exhausted)
            metrics.recordDeadLetter(queue: delivery.queue, reason: exhausted.code)
            await settle(delivery, acknowledger: acknowledger, logger: logger)
            return
        }

        let delay = retry.delay(afterAttempt: job.attempt, random: Double.random(in: 0...1))
        let step = retry.ceiling(afterAttempt: job.attempt)
        var properties = DeliveryCopies.properties(of: delivery)
        properties.headers[BrokerNames.Header.attempt] = .int(Int64(job.attempt))
        properties.headers[BrokerNames.Header.reasonCode] = .string(failure.code)
        properties.headers[BrokerNames.Header.reasonMessage] = .string(String(failure.message.prefix(500)))
        properties.headers[BrokerNames.Header.originalQueue] = .string(delivery.queue)
        properties.expiration = String(delay.milliseconds)
        properties.persistent = true
        let copy = OutgoingMessage(
            exchange: BrokerNames.retryExchange,
            routingKey: RetryPolicy.delayQueueName(queue: delivery.queue, step: step),
            body: delivery.body,
            properties: properties,
            mandatory: true
        )
        do {
            try await publisher.publish(copy, timeout: .seconds(10))
        } catch {
            // Neither retry path is available: give the message back to the broker after a pause
            // (no hot loop), keeping its attempt count.
            logger.error(
                "could not schedule a retry; message returned to the queue",
                metadata: [LogKey.reason: "\(error)"]
            )
            await giveBack(delivery, after: min(step, .seconds(5)), acknowledger: acknowledger)
            return
        }
        FailureLogging.log(
            "job failed transiently; retry scheduled",
            level: .notice,
            code: failure.code,
            publicReason: publicReason,
            detail: failure.message,
            extra: ["retry.delay_ms": "\(delay.milliseconds)"],
            logger: logger
        )
        metrics.recordJob(queue: delivery.queue, outcome: .retried)
        metrics.recordRetry(queue: delivery.queue)
        // Best effort: `astroctl job` shows the attempt; the retry does not depend on it.
        let (store, jobID, type, attempt) = (self.store, job.jobID, job.type, job.attempt)
        _ = try? await store.withConnection { transaction in
            try store.recordAttempt(jobID: jobID, kind: type, attempt: attempt, error: failure, in: transaction)
        }
        await settle(delivery, acknowledger: acknowledger, logger: logger)
    }

    /// Whether a job of `kind` finished before (a duplicate delivery): its status if so.
    /// - Throws: the store's errors.
    private func finishedBefore(_ jobID: JobID, kind: JobType) async throws -> JobStatus? {
        let store = self.store
        return try await store.withConnection { try store.finishedBefore(jobID, kind: kind, in: $0) }
    }

    /// A job an operator cancelled before it started: acknowledged without running the handler,
    /// after its `<type>.cancelled` event and the handler's compensation (a consumed credit's
    /// refund, for `report.generate`) are in the outbox — enqueued once, by whichever delivery
    /// marks the row first (`JobStorage.announceCancellation`).
    private func acknowledgeCancelled(
        _ delivery: Delivery,
        job: JobEnvelope,
        handler: AnyJobHandler<Store.Transaction>,
        acknowledger: some DeliveryAcknowledger,
        logger: Logger
    ) async {
        let (store, jobID, type) = (self.store, job.jobID, job.type)
        do {
            let announced = try await store.withTransaction { transaction -> Bool in
                guard let cancelled = try store.announceCancellation(jobID, kind: type, in: transaction) else {
                    return false
                }
                let event = try OutboxMessage.event(
                    JobEvent(
                        jobID: jobID,
                        userID: cancelled.userID.map(UserID.init),
                        type: type.cancelledEvent,
                        error: cancelled.error
                    )
                )
                try store.enqueue(handler.compensation(job, cancelled.error) + [event], jobID: jobID, in: transaction)
                return true
            }
            if announced { outboxSignal.notify() }
            logger.info("cancelled job acknowledged without running", metadata: ["cancel.announced": "\(announced)"])
        } catch {
            // The announcement is not written: the message goes back, to be settled once the
            // database answers (nothing ran).
            logger.warning(
                "could not record a cancelled job's event; message returned",
                metadata: [LogKey.reason: "\(error)"]
            )
            await giveBack(delivery, after: .seconds(1), acknowledger: acknowledger)
            return
        }
        metrics.recordJob(queue: delivery.queue, outcome: .cancelled)
        await settle(delivery, acknowledger: acknowledger, logger: logger)
    }

    /// What `recordDeadJob` wrote.
    enum DeadRecord: Sendable {
        /// The job's row, its failed event, its compensation and any dead letter.
        case recorded
        /// Nothing: the job finished before with this status (the message was a duplicate).
        case finishedBefore(JobStatus)
        /// Only the dead letter: the id belongs to a job of another type, whose row and events
        /// are left alone.
        case reusedID
    }

    /// How a job that cannot succeed ends.
    enum Ending: Sendable {
        /// `dead`, its dead letter written in the same transaction.
        case deadLettered
        /// `dead`; its dead letter is already in the dead-letter queue (published directly, or
        /// moved there by the broker).
        case deadLetterSent
        /// `failed`: what the user asked was refused; no dead letter, unless the job's id is
        /// another job's (then the message is what is broken).
        case refused
    }

    /// Writes the job's row (dead, or failed for a refusal), the failed event, the handler's
    /// compensation and the dead letter `ending` asks for, in one transaction — unless the job
    /// finished before (then nothing) or its id is another job's (then only a dead letter not
    /// yet sent).
    private func recordDeadJob(
        _ delivery: Delivery,
        job: JobEnvelope,
        userID: UUID?,
        error: JobError,
        ending: Ending = .deadLettered
    ) async throws -> DeadRecord {
        let event = try OutboxMessage.event(
            JobEvent(jobID: job.jobID, userID: userID.map(UserID.init), type: job.type.failedEvent, error: error)
        )
        let deadLetter =
            ending == .deadLetterSent
            ? []
            : [DeliveryCopies.deadLetter(of: delivery, code: error.code, message: error.message, attempt: job.attempt)]
        // What the handler undoes for a job that will never succeed (a refund), committed with the
        // dead row so it can be neither lost nor sent twice.
        let compensation = handlers[delivery.queue]?.compensation(job, error) ?? []
        // The failed event, dead letter and compensation continue the job's trace.
        let trace = job.traceContext ?? JobTrace.active?.context
        let (tracedEvent, tracedDeadLetter, tracedCompensation) = (
            event.traced(by: trace), deadLetter.map { $0.traced(by: trace) }, compensation.map { $0.traced(by: trace) }
        )
        let (store, jobID, type, attempt) = (self.store, job.jobID, job.type, job.attempt)
        let status: JobStatus = ending == .refused ? .failed : .dead
        return try await store.withTransaction { transaction in
            let written = try store.finish(
                JobFinish(
                    jobID: jobID,
                    kind: type,
                    status: status,
                    attempts: attempt,
                    result: nil,
                    error: error,
                    userID: userID
                ),
                in: transaction
            )
            if written {
                try store.enqueue(
                    tracedCompensation + (ending == .refused ? [] : tracedDeadLetter) + [tracedEvent],
                    jobID: jobID,
                    in: transaction
                )
                return .recorded
            }
            switch try store.unclaimed(jobID, kind: type, in: transaction) {
            case .alreadyFinished(let status):
                return .finishedBefore(status)
            case .kindMismatch, .claimed:
                try store.enqueue(tracedDeadLetter, jobID: jobID, in: transaction)
                return .reusedID
            }
        }
    }

    /// Returns a delivery to its queue unsettled, after a pause so a persistent outage does not
    /// become a hot redelivery loop. The delivery was not a crash, so a count it added to its
    /// message's deliveries is taken back (best effort).
    private func giveBack(_ delivery: Delivery, after pause: Duration, acknowledger: some DeliveryAcknowledger) async {
        if delivery.redelivered {
            let (store, queue, body) = (self.store, delivery.queue, delivery.body)
            _ = try? await store.withConnection { transaction in
                try store.uncountDelivery(queue: queue, body: body, in: transaction)
            }
        }
        try? await Task.sleep(for: pause)
        try? await acknowledger.nack(delivery, requeue: true)
    }

    /// Publishes a dead letter without the database (unreadable message, or database down).
    /// - Returns: whether the broker confirmed it (only then may the delivery be acknowledged).
    private func deadLetterDirectly(
        _ delivery: Delivery,
        rejection: JobRejection,
        attempt: Int,
        logger: Logger
    ) async
        -> Bool
    {
        let deadLetter = DeliveryCopies.deadLetter(
            of: delivery,
            code: rejection.code,
            message: rejection.message,
            attempt: attempt
        )
        var properties = DeliveryCopies.properties(of: delivery)
        for (key, value) in deadLetter.headers { properties.headers[key] = .string(value) }
        let message = OutgoingMessage(
            exchange: deadLetter.exchange,
            routingKey: deadLetter.routingKey,
            body: delivery.body,
            properties: properties,
            mandatory: true
        )
        do {
            try await publisher.publish(message, timeout: .seconds(30))
            return true
        } catch {
            logger.error("could not publish a dead letter", metadata: [LogKey.reason: "\(error)"])
            return false
        }
    }

    /// Acknowledges after the outcome is durable. A delivery from a connection that has since
    /// dropped cannot be acknowledged; the broker redelivers it and the idempotency check
    /// settles it then, so that is not an error.
    private func settle(_ delivery: Delivery, acknowledger: some DeliveryAcknowledger, logger: Logger) async {
        do {
            try await acknowledger.ack(delivery)
        } catch  where error.kind == .staleDelivery || error.kind == .closed {
            logger.info("delivery outlived its connection; the redelivery will be recognised as done")
        } catch {
            logger.warning(
                "acknowledgement failed; the message will be redelivered",
                metadata: [LogKey.reason: "\(error)"]
            )
        }
    }

}

/// The copies of a delivery the runtime publishes itself: retry copies and dead letters.
enum DeliveryCopies {
    /// The properties a retry copy or dead letter of a delivery carries: the identifying ones
    /// (content type and encoding, message, correlation and app ids, type, reply-to) and the
    /// runtime's own `x-astro-*` headers, persistent. Everything else a publisher set stays
    /// behind: `CC`/`BCC` headers would make the broker route the worker's copy to queues of the
    /// publisher's choosing, and a sender's timestamp or header tables could make the copy
    /// impossible to encode.
    static func properties(of delivery: Delivery) -> MessageProperties {
        let original = delivery.properties
        var headers: AMQPTable = [:]
        for key in [BrokerNames.Header.attempt, BrokerNames.Header.originalQueue] {
            if let value = original.headers[key], case .string(let text) = value, text.utf8.count <= 256 {
                headers[key] = .string(text)
            } else if let value = original.headers[key], case .int = value {
                headers[key] = value
            }
        }
        // AMQP short strings hold 255 bytes. A received value counts its bytes after invalid
        // UTF-8 became U+FFFD (three bytes each), so it is cut by bytes, at a scalar boundary:
        // cut by characters, a copy could not be encoded and its retry or dead letter failed.
        func short(_ text: String?) -> String? { text.map { TextRules.prefix($0, utf8Bytes: 255) } }
        // A retry copy or dead letter stays in the job's trace (the delivery's own when untraced).
        headers.setTraceContext(JobTrace.active?.context ?? JobTrace.incomingContext(of: delivery))
        return MessageProperties(
            contentType: short(original.contentType),
            contentEncoding: short(original.contentEncoding),
            headers: headers,
            persistent: true,
            correlationID: short(original.correlationID),
            replyTo: short(original.replyTo),
            messageID: short(original.messageID),
            type: short(original.type),
            appID: short(original.appID)
        )
    }

    /// The dead letter of a delivery: its body, to `<queue>.dead` through `astro.retry` (the
    /// exchange of a worker's own queues), with the reason in headers.
    static func deadLetter(of delivery: Delivery, code: String, message: String, attempt: Int) -> OutboxMessage {
        OutboxMessage(
            exchange: BrokerNames.retryExchange,
            routingKey: BrokerNames.deadLetterQueue(of: delivery.queue),
            body: delivery.body,
            headers: [
                BrokerNames.Header.reasonCode: code,
                BrokerNames.Header.reasonMessage: String(message.prefix(1000)),
                BrokerNames.Header.originalQueue: delivery.queue,
                BrokerNames.Header.attempt: String(attempt),
                BrokerNames.Header.deadLetteredAt: ISO8601.string(from: Date()),
            ],
            mandatory: true
        )
    }
}

/// The fields every job body has, read before the handler decodes its own payload.
struct JobHead: Sendable {
    var jobID: JobID
    var userID: UUID?

    private struct Fields: Decodable {
        var jobId: String?
        var userId: String?

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            jobId = try container.decodeIfPresent(String.self, forKey: .jobId)
            // A userId of another shape is the handler's to reject, not the envelope's.
            userId = try? container.decodeIfPresent(String.self, forKey: .userId)
        }

        enum CodingKeys: String, CodingKey {
            case jobId, userId
        }
    }

    /// The job id (and user id) named in pieces of a body too large to parse: the first
    /// `"jobId": "<uuid>"` found, nil when none is.
    static func find(in excerpts: [Data]) -> JobHead? {
        func uuid(_ key: String, in text: String) -> UUID? {
            guard let range = text.range(of: "\"\(key)\"") else { return nil }
            var rest = text[range.upperBound...].drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
            guard rest.first == ":" else { return nil }
            rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
            guard rest.first == "\"" else { return nil }
            return UUID(text: String(rest.dropFirst().prefix(36)))
        }
        for excerpt in excerpts {
            let text = String(decoding: excerpt, as: UTF8.self)
            if let id = uuid("jobId", in: text) {
                return JobHead(
                    jobID: JobID(id),
                    userID: excerpts.lazy.compactMap {
                        uuid("userId", in: String(decoding: $0, as: UTF8.self))
                    }.first
                )
            }
        }
        return nil
    }

    static func parse(_ body: Data) -> Result<JobHead, JobRejection> {
        // One decoding pass: a body that is not a JSON object fails to decode as `Fields`.
        let fields: Fields
        do {
            fields = try JSONDecoder().decode(Fields.self, from: body)
        } catch DecodingError.typeMismatch(_, let context) where context.codingPath.first?.stringValue == "jobId" {
            return .failure(JobRejection(code: .missingJobID, message: "the body has no string field \"jobId\""))
        } catch {
            return .failure(JobRejection(code: .invalidJSON, message: "the body is not a JSON object"))
        }
        guard let text = fields.jobId else {
            return .failure(JobRejection(code: .missingJobID, message: "the body has no string field \"jobId\""))
        }
        guard let jobID = JobID(text) else {
            return .failure(
                JobRejection(code: .invalidJobID, message: "jobId \(InputQuote.short(text)) is not a UUID")
            )
        }
        return .success(JobHead(jobID: jobID, userID: fields.userId.flatMap(UUID.init(text:))))
    }
}
