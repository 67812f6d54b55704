import Foundation
import Logging
import OTLPTracing
import Testing
import TraceContext
import Tracing

@Suite struct OTLPJSONTests {
    @Test func encodesAnExportTraceServiceRequest() throws {
        let parent = try #require(
            TraceContext.parse(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        )
        let span = SpanRecord(
            name: "report.request",
            kind: .consumer,
            context: TraceContext(traceID: parent.traceID, spanID: SpanID(0xabc), flags: 1),
            parentSpanID: parent.spanID,
            startUnixNano: 1_700_000_000_000_000_001,
            endUnixNano: 1_700_000_000_500_000_000,
            attributes: ["astro.job.attempt": .int(2), "astro.job.outcome": .string("succeeded"), "ok": .bool(true)],
            events: [SpanRecord.Event(name: "exception", timeUnixNano: 5, attributes: ["x": .double(1.5)])],
            status: .error,
            statusMessage: "rejected"
        )
        let data = OTLPJSON.encode([span], serviceName: "billing-worker", resource: ["deployment.environment": "test"])
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let resourceSpans = try #require(json["resourceSpans"] as? [[String: Any]])
        let resource = try #require(resourceSpans.first?["resource"] as? [String: Any])
        let attributes = try #require(resource["attributes"] as? [[String: Any]])
        let service = attributes.first { $0["key"] as? String == "service.name" }
        #expect((service?["value"] as? [String: Any])?["stringValue"] as? String == "billing-worker")
        let scopeSpans = try #require(resourceSpans.first?["scopeSpans"] as? [[String: Any]])
        let spans = try #require(scopeSpans.first?["spans"] as? [[String: Any]])
        let encoded = try #require(spans.first)
        #expect(encoded["traceId"] as? String == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(encoded["spanId"] as? String == "0000000000000abc")
        #expect(encoded["parentSpanId"] as? String == "00f067aa0ba902b7")
        #expect(encoded["name"] as? String == "report.request")
        #expect(encoded["kind"] as? Int == 5)
        // 64-bit numbers are strings in OTLP/JSON.
        #expect(encoded["startTimeUnixNano"] as? String == "1700000000000000001")
        #expect(encoded["endTimeUnixNano"] as? String == "1700000000500000000")
        #expect((encoded["status"] as? [String: Any])?["code"] as? Int == 2)
        let spanAttributes = try #require(encoded["attributes"] as? [[String: Any]])
        let attempt = spanAttributes.first { $0["key"] as? String == "astro.job.attempt" }
        #expect((attempt?["value"] as? [String: Any])?["intValue"] as? String == "2")
        let events = try #require(encoded["events"] as? [[String: Any]])
        #expect(events.first?["name"] as? String == "exception")
    }

    @Test func rootSpanHasNoParentField() throws {
        let span = SpanRecord(
            name: "root",
            kind: .server,
            context: .newRoot(sampled: true),
            parentSpanID: nil,
            startUnixNano: 1,
            endUnixNano: 2
        )
        let text = String(decoding: OTLPJSON.encode([span], serviceName: "gateway"), as: UTF8.self)
        #expect(!text.contains("parentSpanId"))
        #expect(text.contains("\"kind\":2"))
    }
}

@Suite struct SpanBufferTests {
    static func span(_ index: Int) -> SpanRecord {
        SpanRecord(
            name: "s\(index)",
            kind: .internal,
            context: .newRoot(sampled: true),
            parentSpanID: nil,
            startUnixNano: 0,
            endUnixNano: 0
        )
    }

    @Test func fullBufferDropsAndCountsNewSpans() {
        let buffer = SpanBuffer(capacity: 3)
        #expect(buffer.append(Self.span(0)) == 1)
        #expect(buffer.append(Self.span(1)) == 2)
        #expect(buffer.append(Self.span(2)) == 3)
        #expect(buffer.append(Self.span(3)) == nil)
        #expect(buffer.append(Self.span(4)) == nil)
        #expect(buffer.dropped == 2)
        #expect(buffer.take(limit: 2).map(\.name) == ["s0", "s1"])
        #expect(buffer.append(Self.span(5)) == 2)
        #expect(buffer.take(limit: 10).map(\.name) == ["s2", "s5"])
        #expect(buffer.count == 0)
        #expect(buffer.take(limit: -1).isEmpty)
    }
}

