import AMQP
import Hummingbird
import OTLPTracing
import TraceContext
import Tracing

/// The request's server span: continued from the client's `traceparent` header (a new trace when
/// it has none, or an invalid one), with `trace_id`/`span_id` on every log line of the request.
/// The jobs the request publishes carry its context (`GatewayTrace.messageHeaders`), so a
/// client's request, the workers' jobs and their events are one trace.
struct TraceMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        var parent = ServiceContext.topLevel
        // HTTP allows one traceparent; a repeated header is as invalid as a malformed one.
        let traceparents = request.headers[values: .traceparent]
        let tracestates = request.headers[values: .tracestate]
        if traceparents.count == 1 {
            parent.traceContext = TraceContext.parse(
                traceparent: traceparents[0],
                // Several tracestate fields are one list (W3C Trace Context).
                tracestate: tracestates.isEmpty ? nil : tracestates.joined(separator: ",")
            )
        }
        let span = InstrumentationSystem.tracer.startSpan(
            request.method.rawValue,
            context: parent,
            ofKind: .server
        )
        // A tracer that assigns no identity (the no-op one of in-process tests) still gets one here.
        var own = span.context.traceContext
        if own == nil || own?.spanID == parent.traceContext?.spanID {
            own = parent.traceContext?.child() ?? .newRoot(sampled: false)
        }
        var spanContext = span.context
        spanContext.traceContext = own
        var context = context
        if let own {
            context.logger[metadataKey: "trace_id"] = "\(own.traceID.hex)"
            context.logger[metadataKey: "span_id"] = "\(own.spanID.hex)"
        }
        span.updateAttributes { attributes in
            attributes["http.request.method"] = request.method.rawValue
        }
        do {
            let response = try await ServiceContext.$current.withValue(spanContext) {
                try await next(request, context)
            }
            finish(span, route: context.endpointPath, method: request.method.rawValue, status: response.status.code)
            return response
        } catch let error as HTTPResponseError {
            finish(span, route: context.endpointPath, method: request.method.rawValue, status: error.status.code)
            throw error
        } catch {
            span.recordError(error)
            finish(span, route: context.endpointPath, method: request.method.rawValue, status: 500)
            throw error
        }
    }

    private func finish(_ span: any Tracing.Span, route: String?, method: String, status: Int) {
        // The route (a pattern, never the raw path with its ids) names the span: bounded names.
        if let route { span.operationName = "\(method) \(route)" }
        span.updateAttributes { attributes in
            attributes["http.response.status_code"] = status
            if let route { attributes["http.route"] = route }
        }
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }
}

extension HTTPFields.Element.Name {
    static let traceparent = HTTPFields.Element.Name("traceparent")!
    static let tracestate = HTTPFields.Element.Name("tracestate")!
}

/// The trace context the gateway puts on the jobs it publishes.
enum GatewayTrace {
    /// `traceparent`/`tracestate` of the current request's span; a new trace outside a request.
    static func messageHeaders() -> AMQPTable {
        let context = ServiceContext.current?.traceContext ?? .newRoot(sampled: false)
        return TraceHeaders.headers(for: context).mapValues { .string($0) }
    }
}
