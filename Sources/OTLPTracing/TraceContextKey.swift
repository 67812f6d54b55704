import TraceContext
import Tracing

/// The W3C trace context of the current span, in a `ServiceContext`.
public enum TraceContextKey: ServiceContextKey {
    public typealias Value = TraceContext
    public static var nameOverride: String? { "w3c-trace-context" }
}

extension ServiceContext {
    /// The W3C trace context of the span this service context belongs to, if any.
    public var traceContext: TraceContext? {
        get { self[TraceContextKey.self] }
        set { self[TraceContextKey.self] = newValue }
    }
}

/// The header names of W3C Trace Context, on HTTP requests and AMQP messages alike.
public enum TraceHeaders {
    public static let traceparent = "traceparent"
    public static let tracestate = "tracestate"

    /// The headers that carry `context` to the next service.
    public static func headers(for context: TraceContext) -> [String: String] {
        var headers = [traceparent: context.traceparent]
        if let state = context.tracestate { headers[tracestate] = state }
        return headers
    }
}
