import AMQP
import AstroDomain
import Foundation
import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// Group commit and its replay, against the in-memory store.
@Suite(.timeLimit(.minutes(1))) struct GroupCommitReplayTests {
    let handler = TestHandler()
    let queue = TestHandler.jobType.rawValue

    /// Processes `first` alone while transactions are held, then `others` while it waits, so they
    /// queue up behind it and share the next transaction; returns once all are settled.
    func commitBehindOne(
        _ runtime: InMemoryRuntime,
        first: Delivery,
        others: [Delivery]
    ) async throws {
        runtime.store.pauseTransactions()
        async let firstDone: Void = runtime.process(first)
        #expect(await eventually { runtime.store.waitingTransactions == 1 })
        async let othersDone: Void = runtime.processConcurrently(others)
        // Each prepares, then waits in the batcher's queue (the one committer is busy).
        #expect(await eventually { handler.preparedInAll == 1 + others.count })
        // (A margin for a thread preempted between its prepare's return and its enqueue.)
        try await Task.sleep(for: .milliseconds(100))
        runtime.store.resumeTransactions()
        _ = await (firstDone, othersDone)
    }

    @Test func jobsReadyTogetherShareOneTransaction() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let first = TestDeliveries.job(TestHandler.jobType)
        let others = (0..<3).map { _ in TestDeliveries.job(TestHandler.jobType, fields: ["events": 1]) }

        try await commitBehindOne(runtime, first: first, others: others)

        #expect(runtime.acknowledger.settlements.count == 4)
        #expect(
            Set(runtime.acknowledger.settlements)
                == Set(([first] + others).map { InMemoryAcknowledger.Settlement.ack(deliveryTag: $0.deliveryTag) })
        )
        // The lone job committed at once; the three behind it in one claim and one transaction.
        let claims = runtime.store.claims
        #expect(claims.count == 2)
        #expect(claims.first?.count == 1)
        #expect(Set(claims.last ?? []) == Set(others.map { jobID(of: $0) }))
        #expect(runtime.store.committedTransactions == 2)
        for delivery in others {
            #expect(runtime.store.job(jobID(of: delivery))?.status == .succeeded)
            #expect(runtime.store.outbox(of: jobID(of: delivery)).count == 1)
        }
        #expect(runtime.metrics.render().contains("astro_commit_batch_jobs_total 4"))
    }

    /// PostgreSQL's way: first deliveries written without a claim, each row once, in the same
    /// one transaction per batch.
    @Test func firstDeliveriesAreWrittenUnclaimedTogether() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        runtime.store.writesFirstDeliveriesUnclaimed = true
        let first = TestDeliveries.job(TestHandler.jobType)
        let others = (0..<3).map { _ in TestDeliveries.job(TestHandler.jobType, fields: ["events": 1]) }

        try await commitBehindOne(runtime, first: first, others: others)

        #expect(
            Set(runtime.acknowledger.settlements)
                == Set(([first] + others).map { InMemoryAcknowledger.Settlement.ack(deliveryTag: $0.deliveryTag) })
        )
        #expect(runtime.store.claims.isEmpty)
        #expect(runtime.store.committedTransactions == 2)
        for delivery in [first] + others {
            let id = jobID(of: delivery)
            #expect(runtime.store.job(id)?.status == .succeeded)
            #expect(runtime.store.value(forKey: "job:\(id)") == "done")
        }
        for delivery in others { #expect(runtime.store.outbox(of: jobID(of: delivery)).count == 1) }
    }

    /// A batch with a row already finished: the unclaimed attempt rolls back whole (nothing of
    /// it stays) and the claiming transaction writes the others and passes the duplicate over.
    @Test func anUnclaimedBatchMeetingAFinishedRowIsRedoneClaiming() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        runtime.store.writesFirstDeliveriesUnclaimed = true
        let first = TestDeliveries.job(TestHandler.jobType)
        let batch = (0..<3).map { _ in TestDeliveries.job(TestHandler.jobType, fields: ["events": 1]) }
        let done = jobID(of: batch[1])
        runtime.store.insert(.init(id: done, kind: TestHandler.jobType.rawValue, status: .succeeded, attempts: 1))

        try await commitBehindOne(runtime, first: first, others: batch)

        #expect(runtime.acknowledger.settlements.count == 4)
        #expect(Set(runtime.store.claims.last ?? []) == Set(batch.map { jobID(of: $0) }))
        for neighbour in [batch[0], batch[2]] {
            let id = jobID(of: neighbour)
            #expect(runtime.store.job(id)?.status == .succeeded)
            #expect(runtime.store.outbox(of: id).count == 1)
        }
        // The finished job's rolled-back writes left nothing behind.
        #expect(runtime.store.value(forKey: "job:\(done)") == nil)
        #expect(runtime.store.outbox(of: done).isEmpty)
    }

    @Test func aFailingJobInABatchIsReplayedAloneAndSparesItsNeighbours() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let first = TestDeliveries.job(TestHandler.jobType)
        let before = TestDeliveries.job(TestHandler.jobType, fields: ["events": 1])
        let culprit = TestDeliveries.job(TestHandler.jobType, fields: ["commit": "reject", "events": 1])
        let after = TestDeliveries.job(TestHandler.jobType, fields: ["events": 1])
        let batch = [before, culprit, after]

        try await commitBehindOne(runtime, first: first, others: batch)

        // Every delivery is settled once, the culprit too (dead-lettered, so acknowledged).
        #expect(
            Set(runtime.acknowledger.settlements)
                == Set(([first] + batch).map { InMemoryAcknowledger.Settlement.ack(deliveryTag: $0.deliveryTag) })
        )
        let claims = runtime.store.claims
        // The shared claim, then each job of the failed batch again on its own.
        #expect(claims.count == 5)
        #expect(Set(claims[1]) == Set(batch.map { jobID(of: $0) }))
        #expect(Set(claims[2...].map { $0 }) == Set(batch.map { [jobID(of: $0)] }))
        for neighbour in [before, after] {
            let id = jobID(of: neighbour)
            #expect(runtime.store.job(id)?.status == .succeeded)
            #expect(runtime.store.value(forKey: "job:\(id)") == "done")
            // Its event once: the rolled-back batch left none behind.
            #expect(runtime.store.outbox(of: id).map(\.message.routingKey) == [TestHandler.doneEvent])
        }
        let culpritID = jobID(of: culprit)
        let row = try #require(runtime.store.job(culpritID))
        #expect(row.status == .dead)
        #expect(row.error?.code == "test-constraint")
        #expect(runtime.store.value(forKey: "job:\(culpritID)") == nil)
        #expect(!runtime.store.outbox(of: culpritID).map(\.message.routingKey).contains(TestHandler.doneEvent))
    }

    @Test func aDatabaseOutageDuringTheCommitSchedulesARetry() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let delivery = TestDeliveries.job(TestHandler.jobType)
        runtime.store.failNextTransactions(throwing: ScriptedFailure(failureCode: "db-down", isTransient: true))

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        let copy = try #require(runtime.publisher.published(to: BrokerNames.retryExchange).first)
        #expect(copy.header(BrokerNames.Header.reasonCode) == "db-down")
        #expect(runtime.store.job(jobID(of: delivery))?.status == .queued)
    }

    @Test func aJobTheStoresClaimLeavesUnansweredIsRetriedNotTakenForFinished() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let delivery = TestDeliveries.job(TestHandler.jobType, fields: ["events": 1])
        let id = jobID(of: delivery)
        runtime.store.omitFromClaims(id)

        await runtime.process(delivery)

        // Before, the missing answer counted as "finished, succeeded": acknowledged as a
        // duplicate, never run. Now the transaction rolls back and the job is retried.
        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(handler.commits(of: id) == 0)
        let copy = try #require(runtime.publisher.published(to: BrokerNames.retryExchange).first)
        #expect(copy.header(BrokerNames.Header.reasonCode) == "job-claim-missing")
        #expect(copy.header(BrokerNames.Header.attempt) == "1")
        let row = try #require(runtime.store.job(id))
        #expect(row.status == .queued)
        #expect(row.error?.code == "job-claim-missing")
        #expect(runtime.store.outbox.isEmpty)
        #expect(runtime.metrics.render().contains("outcome=\"retried\""))
        #expect(!runtime.metrics.render().contains("outcome=\"duplicate\""))

        // A store that keeps failing so still ends the job visibly: dead after the last attempt.
        var next = TestDeliveries.redelivery(ofRetry: copy, queue: queue)
        await runtime.process(next)
        next = TestDeliveries.redelivery(
            ofRetry: try #require(runtime.publisher.published(to: BrokerNames.retryExchange).last),
            queue: queue
        )
        await runtime.process(next)
        #expect(runtime.store.job(id)?.status == .dead)
        #expect(runtime.store.job(id)?.error?.code == "retries-exhausted")
        #expect(
            runtime.store.outbox(of: id).map(\.message.routingKey).contains(TestHandler.jobType.failedEvent.rawValue)
        )
    }

    @Test func aJobLeftOutOfABatchsClaimDoesNotTakeItsNeighboursDown() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let first = TestDeliveries.job(TestHandler.jobType)
        let batch = (0..<3).map { _ in TestDeliveries.job(TestHandler.jobType, fields: ["events": 1]) }
        let lost = jobID(of: batch[1])
        runtime.store.omitFromClaims(lost)

        try await commitBehindOne(runtime, first: first, others: batch)

        #expect(runtime.acknowledger.settlements.count == 4)
        #expect(runtime.store.claims.count == 5)
        for neighbour in [batch[0], batch[2]] {
            #expect(runtime.store.job(jobID(of: neighbour))?.status == .succeeded)
            #expect(runtime.store.outbox(of: jobID(of: neighbour)).count == 1)
        }
        #expect(handler.commits(of: lost) == 0)
        #expect(runtime.store.job(lost)?.status == .queued)
        let copy = try #require(runtime.publisher.published(to: BrokerNames.retryExchange).first)
        #expect(copy.body == batch[1].body)
    }

    func jobID(of delivery: Delivery) -> JobID {
        let object = try? JSONDecoder().decode([String: JSONValue].self, from: delivery.body)
        return object?["jobId"]?.stringValue.flatMap(JobID.init) ?? JobID.random()
    }
}

