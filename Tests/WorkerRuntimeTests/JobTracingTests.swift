import AMQP
import AstroDomain
import Foundation
import Testing
import TraceContext
import WorkerRuntime
import WorkerRuntimeTestKit

/// Trace context through the processor: every message a job produces carries the job span's
/// `traceparent`, continued from the delivery's or started at the job.
@Suite(.timeLimit(.minutes(1))) struct JobTracingTests {
    let handler = TestHandler()
    static let caller = TraceContext.parse(
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        tracestate: "vendor=abc"
    )!

    func runtime() -> InMemoryRuntime {
        InMemoryRuntime(handlers: [handler.handler], retry: testRetryPolicy)
    }

    func delivery(_ fields: [String: JSONValue], jobID: JobID, traceparent: String) -> Delivery {
        var body = fields
        body["jobId"] = .string(jobID.description)
        return TestDeliveries.raw(
            queue: TestHandler.jobType.rawValue,
            body: JSONValue.object(body).jsonData(),
            headers: ["traceparent": .string(traceparent), "tracestate": .string("vendor=abc")]
        )
    }

    @Test func eventsCarryTheJobSpanInTheCallersTrace() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        await runtime.process(delivery(["events": 2], jobID: jobID, traceparent: Self.caller.traceparent))
        let rows = runtime.store.outbox(of: jobID)
        #expect(rows.count == 2)
        let parents = rows.compactMap {
            TraceContext.parse(
                traceparent: $0.message.headers["traceparent"],
                tracestate: $0.message.headers["tracestate"]
            )
        }
        #expect(parents.count == 2)
        #expect(parents.allSatisfy { $0.traceID == Self.caller.traceID })
        // The job's own span, one for the whole job: not the caller's.
        #expect(Set(parents.map(\.spanID)).count == 1)
        #expect(parents.allSatisfy { $0.spanID != Self.caller.spanID })
        #expect(parents.allSatisfy { $0.tracestate == "vendor=abc" })
    }

    @Test func anInvalidTraceparentStartsANewTraceAndTheJobRuns() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        await runtime.process(
            delivery(
                ["events": 1],
                jobID: jobID,
                traceparent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
            )
        )
        #expect(runtime.store.job(jobID)?.status == .succeeded)
        let parent = try #require(
            TraceContext.parse(traceparent: runtime.store.outbox(of: jobID).first?.message.headers["traceparent"])
        )
        #expect(parent.traceID != Self.caller.traceID)
        // The tracestate of an invalid traceparent is not read.
        #expect(runtime.store.outbox(of: jobID).first?.message.headers["tracestate"] == nil)
    }

    @Test func aRetryCopyStaysInTheTrace() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        await runtime.process(delivery(["prepare": "transient"], jobID: jobID, traceparent: Self.caller.traceparent))
        let copy = try #require(runtime.publisher.published.first)
        let parent = try #require(TraceContext.parse(traceparent: copy.header("traceparent")))
        #expect(parent.traceID == Self.caller.traceID)
        #expect(parent.spanID != Self.caller.spanID)
        #expect(copy.header("tracestate") == "vendor=abc")
    }

    @Test func aRejectedJobsDeadLetterFailedEventAndCompensationStayInTheTrace() async throws {
        let runtime = runtime()
        let jobID = JobID.random()
        await runtime.process(delivery(["prepare": "reject"], jobID: jobID, traceparent: Self.caller.traceparent))
        let rows = runtime.store.outbox(of: jobID)
        // The refund (compensation), the dead letter and the failed event.
        #expect(rows.count == 3, "\(rows.map(\.message.routingKey))")
        for row in rows {
            let parent = TraceContext.parse(traceparent: row.message.headers["traceparent"])
            #expect(parent?.traceID == Self.caller.traceID, "\(row.message.routingKey)")
        }
    }
}
