import AMQP
import AstroDomain
import Logging
import OTLPTracing
import Synchronization
import TraceContext
import Tracing

extension LogKey {
    /// The W3C trace id of the job being handled, on every log line about it.
    package static let traceID = "trace_id"
    /// The span id of the job's span.
    package static let spanID = "span_id"
}

/// The span of one delivery: continued from the message's `traceparent` (or a new trace when it
/// has none, or an invalid one), named after the job type, ended with the job's outcome.
///
/// Its context (`context`) is the parent of everything the job publishes: events, follow-up
/// jobs, compensations, retry copies and dead letters carry it as their `traceparent`, so a
/// request and all that follows from it is one trace. The spans go wherever the process's
/// `InstrumentationSystem` tracer sends them (an `OTLPTracer` in the workers); with another
/// tracer (the no-op one in tests) the context is still made here, so propagation never depends
/// on export.
package struct JobTrace: Sendable {
    let span: any Tracing.Span
    /// The job span's identity: the `traceparent` of what the job publishes.
    package let context: TraceContext
    /// Where the job's outcome is noted while it is handled (see `noteOutcome`).
    let outcome: OutcomeBox

    /// The trace of the delivery being handled in this task.
    @TaskLocal static var active: JobTrace?

    final class OutcomeBox: Sendable {
        let value = Mutex<String?>(nil)
    }

    /// Starts the span of a delivery from `queue`.
    package static func start(_ delivery: Delivery, queue: String) -> JobTrace {
        let incoming = incomingContext(of: delivery)
        var parent = ServiceContext.topLevel
        parent.traceContext = incoming
        let span = InstrumentationSystem.tracer.startSpan(queue, context: parent, ofKind: .consumer)
        let own: TraceContext
        if let assigned = span.context.traceContext, assigned.spanID != incoming?.spanID {
            own = assigned
        } else {
            own = incoming?.child() ?? .newRoot(sampled: false)
        }
        span.updateAttributes { attributes in
            attributes["messaging.system"] = "rabbitmq"
            attributes["messaging.destination.name"] = queue
            if let messageID = delivery.properties.messageID {
                attributes["messaging.message.id"] = String(messageID.prefix(64))
            }
        }
        return JobTrace(span: span, context: own, outcome: OutcomeBox())
    }

    /// The valid trace context of a delivery's `traceparent`/`tracestate` headers, if any.
    static func incomingContext(of delivery: Delivery) -> TraceContext? {
        func text(_ key: String) -> String? {
            if case .string(let value)? = delivery.properties.headers[key] { return value }
            return nil
        }
        return TraceContext.parse(
            traceparent: text(TraceHeaders.traceparent),
            tracestate: text(TraceHeaders.tracestate)
        )
    }

    /// Records the job's id and attempt once the envelope is read.
    func describe(jobID: JobID, attempt: Int) {
        span.updateAttributes { attributes in
            attributes["astro.job.id"] = "\(jobID)"
            attributes["astro.job.attempt"] = attempt
        }
    }

    /// Notes the outcome of the job handled in the current task (called where the metrics count
    /// it, so span and metrics never disagree).
    static func noteOutcome(_ outcome: String) {
        active?.outcome.value.withLock { $0 = outcome }
    }

    /// Ends the span with the noted outcome; a rejected or exhausted job marks it as an error.
    func end() {
        let noted = outcome.value.withLock { $0 }
        if let noted {
            span.updateAttributes { $0["astro.job.outcome"] = noted }
            if noted == WorkerMetrics.Outcome.rejected.rawValue || noted == WorkerMetrics.Outcome.exhausted.rawValue {
                span.setStatus(SpanStatus(code: .error, message: noted))
            }
        }
        span.end()
    }

    /// Runs `body` in a child span of the job's (the database transaction, for one).
    func child<T>(_ name: String, kind: SpanKind = .internal, _ body: () async throws -> T) async throws -> T {
        var parent = ServiceContext.topLevel
        parent.traceContext = context
        let span = InstrumentationSystem.tracer.startSpan(name, context: parent, ofKind: kind)
        do {
            let value = try await body()
            span.end()
            return value
        } catch {
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            span.end()
            throw error
        }
    }

    /// Adds the trace and span id to a logger's metadata.
    func annotate(_ logger: inout Logger) {
        logger[metadataKey: LogKey.traceID] = "\(context.traceID.hex)"
        logger[metadataKey: LogKey.spanID] = "\(context.spanID.hex)"
    }
}

extension OutboxMessage {
    /// This message with `context` as its `traceparent` (and `tracestate`), unless it carries a
    /// trace context of its own already (a handler's choice wins).
    package func traced(by context: TraceContext?) -> OutboxMessage {
        guard let context, headers[TraceHeaders.traceparent] == nil else { return self }
        var copy = self
        for (key, value) in TraceHeaders.headers(for: context) { copy.headers[key] = value }
        return copy
    }
}

extension AMQPTable {
    /// Sets the `traceparent` (and `tracestate`) headers of a message the runtime publishes.
    mutating func setTraceContext(_ context: TraceContext?) {
        guard let context else { return }
        self[TraceHeaders.tracestate] = nil
        for (key, value) in TraceHeaders.headers(for: context) { self[key] = .string(value) }
    }
}

/// The producer spans of the outbox relay: one per traced row published, a child of the span
/// of the job that committed it.
enum OutboxTrace {
    /// Starts the span of publishing `message`; nil when it carries no valid trace context.
    static func startPublish(_ message: OutboxMessage) -> (any Tracing.Span)? {
        guard
            let parent = TraceContext.parse(
                traceparent: message.headers[TraceHeaders.traceparent],
                tracestate: message.headers[TraceHeaders.tracestate]
            )
        else { return nil }
        var context = ServiceContext.topLevel
        context.traceContext = parent
        let span = InstrumentationSystem.tracer.startSpan(
            "publish \(message.routingKey)",
            context: context,
            ofKind: .producer
        )
        span.updateAttributes { attributes in
            attributes["messaging.system"] = "rabbitmq"
            attributes["messaging.destination.name"] = message.exchange
            attributes["messaging.rabbitmq.destination.routing_key"] = message.routingKey
        }
        return span
    }

    /// Ends publish spans; `failed` says which (by index) the broker did not confirm.
    static func end(_ spans: [(any Tracing.Span)?], failed: (Int) -> Bool) {
        for (index, span) in spans.enumerated() {
            guard let span else { continue }
            if failed(index) { span.setStatus(SpanStatus(code: .error, message: "not confirmed")) }
            span.end()
        }
    }
}