/// The outbox hand-off: events committed with a job are published by the relay and marked sent.
@Suite(.timeLimit(.minutes(1))) struct OutboxRelayHandOffTests {
    let handler = TestHandler()

    @Test func committedEventsArePublishedByTheRelayAndMarkedSent() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let jobID = JobID.random()
        await runtime.process(TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["events": 2]))
        let rows = runtime.store.outbox(of: jobID)
        #expect(rows.count == 2)
        #expect(rows.allSatisfy { !$0.isSent })

        await runtime.relayOutbox()

        let published = runtime.publisher.published(to: BrokerNames.eventsExchange, routingKey: TestHandler.doneEvent)
        #expect(published.map(\.body) == rows.map(\.message.body))
        #expect(published.map(\.properties.messageID) == rows.map { $0.messageID.uuidString.lowercased() })
        #expect(published.allSatisfy { $0.properties.correlationID == jobID.description && $0.properties.persistent })
        #expect(runtime.store.outbox(of: jobID).allSatisfy { $0.isSent })

        // Sent rows are not published again.
        runtime.store.expireOutboxClaims()
        await runtime.relayOutbox()
        #expect(runtime.publisher.published.count == 2)
    }

    @Test func aRefusedEventStaysUnsentForTheNextRound() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let jobID = JobID.random()
        await runtime.process(TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["events": 2]))
        runtime.publisher.script(.nack, .confirm)

        await runtime.relayOutbox()

        var rows = runtime.store.outbox(of: jobID)
        #expect(rows.map(\.isSent) == [false, true])
        #expect(rows[0].attempts == 1)
        #expect(rows[0].lastError?.contains("nack") == true)
        // Released after a back-off pause: the next round leaves it alone until then...
        await runtime.relayOutbox()
        #expect(runtime.publisher.published.count == 1)
        // ...and publishes it once the pause is over.
        runtime.store.expireOutboxClaims()
        await runtime.relayOutbox()
        rows = runtime.store.outbox(of: jobID)
        #expect(rows.allSatisfy { $0.isSent })
        #expect(runtime.publisher.published.map(\.body) == [rows[1].message.body, rows[0].message.body])
    }

    @Test func aBrokerOutageLeavesEveryEventForALaterRound() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let jobID = JobID.random()
        await runtime.process(TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["events": 3]))
        runtime.publisher.setStandingOutcome(.fail(AMQPError(kind: .connectionLost, message: "broker gone")))

        await runtime.relayOutbox()

        #expect(runtime.publisher.published.isEmpty)
        #expect(runtime.store.outbox(of: jobID).allSatisfy { !$0.isSent && $0.attempts == 1 })

        runtime.publisher.setStandingOutcome(.confirm)
        runtime.store.expireOutboxClaims()
        await runtime.relayOutbox()
        #expect(runtime.publisher.published.count == 3)
        #expect(runtime.store.outbox(of: jobID).allSatisfy { $0.isSent })
    }

    @Test func rowsNobodyHandedOverArePickedUpByPolling() async throws {
        // A process that died between commit and publish leaves claimed rows; once their lease
        // ends, any relay's round publishes them.
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let jobID = JobID.random()
        await runtime.process(TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["events": 1]))
        // The same rows seen by a relay that was not handed them: held by the lease at first.
        let store = runtime.store
        let claimable = try await store.withConnection {
            try store.claimPending(limit: 10, lease: .seconds(30), in: $0)
        }
        #expect(claimable.isEmpty)
        store.expireOutboxClaims()
        let lapsed = try await store.withConnection { try store.claimPending(limit: 10, lease: .seconds(30), in: $0) }
        #expect(lapsed.map(\.jobID) == [jobID.uuid])
    }
}

