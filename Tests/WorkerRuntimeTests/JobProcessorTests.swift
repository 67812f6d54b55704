import AMQP
import AstroDomain
import Foundation
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// The processor's decisions, against the in-memory store, publisher and acknowledger.
@Suite(.timeLimit(.minutes(1))) struct JobProcessorTests {
    let handler = TestHandler()
    let queue = TestHandler.jobType.rawValue

    func runtime(deliveryLimit: Int = 3, commitBatchSize: Int = 32) -> InMemoryRuntime {
        InMemoryRuntime(
            handlers: [handler.handler],
            retry: testRetryPolicy,
            commitBatchSize: commitBatchSize,
            deliveryLimit: deliveryLimit
        )
    }

    // MARK: - Claim and commit

    @Test func aFirstDeliveryIsClaimedRunCommittedAndAcknowledged() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        let userID = UUID()
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID, userID: userID, fields: ["events": 1])

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        let row = try #require(runtime.store.job(jobID))
        #expect(row.status == .succeeded)
        #expect(row.kind == queue)
        #expect(row.attempts == 1)
        #expect(row.userID == userID)
        #expect(row.result == ["ok": true])
        #expect(runtime.store.value(forKey: "job:\(jobID)") == "done")
        #expect(runtime.store.claims == [[jobID]])
        // The event waits in the outbox, committed with the job, until the relay publishes it.
        #expect(runtime.store.outbox(of: jobID).map(\.message.routingKey) == [TestHandler.doneEvent])
        #expect(runtime.publisher.published.isEmpty)
    }

    // MARK: - Duplicates

    @Test func aRedeliveryOfAFinishedJobIsAcknowledgedWithoutRunning() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        runtime.store.insert(.init(id: jobID, kind: queue, status: .succeeded, result: ["first": true]))
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID, redelivered: true)

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(handler.prepares(of: jobID) == 0)
        #expect(handler.commits(of: jobID) == 0)
        #expect(runtime.store.job(jobID)?.result == ["first": true])
        #expect(runtime.store.outbox.isEmpty)
        #expect(runtime.publisher.published.isEmpty && runtime.publisher.refused.isEmpty)
    }

    @Test func aFirstDeliveryReusingAFinishedJobsIDWritesNothing() async throws {
        // A first delivery skips the look-up; the job's transaction finds the finished row.
        let runtime = runtime()
        let jobID = JobID.random()
        runtime.store.insert(.init(id: jobID, kind: queue, status: .failed, error: JobError(code: "x", message: "y")))
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["events": 2])

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(handler.commits(of: jobID) == 0)
        #expect(runtime.store.job(jobID)?.status == .failed)
        #expect(runtime.store.value(forKey: "job:\(jobID)") == nil)
        #expect(runtime.store.outbox.isEmpty)
    }

    @Test func aJobIDUsedForAnotherJobTypeIsRejectedWithoutTouchingThatJob() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        runtime.store.insert(.init(id: jobID, kind: "other.kind", status: .running))
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID)

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(runtime.store.job(jobID)?.kind == "other.kind")
        #expect(runtime.store.job(jobID)?.status == .running)
        // Only the dead letter, through the outbox: the other job's events are not ours to send.
        let rows = runtime.store.outbox(of: jobID)
        #expect(rows.map(\.message.routingKey) == [BrokerNames.deadLetterQueue(of: queue)])
        #expect(rows.first?.message.headers[BrokerNames.Header.reasonCode] == "job-id-reused")
    }

    // MARK: - Retries and dead letters

    @Test func aTransientFailureIsRetriedWithAGrowingAttemptThenDeadLetteredWhenAttemptsRunOut() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        let user = UUID()
        var delivery = TestDeliveries.job(
            TestHandler.jobType,
            jobID: jobID,
            userID: user,
            fields: ["prepare": "transient"]
        )

        for attempt in 1...2 {
            await runtime.process(delivery)
            #expect(runtime.acknowledger.settlements(of: delivery) == [.ack(deliveryTag: delivery.deliveryTag)])
            let copies = runtime.publisher.published(to: BrokerNames.retryExchange)
            #expect(copies.count == attempt)
            let copy = try #require(copies.last)
            // Through the retry exchange to the delay queue of this attempt's step.
            let step = testRetryPolicy.ceiling(afterAttempt: attempt)
            #expect(copy.routingKey == RetryPolicy.delayQueueName(queue: queue, step: step))
            #expect(copy.header(BrokerNames.Header.attempt) == "\(attempt)")
            #expect(copy.header(BrokerNames.Header.reasonCode) == "test-transient")
            #expect(copy.header(BrokerNames.Header.originalQueue) == queue)
            #expect(copy.body == delivery.body)
            #expect(copy.mandatory)
            let expiration = try #require(copy.properties.expiration.flatMap { Int64($0) })
            #expect(expiration <= step.components.seconds * 1000 + step.components.attoseconds / 1_000_000_000_000_000)
            // The attempt is noted on the job's row; it stays open.
            let row = try #require(runtime.store.job(jobID))
            #expect(row.status == .queued)
            #expect(row.attempts == attempt)
            #expect(row.error?.code == "test-transient")
            delivery = TestDeliveries.redelivery(ofRetry: copy, queue: queue)
        }
        #expect(runtime.store.outbox.isEmpty)

        // The third attempt is the last one (MAX_ATTEMPTS 3): dead-lettered, no further copy.
        await runtime.process(delivery)
        #expect(runtime.acknowledger.settlements(of: delivery) == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(runtime.publisher.published(to: BrokerNames.retryExchange).count == 2)
        #expect(handler.prepares(of: jobID) == 3)
        let row = try #require(runtime.store.job(jobID))
        #expect(row.status == .dead)
        #expect(row.attempts == 3)
        #expect(row.error?.code == "retries-exhausted")
        // Compensation, dead letter and failed event, committed with the dead row, in that order.
        let rows = runtime.store.outbox(of: jobID)
        #expect(
            rows.map(\.message.routingKey) == [
                TestHandler.refund.rawValue, BrokerNames.deadLetterQueue(of: queue),
                TestHandler.jobType.failedEvent.rawValue,
            ]
        )
        #expect(rows[1].message.exchange == BrokerNames.retryExchange)
        #expect(rows[1].message.headers[BrokerNames.Header.reasonCode] == "retries-exhausted")
        #expect(rows[1].message.headers[BrokerNames.Header.attempt] == "3")
        // The failed event names the job's user, so the gateway can deliver it to that user.
        let event = try JSONDecoder().decode(JSONValue.self, from: rows[2].message.body)
        #expect(event["userId"]?.stringValue == user.uuidString.lowercased())
    }

    @Test(arguments: [("permanent", "test-permanent"), ("reject", "test-invalid")])
    func aPermanentFailureIsDeadLetteredAtOnceWithItsCode(script: String, code: String) async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        let user = UUID()
        let delivery = TestDeliveries.job(
            TestHandler.jobType,
            jobID: jobID,
            userID: user,
            fields: ["prepare": .string(script)]
        )

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        #expect(runtime.publisher.published(to: BrokerNames.retryExchange).isEmpty)
        let row = try #require(runtime.store.job(jobID))
        #expect(row.status == .dead)
        #expect(row.attempts == 1)
        #expect(row.error?.code == code)
        let rows = runtime.store.outbox(of: jobID)
        let deadLetter = try #require(rows.first { $0.message.routingKey == BrokerNames.deadLetterQueue(of: queue) })
        #expect(deadLetter.message.headers[BrokerNames.Header.reasonCode] == code)
        #expect(deadLetter.message.body == delivery.body)
        let failed = try #require(rows.first { $0.message.routingKey == TestHandler.jobType.failedEvent.rawValue })
        #expect(String(decoding: failed.message.body, as: UTF8.self).contains(code))
        let event = try JSONDecoder().decode(JSONValue.self, from: failed.message.body)
        #expect(event["userId"]?.stringValue == user.uuidString.lowercased())
    }

    @Test func aRefusedRequestEndsFailedWithItsEventAndNoDeadLetter() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        let delivery = TestDeliveries.job(
            TestHandler.jobType,
            jobID: jobID,
            userID: UUID(),
            fields: ["prepare": "refuse"]
        )

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        let row = try #require(runtime.store.job(jobID))
        #expect(row.status == .failed, "a refusal of what the user asked is failed, not the operator's dead")
        #expect(row.error?.code == ErrorCode.duplicateProfileName.rawValue)
        // The refund and the failed event, and nothing in the dead-letter queue for an operator.
        #expect(
            runtime.store.outbox(of: jobID).map(\.message.routingKey) == [
                TestHandler.refund.rawValue, TestHandler.jobType.failedEvent.rawValue,
            ]
        )
    }

    @Test func aBrokenMessageIsDeadLetteredEvenWithAClientErrorCode() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["prepare": "refuse-broken"])

        await runtime.process(delivery)

        #expect(try #require(runtime.store.job(jobID)).status == .dead)
        #expect(
            runtime.store.outbox(of: jobID).contains { $0.message.routingKey == BrokerNames.deadLetterQueue(of: queue) }
        )
    }

    @Test func aRetryThatCannotBePublishedReturnsTheMessageToItsQueue() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        runtime.publisher.script(.nack)
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["prepare": "transient"])

        await runtime.process(delivery)

        // Not acknowledged: the retry copy was not confirmed, so the message must stay on the broker.
        #expect(runtime.acknowledger.settlements == [.nack(deliveryTag: delivery.deliveryTag, requeue: true)])
        #expect(runtime.publisher.refused.count == 1)
        #expect(runtime.store.job(jobID) == nil)
    }

    @Test func anUnreadableBodyIsDeadLetteredDirectly() async throws {
        let runtime = runtime()
        let delivery = TestDeliveries.raw(queue: queue, body: Data("not json".utf8))

        await runtime.process(delivery)

        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: delivery.deliveryTag)])
        let deadLetter = try #require(runtime.publisher.published.first)
        #expect(deadLetter.exchange == BrokerNames.retryExchange)
        #expect(deadLetter.routingKey == BrokerNames.deadLetterQueue(of: queue))
        #expect(deadLetter.header(BrokerNames.Header.reasonCode) == "invalid-json")
        #expect(handler.preparesInAll == 0)
    }

    // MARK: - Delivery limit

    @Test func aMessageDeliveredTooOftenWithoutAnOutcomeIsQuarantinedUnrun() async throws {
        let runtime = runtime(deliveryLimit: 3)
        let jobID = JobID.random()
        let first = TestDeliveries.job(TestHandler.jobType, jobID: jobID, fields: ["prepare": "interrupt"])

        // Each delivery ends without an outcome, as when the worker crashes on it.
        await runtime.process(first)
        for _ in 1...2 { await runtime.process(TestDeliveries.redelivery(of: first)) }
        #expect(runtime.acknowledger.settlements.isEmpty)
        #expect(handler.prepares(of: jobID) == 3)
        #expect(runtime.store.deliveries(queue: queue, body: first.body) == 3)

        // The fourth delivery is over the limit: dead-lettered as it is, without running.
        let fourth = TestDeliveries.redelivery(of: first)
        await runtime.process(fourth)
        #expect(handler.prepares(of: jobID) == 3)
        #expect(runtime.acknowledger.settlements == [.ack(deliveryTag: fourth.deliveryTag)])
        let deadLetter = try #require(runtime.publisher.published.first)
        #expect(deadLetter.routingKey == BrokerNames.deadLetterQueue(of: queue))
        #expect(deadLetter.header(BrokerNames.Header.reasonCode) == "delivery-limit")
        #expect(deadLetter.body == first.body)
        // Recorded dead with its failed event (the dead letter already left, so not again).
        let row = try #require(runtime.store.job(jobID))
        #expect(row.status == .dead)
        #expect(row.error?.code == "delivery-limit")
        let routingKeys = runtime.store.outbox(of: jobID).map(\.message.routingKey)
        #expect(routingKeys.contains(TestHandler.jobType.failedEvent.rawValue))
        #expect(!routingKeys.contains(BrokerNames.deadLetterQueue(of: queue)))
    }

    @Test func aDeliveryHandedBackForAnOutageDoesNotCountTowardsTheLimit() async throws {
        let runtime = runtime(deliveryLimit: 3)
        let first = TestDeliveries.job(TestHandler.jobType, fields: ["prepare": "transient"])
        let redelivery = TestDeliveries.redelivery(of: first)
        // The retry copy cannot be published: the worker hands the delivery back itself.
        runtime.publisher.script(.timeOut)

        await runtime.process(redelivery)

        #expect(runtime.acknowledger.settlements == [.nack(deliveryTag: redelivery.deliveryTag, requeue: true)])
        // Counted at 2 (a redelivery), then taken back.
        #expect(runtime.store.deliveries(queue: queue, body: first.body) == 1)
    }
}
