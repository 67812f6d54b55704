import TraceContext

/// A finished span as the exporter sends it: everything the OTLP encoding needs, no references
/// to the live span.
public struct SpanRecord: Sendable, Hashable {
    /// OTLP's span kinds (their numbers in the protocol).
    public enum Kind: Int, Sendable, Hashable {
        case `internal` = 1
        case server = 2
        case client = 3
        case producer = 4
        case consumer = 5
    }

    /// An attribute value, as OTLP's `AnyValue` carries it.
    public enum Value: Sendable, Hashable {
        case string(String)
        case int(Int64)
        case double(Double)
        case bool(Bool)
    }

    /// OTLP's status codes (their numbers in the protocol).
    public enum StatusCode: Int, Sendable, Hashable {
        case unset = 0
        case ok = 1
        case error = 2
    }

    /// Something that happened during the span (an error recorded, for one).
    public struct Event: Sendable, Hashable {
        public var name: String
        public var timeUnixNano: UInt64
        public var attributes: [String: Value]

        public init(name: String, timeUnixNano: UInt64, attributes: [String: Value] = [:]) {
            self.name = name
            self.timeUnixNano = timeUnixNano
            self.attributes = attributes
        }
    }

    /// Another span this one is linked to (not its parent).
    public struct Link: Sendable, Hashable {
        public var traceID: TraceID
        public var spanID: SpanID

        public init(traceID: TraceID, spanID: SpanID) {
            self.traceID = traceID
            self.spanID = spanID
        }
    }

    public var name: String
    public var kind: Kind
    /// This span's trace id, span id, flags and `tracestate`.
    public var context: TraceContext
    /// The parent's span id; nil for a trace's root span.
    public var parentSpanID: SpanID?
    public var startUnixNano: UInt64
    public var endUnixNano: UInt64
    public var attributes: [String: Value]
    public var events: [Event]
    public var links: [Link]
    public var status: StatusCode
    public var statusMessage: String?

    public init(
        name: String,
        kind: Kind,
        context: TraceContext,
        parentSpanID: SpanID?,
        startUnixNano: UInt64,
        endUnixNano: UInt64,
        attributes: [String: Value] = [:],
        events: [Event] = [],
        links: [Link] = [],
        status: StatusCode = .unset,
        statusMessage: String? = nil
    ) {
        self.name = name
        self.kind = kind
        self.context = context
        self.parentSpanID = parentSpanID
        self.startUnixNano = startUnixNano
        self.endUnixNano = endUnixNano
        self.attributes = attributes
        self.events = events
        self.links = links
        self.status = status
        self.statusMessage = statusMessage
    }
}

/// How much one span may hold: a span is built from job data, so each part is bounded and what
/// is over is dropped (attributes, events, links) or cut (strings).
public enum SpanLimits {
    public static let maxAttributes = 64
    public static let maxEvents = 32
    public static let maxLinks = 16
    /// Characters of a string attribute value or of a span name kept.
    public static let maxStringLength = 1_024
}