/// The consumer service's graceful drain, with an in-memory consumer.
@Suite(.timeLimit(.minutes(1))) struct ConsumerDrainTests {
    let handler = TestHandler()
    let logger = Logger(label: "drain-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func inFlightJobsFinishAndAreAcknowledgedBeforeTheConsumerCloses() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let consumer = InMemoryConsumer()
        let service = ConsumerService(
            consumer: consumer,
            processor: runtime.processor,
            drainTimeout: .seconds(30),
            logger: logger
        )
        let slow = TestDeliveries.job(TestHandler.jobType, fields: ["prepare": "wait"])
        try await testGracefulShutdown { trigger in
            async let run: Void = service.run()
            #expect(await eventually { consumer.isStarted })
            consumer.deliver(slow)
            #expect(await eventually { handler.gate.waiting == 1 })

            trigger.triggerGracefulShutdown()
            #expect(await eventually { consumer.isStopped })
            // Consuming stopped, but the job in flight goes on: the consumer stays open for its ack.
            #expect(!consumer.isClosed)
            #expect(!consumer.deliver(TestDeliveries.job(TestHandler.jobType)))
            handler.gate.open()

            try await run
        }
        #expect(consumer.isClosed)
        #expect(consumer.acknowledger.settlements == [.ack(deliveryTag: slow.deliveryTag)])
        #expect(handler.preparesInAll == 1)
    }

    @Test func jobsStillRunningAtTheDrainDeadlineAreCancelledUnacknowledged() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let consumer = InMemoryConsumer()
        let service = ConsumerService(
            consumer: consumer,
            processor: runtime.processor,
            drainTimeout: .milliseconds(100),
            logger: logger
        )
        let stuck = TestDeliveries.job(TestHandler.jobType, fields: ["prepare": "wait"])
        let quick = TestDeliveries.job(TestHandler.jobType)
        try await testGracefulShutdown { trigger in
            async let run: Void = service.run()
            #expect(await eventually { consumer.isStarted })
            consumer.deliver(stuck)
            consumer.deliver(quick)
            #expect(await eventually { consumer.acknowledger.settlements.count == 1 && handler.gate.waiting == 1 })

            trigger.triggerGracefulShutdown()
            try await run
        }
        // The broker gets the stuck job back when the connection closes: nothing settled it,
        // and nothing of it was written.
        #expect(consumer.isClosed)
        #expect(consumer.acknowledger.settlements == [.ack(deliveryTag: quick.deliveryTag)])
        #expect(handler.gate.waiting == 0)
        #expect(runtime.store.jobs.count == 1)
    }

    @Test func aConsumerThatCannotStartYetIsRetried() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let consumer = InMemoryConsumer()
        consumer.failNextStarts(AMQPError(kind: .connectionFailed, message: "broker restarting"))
        let service = ConsumerService(
            consumer: consumer,
            processor: runtime.processor,
            drainTimeout: .seconds(1),
            logger: logger
        )
        let delivery = TestDeliveries.job(TestHandler.jobType)
        try await testGracefulShutdown { trigger in
            async let run: Void = service.run()
            #expect(await eventually { consumer.isStarted })
            consumer.deliver(delivery)
            #expect(await consumer.acknowledger.waitForSettlements(1))
            trigger.triggerGracefulShutdown()
            try await run
        }
        #expect(consumer.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
    }

    @Test func aStartErrorNoRetryCanMendEndsTheService() async throws {
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let consumer = InMemoryConsumer()
        consumer.failNextStarts(AMQPError(kind: .authenticationFailed, message: "wrong password"))
        let service = ConsumerService(
            consumer: consumer,
            processor: runtime.processor,
            drainTimeout: .seconds(1),
            logger: logger
        )
        await #expect(throws: AMQPError.self) {
            try await testGracefulShutdown { _ in try await service.run() }
        }
        #expect(!consumer.isStarted)
    }
}
