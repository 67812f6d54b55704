import Synchronization
import TraceContext
import Tracing

/// A `Tracer` for swift-distributed-tracing that keeps W3C trace context in `ServiceContext`
/// and hands finished spans to an `OTLPExporter`.
///
/// Every span gets real ids, exporter or not, so the trace context a service passes on (in
/// message and HTTP headers) is always correct; without an exporter spans are simply not
/// recorded. A span's parent is the `traceContext` of the context it starts in; without one it
/// starts a new trace. The W3C `sampled` flag decides what is recorded (a parent-based sampler):
/// a new trace is sampled when an exporter is set; a span continuing a parent keeps the parent's
/// decision, so a caller that sent `traceparent` with flags `00` gets no spans from this service,
/// yet its trace context (ids, flags, `tracestate`) is still carried to everything that follows.
public final class OTLPTracer: Tracer, Sendable {
    public typealias Span = OTLPSpan

    /// Where finished spans go; nil: nowhere.
    public let exporter: OTLPExporter?

    public init(exporter: OTLPExporter?) { self.exporter = exporter }

    public func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> ServiceContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> OTLPSpan {
        var spanContext = context()
        let parent = spanContext.traceContext
        let own = parent?.child() ?? .newRoot(sampled: exporter != nil)
        spanContext.traceContext = own
        // An unsampled span is made (its ids propagate) but never recorded or exported.
        let recorder = own.sampled ? exporter : nil
        return OTLPSpan(
            name: operationName,
            kind: kind,
            context: spanContext,
            trace: own,
            parentSpanID: parent?.spanID,
            start: instant().nanosecondsSinceEpoch,
            exporter: recorder
        )
    }

    public func forceFlush() { exporter?.flushSoon() }

    /// Reads `traceparent` and `tracestate` from a carrier (HTTP or message headers); an invalid
    /// `traceparent` leaves the context without a parent (a new trace starts).
    public func extract<Carrier, Extract>(
        _ carrier: Carrier,
        into context: inout ServiceContext,
        using extractor: Extract
    ) where Extract: Extractor, Extract.Carrier == Carrier {
        if let parsed = TraceContext.parse(
            traceparent: extractor.extract(key: TraceHeaders.traceparent, from: carrier),
            tracestate: extractor.extract(key: TraceHeaders.tracestate, from: carrier)
        ) {
            context.traceContext = parsed
        }
    }

    /// Writes the context's `traceparent` (and `tracestate`, when there is one) into a carrier.
    public func inject<Carrier, Inject>(
        _ context: ServiceContext,
        into carrier: inout Carrier,
        using injector: Inject
    ) where Inject: Injector, Inject.Carrier == Carrier {
        guard let trace = context.traceContext else { return }
        for (key, value) in TraceHeaders.headers(for: trace) { injector.inject(value, forKey: key, into: &carrier) }
    }
}

/// A span of `OTLPTracer`: mutable until it ends, then handed to the exporter once.
public final class OTLPSpan: Tracing.Span, Sendable {
    private struct State {
        var name: String
        var attributes = SpanAttributes()
        var events: [SpanRecord.Event] = []
        var links: [SpanRecord.Link] = []
        var status: SpanStatus?
        var ended = false
    }

    public let context: ServiceContext
    /// This span's W3C identity.
    public let trace: TraceContext
    private let kind: SpanKind
    private let parentSpanID: SpanID?
    private let start: UInt64
    private let exporter: OTLPExporter?
    private let state: Mutex<State>

    init(
        name: String,
        kind: SpanKind,
        context: ServiceContext,
        trace: TraceContext,
        parentSpanID: SpanID?,
        start: UInt64,
        exporter: OTLPExporter?
    ) {
        self.context = context
        self.trace = trace
        self.kind = kind
        self.parentSpanID = parentSpanID
        self.start = start
        self.exporter = exporter
        state = Mutex(State(name: name))
    }

    public var operationName: String {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    public var attributes: SpanAttributes {
        get { state.withLock { $0.attributes } }
        set { state.withLock { $0.attributes = newValue } }
    }

    public var isRecording: Bool { exporter != nil && !state.withLock { $0.ended } }

    public func setStatus(_ status: SpanStatus) {
        state.withLock { state in
            // An OK status is final; an error does not replace it.
            if state.status?.code == .ok { return }
            state.status = status
        }
    }

    public func addEvent(_ event: SpanEvent) {
        guard exporter != nil else { return }
        let recorded = SpanRecord.Event(
            name: event.name,
            timeUnixNano: event.nanosecondsSinceEpoch,
            attributes: Self.values(event.attributes)
        )
        state.withLock { state in
            if state.events.count < SpanLimits.maxEvents { state.events.append(recorded) }
        }
    }

    public func recordError<Instant: TracerInstant>(
        _ error: any Error,
        attributes: SpanAttributes,
        at instant: @autoclosure () -> Instant
    ) {
        var all = attributes
        all["exception.type"] = "\(type(of: error))"
        all["exception.message"] = String("\(error)".prefix(SpanLimits.maxStringLength))
        addEvent(SpanEvent(name: "exception", at: instant(), attributes: all))
    }

    public func addLink(_ link: SpanLink) {
        guard let other = link.context.traceContext else { return }
        state.withLock { state in
            if state.links.count < SpanLimits.maxLinks {
                state.links.append(SpanRecord.Link(traceID: other.traceID, spanID: other.spanID))
            }
        }
    }

    public func end<Instant: TracerInstant>(at instant: @autoclosure () -> Instant) {
        let finished: State? = state.withLock { state in
            guard !state.ended else { return nil }
            state.ended = true
            return state
        }
        guard let finished, let exporter else { return }
        let status: SpanRecord.StatusCode =
            switch finished.status?.code {
            case .ok?: .ok
            case .error?: .error
            case nil: .unset
            }
        exporter.submit(
            SpanRecord(
                name: String(finished.name.prefix(SpanLimits.maxStringLength)),
                kind: Self.kind(kind),
                context: trace,
                parentSpanID: parentSpanID,
                startUnixNano: start,
                endUnixNano: max(start, instant().nanosecondsSinceEpoch),
                attributes: Self.values(finished.attributes),
                events: finished.events,
                links: finished.links,
                status: status,
                statusMessage: finished.status?.message.map { String($0.prefix(SpanLimits.maxStringLength)) }
            )
        )
    }

    static func kind(_ kind: SpanKind) -> SpanRecord.Kind {
        switch kind {
        case .server: .server
        case .client: .client
        case .producer: .producer
        case .consumer: .consumer
        default: .internal
        }
    }

    /// swift-distributed-tracing's attributes as OTLP values, bounded (`SpanLimits`).
    static func values(_ attributes: SpanAttributes) -> [String: SpanRecord.Value] {
        var values: [String: SpanRecord.Value] = [:]
        // SpanAttributes is not a Sequence: forEach is its only way to list them.
        // swift-format-ignore: ReplaceForEachWithForLoop
        attributes.forEach { key, attribute in
            guard values.count < SpanLimits.maxAttributes else { return }
            values[key] = value(attribute)
        }
        return values
    }

    static func value(_ attribute: SpanAttribute) -> SpanRecord.Value {
        func cut(_ text: String) -> SpanRecord.Value { .string(String(text.prefix(SpanLimits.maxStringLength))) }
        switch attribute {
        case .int32(let number): return .int(Int64(number))
        case .int64(let number): return .int(number)
        case .double(let number): return .double(number)
        case .bool(let flag): return .bool(flag)
        case .string(let text): return cut(text)
        case .stringConvertible(let value): return cut(value.description)
        default: return cut("\(attribute)")
        }
    }
}
