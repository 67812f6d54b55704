import Foundation
import TraceContext

/// The OTLP/JSON encoding of spans: an `ExportTraceServiceRequest` with one resource (the
/// service) and one instrumentation scope, as `POST /v1/traces` takes it with
/// `Content-Type: application/json`.
///
/// The protocol's JSON mapping: trace and span ids are lowercase hex (not base64), 64-bit
/// integers and nanosecond times are decimal strings, enums are their numbers, field names are
/// lowerCamelCase.
public enum OTLPJSON {
    /// The instrumentation scope's name on every exported span.
    public static let scopeName = "astrosvitla"

    /// Encodes spans of one service.
    /// - Parameter resource: resource attributes besides `service.name` (e.g. from
    ///   `OTEL_RESOURCE_ATTRIBUTES`).
    public static func encode(_ spans: [SpanRecord], serviceName: String, resource: [String: String] = [:]) -> Data {
        var attributes = resource
        attributes["service.name"] = serviceName
        let request = ExportRequest(
            resourceSpans: [
                ResourceSpans(
                    resource: Resource(attributes: keyValues(attributes.mapValues { .string($0) })),
                    scopeSpans: [ScopeSpans(scope: Scope(name: scopeName), spans: spans.map(Span.init))]
                )
            ]
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every field is a string, number, array or object: encoding cannot fail.
        return (try? encoder.encode(request)) ?? Data("{}".utf8)
    }

    static func keyValues(_ attributes: [String: SpanRecord.Value]) -> [KeyValue] {
        attributes.sorted { $0.key < $1.key }.map { KeyValue(key: $0.key, value: AnyValue($0.value)) }
    }

    struct ExportRequest: Encodable {
        var resourceSpans: [ResourceSpans]
    }

    struct ResourceSpans: Encodable {
        var resource: Resource
        var scopeSpans: [ScopeSpans]
    }

    struct Resource: Encodable {
        var attributes: [KeyValue]
    }

    struct ScopeSpans: Encodable {
        var scope: Scope
        var spans: [Span]
    }

    struct Scope: Encodable {
        var name: String
    }

    struct KeyValue: Encodable {
        var key: String
        var value: AnyValue
    }

    struct AnyValue: Encodable {
        var stringValue: String?
        var intValue: String?
        var doubleValue: Double?
        var boolValue: Bool?

        init(_ value: SpanRecord.Value) {
            switch value {
            case .string(let text): stringValue = text
            case .int(let number): intValue = String(number)
            // JSON has no NaN or infinity; such a value is sent as its text.
            case .double(let number) where !number.isFinite: stringValue = String(number)
            case .double(let number): doubleValue = number
            case .bool(let flag): boolValue = flag
            }
        }
    }

    struct Status: Encodable {
        var code: Int
        var message: String?
    }

    struct Event: Encodable {
        var name: String
        var timeUnixNano: String
        var attributes: [KeyValue]
    }

    struct Link: Encodable {
        var traceId: String
        var spanId: String
    }

    struct Span: Encodable {
        var traceId: String
        var spanId: String
        var parentSpanId: String?
        var traceState: String?
        var flags: Int
        var name: String
        var kind: Int
        var startTimeUnixNano: String
        var endTimeUnixNano: String
        var attributes: [KeyValue]
        var events: [Event]
        var links: [Link]
        var status: Status

        init(_ record: SpanRecord) {
            traceId = record.context.traceID.hex
            spanId = record.context.spanID.hex
            parentSpanId = record.parentSpanID?.hex
            traceState = record.context.tracestate
            // The low byte is the W3C trace flags; bit 8 says whether the parent is remote, which this
            // exporter does not track, so it is left unset.
            flags = Int(record.context.flags)
            name = record.name
            kind = record.kind.rawValue
            startTimeUnixNano = String(record.startUnixNano)
            endTimeUnixNano = String(record.endUnixNano)
            attributes = OTLPJSON.keyValues(record.attributes)
            events = record.events.map {
                Event(
                    name: $0.name,
                    timeUnixNano: String($0.timeUnixNano),
                    attributes: OTLPJSON.keyValues($0.attributes)
                )
            }
            links = record.links.map { Link(traceId: $0.traceID.hex, spanId: $0.spanID.hex) }
            status = Status(code: record.status.rawValue, message: record.statusMessage)
        }
    }
}
