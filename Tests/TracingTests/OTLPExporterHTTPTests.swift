import Foundation
import LoopbackHTTP
import OTLPTracing
import Synchronization
import Testing
import TraceContext

/// The exporter against a loopback OTLP receiver: batches, the flush at shutdown, failures.
@Suite(.timeLimit(.minutes(1))) struct OTLPExporterHTTPTests {
    final class Requests: Sendable {
        let bodies = Mutex<[Data]>([])
        let paths = Mutex<[String]>([])
    }

    static func span(_ name: String) -> SpanRecord {
        SpanRecord(
            name: name,
            kind: .internal,
            context: .newRoot(sampled: true),
            parentSpanID: nil,
            startUnixNano: 1,
            endUnixNano: 2
        )
    }

    static func spanCount(_ body: Data) -> Int {
        guard let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return -1 }
        let resources = json["resourceSpans"] as? [[String: Any]] ?? []
        let scopes = resources.flatMap { $0["scopeSpans"] as? [[String: Any]] ?? [] }
        return scopes.reduce(0) { $0 + (($1["spans"] as? [Any])?.count ?? 0) }
    }

    @Test func shutdownSendsWhatIsBufferedInBatches() async throws {
        let requests = Requests()
        let server = try LoopbackHTTPServer { request in
            requests.bodies.withLock { $0.append(request.body) }
            requests.paths.withLock { $0.append(request.path) }
            return HTTPResponse(status: 200)
        }
        defer { server.stop() }
        let configuration = OTLPConfiguration.fromEnvironment(
            [
                "OTEL_EXPORTER_OTLP_ENDPOINT": server.baseURL.absoluteString,
                // Only a full batch or shutdown sends: the schedule is far away.
                "OTEL_BSP_SCHEDULE_DELAY": "600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
            ],
            defaultServiceName: "test"
        )
        let exporter = try #require(OTLPExporter(configuration: configuration))
        let running = Task { await exporter.run() }
        for index in 0..<10 { exporter.submit(Self.span("s\(index)")) }
        exporter.shutdown()
        await running.value
        let bodies = requests.bodies.withLock { $0 }
        #expect(bodies.map(Self.spanCount).reduce(0, +) == 10)
        #expect(bodies.allSatisfy { Self.spanCount($0) <= 4 })
        #expect(requests.paths.withLock { $0 }.allSatisfy { $0 == "/v1/traces" })
        #expect(exporter.statistics.exported == 10)
        #expect(exporter.pending == 0)
    }

    @Test func aRefusingEndpointCountsFailuresAndRetriesOnlyRetryableAnswers() async throws {
        let requests = Requests()
        let status = Mutex(503)
        let server = try LoopbackHTTPServer { request in
            requests.bodies.withLock { $0.append(request.body) }
            return HTTPResponse(status: status.withLock { $0 })
        }
        defer { server.stop() }
        let configuration = OTLPConfiguration(
            tracesEndpoint: server.baseURL.appendingPathComponent("v1/traces"),
            serviceName: "test",
            timeout: .seconds(5)
        )
        let exporter = try #require(OTLPExporter(configuration: configuration))
        exporter.submit(Self.span("a"))
        // 503 is retryable: two requests, then the spans count as failed.
        let running = Task { await exporter.run() }
        exporter.shutdown()
        await running.value
        #expect(exporter.statistics.failed == 1)
        #expect(exporter.statistics.requests == 2)
        // 400 is not: one request.
        status.withLock { $0 = 400 }
        let second = try #require(OTLPExporter(configuration: configuration))
        second.submit(Self.span("b"))
        let again = Task { await second.run() }
        second.shutdown()
        await again.value
        #expect(second.statistics.failed == 1)
        #expect(second.statistics.requests == 1)
        #expect(requests.bodies.withLock { $0.count } == 3)
    }
}