@Suite struct OTLPConfigurationTests {
    @Test func nothingSetExportsNothing() {
        let configuration = OTLPConfiguration.fromEnvironment([:], defaultServiceName: "chart-worker")
        #expect(!configuration.isExporting)
        #expect(configuration.serviceName == "chart-worker")
        #expect(OTLPExporter(configuration: configuration) == nil)
    }

    @Test func baseEndpointGetsTheTracesPath() {
        for base in ["http://collector:4318", "http://collector:4318/"] {
            let configuration = OTLPConfiguration.fromEnvironment(
                ["OTEL_EXPORTER_OTLP_ENDPOINT": base, "OTEL_SERVICE_NAME": "billing"],
                defaultServiceName: "billing-worker"
            )
            #expect(configuration.tracesEndpoint?.absoluteString == "http://collector:4318/v1/traces")
            #expect(configuration.serviceName == "billing")
        }
    }

    @Test func tracesEndpointIsUsedAsItIsAndWins() {
        let configuration = OTLPConfiguration.fromEnvironment(
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/custom/path",
                "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource,deployment.environment=prod",
            ],
            defaultServiceName: "x"
        )
        #expect(configuration.tracesEndpoint?.absoluteString == "https://b/custom/path")
        #expect(configuration.serviceName == "from-resource")
        #expect(configuration.resourceAttributes == ["deployment.environment": "prod"])
    }

    @Test func switchesAndBadValues() {
        let off = OTLPConfiguration.fromEnvironment(
            ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"],
            defaultServiceName: "x"
        )
        #expect(!off.isExporting)
        let disabled = OTLPConfiguration.fromEnvironment(
            ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "true"],
            defaultServiceName: "x"
        )
        #expect(!disabled.isExporting)
        let bad = OTLPConfiguration.fromEnvironment(
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://a", "OTEL_BSP_MAX_QUEUE_SIZE": "-5",
                "OTEL_EXPORTER_OTLP_TIMEOUT": "soon", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            ],
            defaultServiceName: "x"
        )
        #expect(!bad.isExporting)
        #expect(bad.maxQueueSize == 2_048)
        #expect(bad.timeout == .seconds(10))
        #expect(bad.warnings.count == 4)
        let sized = OTLPConfiguration.fromEnvironment(
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a", "OTEL_BSP_MAX_QUEUE_SIZE": "10",
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "50", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b",
            ],
            defaultServiceName: "x"
        )
        #expect(sized.maxQueueSize == 10)
        #expect(sized.maxExportBatchSize == 10)
        #expect(sized.headers == ["api-key": "a b"])
    }
}

@Suite struct OTLPTracerTests {
    @Test func spansContinueTheTraceInTheirContext() throws {
        let tracer = OTLPTracer(exporter: nil)
        let parent = try #require(
            TraceContext.parse(traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
        )
        var context = ServiceContext.topLevel
        context.traceContext = parent
        let span = tracer.startSpan("job", context: context, ofKind: .consumer)
        let own = try #require(span.context.traceContext)
        #expect(own.traceID == parent.traceID)
        #expect(own.spanID != parent.spanID)
        // Without an exporter nothing is recorded, and the upstream's sampled flag is kept.
        #expect(!span.isRecording)
        #expect(!own.sampled)
        let root = tracer.startSpan("root", context: .topLevel, ofKind: .server)
        #expect(root.context.traceContext != nil)
        #expect(root.context.traceContext?.traceID != parent.traceID)
    }

