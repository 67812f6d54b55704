import AMQP
import AstroDomain
import Foundation
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// A job an operator cancelled (`astroctl job cancel`): its deliveries are acknowledged without
/// running the handler, and its event and compensation are enqueued once.
@Suite struct CancellationTests {
    @Test func aCancelledJobIsAcknowledgedUnrunWithOneEventAndItsCompensation() async throws {
        let handler = TestHandler()
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let id = JobID.random()
        let user = UUID()
        runtime.store.insert(
            .init(
                id: id,
                kind: TestHandler.jobType.rawValue,
                status: .cancelled,
                attempts: 0,
                error: JobError(code: JobStatus.cancelledErrorCode, message: "cancelled by ops: asked"),
                userID: user
            )
        )
        let first = TestDeliveries.job(TestHandler.jobType, jobID: id)
        let copy = TestDeliveries.job(TestHandler.jobType, jobID: id, redelivered: true)
        await runtime.process(first)
        await runtime.process(copy)

        #expect(handler.prepares(of: id) == 0)
        #expect(
            runtime.acknowledger.settlements == [
                .ack(deliveryTag: first.deliveryTag), .ack(deliveryTag: copy.deliveryTag),
            ]
        )
        let written = runtime.store.outbox(of: id)
        #expect(written.map(\.message.routingKey) == [TestHandler.refund.rawValue, "test.sample.cancelled"])
        let event = try JSONDecoder().decode(JSONValue.self, from: try #require(written.last).message.body)
        #expect(event["error"]?["code"]?.stringValue == JobStatus.cancelledErrorCode)
        #expect(event["userId"]?.stringValue == user.uuidString.lowercased())
        #expect(runtime.store.job(id)?.status == .cancelled)
        #expect(runtime.metrics.render().contains("outcome=\"cancelled\"} 2"))
    }

    /// A handler that skips the look-up before `prepare` (a cheap one): the job is prepared,
    /// but its claim finds the row cancelled, so nothing of it is committed.
    @Test func aCancelledJobIsNeverCommittedWhenTheHandlerSkipsTheLookUp() async throws {
        let handler = TestHandler()
        let runtime = InMemoryRuntime(
            handlers: [handler.handler(looksUpBeforePrepare: false)],
            retry: testRetryPolicy
        )
        // Written unclaimed first, as PostgreSQL's store does: the finish finds the row taken.
        runtime.store.writesFirstDeliveriesUnclaimed = true
        let id = JobID.random()
        runtime.store.insert(
            .init(
                id: id,
                kind: TestHandler.jobType.rawValue,
                status: .cancelled,
                attempts: 0,
                error: JobError(code: JobStatus.cancelledErrorCode, message: "cancelled by ops: asked"),
                userID: UUID()
            )
        )
        let first = TestDeliveries.job(TestHandler.jobType, jobID: id)
        let copy = TestDeliveries.job(TestHandler.jobType, jobID: id, redelivered: true)
        await runtime.process(first)
        await runtime.process(copy)

        // Prepared once (the first delivery skipped the look-up; the redelivery did not), and
        // whatever its commit wrote was rolled back.
        #expect(handler.prepares(of: id) == 1)
        #expect(runtime.store.value(forKey: "job:\(id)") == nil)
        // The unclaimed attempt rolled back, then the claiming one found it cancelled.
        #expect(runtime.store.claims == [[id]])
        #expect(
            runtime.acknowledger.settlements == [
                .ack(deliveryTag: first.deliveryTag), .ack(deliveryTag: copy.deliveryTag),
            ]
        )
        #expect(
            runtime.store.outbox(of: id).map(\.message.routingKey) == [
                TestHandler.refund.rawValue, "test.sample.cancelled",
            ]
        )
        #expect(runtime.store.job(id)?.status == .cancelled)
    }

    @Test func aReplayedJobRunsAgain() async throws {
        let handler = TestHandler()
        let runtime = InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
        let id = JobID.random()
        // What `astroctl dead replay` leaves: the row queued again, attempts 0.
        runtime.store.insert(.init(id: id, kind: TestHandler.jobType.rawValue, status: .queued, attempts: 0))
        let delivery = TestDeliveries.job(TestHandler.jobType, jobID: id)
        await runtime.process(delivery)
        #expect(handler.commits(of: id) == 1)
        #expect(runtime.store.job(id)?.status == .succeeded)
    }
}