    @Test func injectAndExtractUseTheW3CHeaders() throws {
        struct Headers: Extractor, Injector {
            func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
            func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
                carrier[key] = value
            }
        }
        let tracer = OTLPTracer(exporter: nil)
        var context = ServiceContext.topLevel
        tracer.extract(
            [
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "vendor=1",
            ],
            into: &context,
            using: Headers()
        )
        #expect(context.traceContext?.spanID.hex == "00f067aa0ba902b7")
        var carrier: [String: String] = [:]
        tracer.inject(context, into: &carrier, using: Headers())
        #expect(carrier["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        #expect(carrier["tracestate"] == "vendor=1")
        var untouched = ServiceContext.topLevel
        tracer.extract(["traceparent": "garbage"], into: &untouched, using: Headers())
        #expect(untouched.traceContext == nil)
    }

    @Test func endedSpanGoesToTheExporterOnceWithItsAttributes() throws {
        let configuration = OTLPConfiguration(
            tracesEndpoint: URL(string: "http://127.0.0.1:9/v1/traces"),
            serviceName: "t",
            maxQueueSize: 4
        )
        let exporter = try #require(OTLPExporter(configuration: configuration))
        let tracer = OTLPTracer(exporter: exporter)
        let span = tracer.startSpan("job", context: .topLevel, ofKind: .consumer)
        span.attributes["astro.job.attempt"] = 3
        #expect(span.isRecording)
        #expect(span.context.traceContext?.sampled == true)
        span.end()
        span.end()
        #expect(exporter.pending == 1)
        for _ in 0..<6 { tracer.startSpan("more", context: .topLevel, ofKind: .internal).end() }
        #expect(exporter.pending == 4)
        #expect(exporter.dropped == 3)
    }
}

/// The W3C `sampled` flag of an incoming `traceparent` decides whether this service records:
/// an unsampled parent's spans are never exported, but the context still propagates.
@Suite struct SampledFlagTests {
    @Test func anUnsampledParentIsPropagatedButNotExported() throws {
        struct Headers: Extractor, Injector {
            func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
            func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
                carrier[key] = value
            }
        }
        let configuration = OTLPConfiguration(
            tracesEndpoint: URL(string: "http://127.0.0.1:9/v1/traces"),
            serviceName: "t",
            maxQueueSize: 16
        )
        let exporter = try #require(OTLPExporter(configuration: configuration))
        let tracer = OTLPTracer(exporter: exporter)
        var incoming = ServiceContext.topLevel
        tracer.extract(
            ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "tracestate": "vendor=1"],
            into: &incoming,
            using: Headers()
        )
        let span = tracer.startSpan("job", context: incoming, ofKind: .consumer)
        #expect(!span.isRecording)
        span.attributes["astro.job.attempt"] = 1
        span.addEvent(SpanEvent(name: "exception"))
        // A child of the unsampled span is not recorded either.
        let child = tracer.startSpan("transaction", context: span.context, ofKind: .internal)
        #expect(!child.isRecording)
        child.end()
        span.end()
        #expect(exporter.pending == 0)
        // The context goes on: same trace, the span's own id, flags 00, the tracestate kept.
        var carrier: [String: String] = [:]
        tracer.inject(span.context, into: &carrier, using: Headers())
        let own = try #require(span.context.traceContext)
        #expect(carrier["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-\(own.spanID.hex)-00")
        #expect(own.spanID.hex != "00f067aa0ba902b7")
        #expect(carrier["tracestate"] == "vendor=1")

        // A sampled parent (flags 01) is recorded and exported, and so is a new root.
        var sampled = ServiceContext.topLevel
        tracer.extract(
            ["traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
            into: &sampled,
            using: Headers()
        )
        let recorded = tracer.startSpan("job", context: sampled, ofKind: .consumer)
        #expect(recorded.isRecording)
        recorded.end()
        tracer.startSpan("root", context: .topLevel, ofKind: .server).end()
        #expect(exporter.pending == 2)
    }
}

@Suite struct TracingSetupTests {
    @Test func aSecondBootstrapInOneProcessDoesNotTrap() async {
        // Without an endpoint nothing is exported either way; the process-wide tracer is then an
        // OTLPTracer without exporter, which only assigns ids (as the no-op tracer's users expect).
        let logger = Logger(label: "test")
        let first = TracingSetup.bootstrap(serviceName: "a", environment: [:], logger: logger)
        let second = TracingSetup.bootstrap(
            serviceName: "b",
            environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"],
            logger: logger
        )
        #expect(first.exporter == nil)
        #expect(second.exporter == nil)
        await first.shutdown()
        await second.shutdown()
    }
}
