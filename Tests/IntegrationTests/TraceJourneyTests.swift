import AMQP
import AstroDomain
import Foundation
import LoopbackHTTP
import Postgres
import Synchronization
import Testing
import TraceContext
import WorkerRuntime

/// Issue 17: a purchase-to-report journey through the billing-worker and report-worker
/// processes is one connected trace, exported over OTLP/HTTP (JSON) to a receiver run here.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TraceJourneyTests {
    /// One span as the receiver got it.
    struct ReceivedSpan: Sendable, CustomStringConvertible {
        var service: String
        var name: String
        var kind: Int
        var traceID: String
        var spanID: String
        var parentSpanID: String?
        var attributes: [String: String]

        var description: String {
            "\(service) \(name) trace=\(traceID) span=\(spanID) parent=\(parentSpanID ?? "-") \(attributes)"
        }
    }

    /// A local OTLP/HTTP receiver: POST /v1/traces with an ExportTraceServiceRequest in JSON.
    final class Receiver: Sendable {
        /// What the receiver got, shared with its server's handler.
        final class Received: Sendable {
            let spans = Mutex<[ReceivedSpan]>([])
            let rejected = Mutex(0)
        }

        let received = Received()
        let server: LoopbackHTTPServer

        init() throws {
            let received = self.received
            server = try LoopbackHTTPServer(name: "otlp-receiver") { request in
                guard request.method == "POST", request.path == "/v1/traces",
                    request.headers["content-type"] == "application/json",
                    let spans = Self.decode(request.body)
                else {
                    received.rejected.withLock { $0 += 1 }
                    return HTTPResponse(status: 400)
                }
                received.spans.withLock { $0 += spans }
                return HTTPResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data("{}".utf8))
            }
        }

        var rejected: Int { received.rejected.withLock { $0 } }
        var all: [ReceivedSpan] { received.spans.withLock { $0 } }

        static func decode(_ body: Data) -> [ReceivedSpan]? {
            guard let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
                let resourceSpans = json["resourceSpans"] as? [[String: Any]]
            else { return nil }
            var result: [ReceivedSpan] = []
            for resource in resourceSpans {
                let attributes = (resource["resource"] as? [String: Any])?["attributes"] as? [[String: Any]] ?? []
                let service =
                    attributes.first { $0["key"] as? String == "service.name" }
                    .flatMap { ($0["value"] as? [String: Any])?["stringValue"] as? String } ?? ""
                for scope in resource["scopeSpans"] as? [[String: Any]] ?? [] {
                    for span in scope["spans"] as? [[String: Any]] ?? [] {
                        guard let traceID = span["traceId"] as? String, let spanID = span["spanId"] as? String,
                            let name = span["name"] as? String
                        else { return nil }
                        var values: [String: String] = [:]
                        for attribute in span["attributes"] as? [[String: Any]] ?? [] {
                            guard let key = attribute["key"] as? String,
                                let value = attribute["value"] as? [String: Any]
                            else { continue }
                            values[key] = (value["stringValue"] as? String) ?? (value["intValue"] as? String)
                        }
                        result.append(
                            ReceivedSpan(
                                service: service,
                                name: name,
                                kind: span["kind"] as? Int ?? 0,
                                traceID: traceID,
                                spanID: spanID,
                                parentSpanID: span["parentSpanId"] as? String,
                                attributes: values
                            )
                        )
                    }
                }
            }
            return result
        }

        func span(_ name: String, where predicate: (ReceivedSpan) -> Bool = { _ in true }) -> ReceivedSpan? {
            all.first { $0.name == name && predicate($0) }
        }
    }

    @Test func aPurchaseAndAReportAreConnectedTraces() async throws {
        let journey = try await ReportJourneyTests()
        let receiver = try Receiver()
        defer { receiver.server.stop() }
        let workers = try await journey.startWorkers(
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.server.baseURL.absoluteString,
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            ]
        )
        let ledger = journey.ledger
        let publisher = workers.publisher

        // 1. A purchase published without trace context: the billing-worker starts a trace there.
        let (user, profile) = try await ledger.userWithProfile(chart: false)
        _ = try await ledger.pool.withConnection { database in
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                """,
                [UUID(), profile.uuid, ReportJourneyTests.chartJSON]
            )
        }
        let purchaseJob = JobID.random()
        let (jws, _) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: user
        )
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.billingVerifyPurchase.rawValue,
                body: try JSONCoding.encoder.encode(
                    VerifyPurchaseRequest(jobID: purchaseJob, userID: user, signedTransaction: jws)
                ),
                properties: MessageProperties(contentType: "application/json"),
                mandatory: true
            )
        )
        try await RuntimeTestEnvironment.eventually("credit issued") { try await ledger.balance(user).available == 1 }

        // 2. report.request published as the gateway would, inside a caller's trace (with a
        //    vendor's tracestate, which must travel along).
        let caller = TraceContext.newRoot(sampled: true)
        let requestJob = JobID.random()
        try await publisher.publish(
            OutgoingMessage(
                exchange: BrokerNames.jobsExchange,
                routingKey: JobType.reportRequest.rawValue,
                body: try JSONCoding.encoder.encode(
                    ReportRequest(jobID: requestJob, userID: user, profileID: profile, area: .career, language: .en)
                ),
                properties: MessageProperties(
                    contentType: "application/json",
                    headers: ["traceparent": .string(caller.traceparent), "tracestate": .string("astro=test1")]
                ),
                mandatory: true
            )
        )
        let traceID = caller.traceID.hex
        try await RuntimeTestEnvironment.eventually("the report's spans exported", timeout: .seconds(45)) {
            receiver.span("report.generate") { $0.traceID == traceID } != nil
                && receiver.span("publish report.completed") { $0.traceID == traceID } != nil
                && receiver.span("billing.verify-purchase") != nil
        }
        await workers.stop()
        #expect(receiver.rejected == 0)

        // report.request continues the caller's span; report.generate is its child, in the other process.
        let request = try #require(receiver.span("report.request") { $0.traceID == traceID })
        #expect(request.service == "billing-worker")
        #expect(request.parentSpanID == caller.spanID.hex)
        #expect(request.kind == 5)
        #expect(request.attributes["astro.job.id"] == requestJob.description)
        #expect(request.attributes["astro.job.attempt"] == "1")
        #expect(request.attributes["astro.job.outcome"] == "succeeded")
        #expect(request.attributes["messaging.destination.name"] == "report.request")
        let generate = try #require(receiver.span("report.generate") { $0.traceID == traceID })
        #expect(generate.service == "report-worker")
        #expect(generate.parentSpanID == request.spanID, "\(receiver.all)")
        #expect(generate.attributes["astro.job.outcome"] == "succeeded")
        // The job's transaction and the relay's publishes are children of the job's span.
        #expect(receiver.span("db.transaction") { $0.parentSpanID == request.spanID } != nil)
        #expect(receiver.span("publish report.generate") { $0.parentSpanID == request.spanID } != nil)
        let completedPublish = try #require(receiver.span("publish report.completed") { $0.traceID == traceID })
        #expect(completedPublish.parentSpanID == generate.spanID)
        #expect(completedPublish.service == "report-worker")

        // What each job wrote to the outbox carries its span as traceparent (and the tracestate).
        let generateJob = try #require(generate.attributes["astro.job.id"])
        let rows = try await ledger.pool.withConnection { database in
            try database.query(
                """
                SELECT job_id, routing_key, headers->>'traceparent' AS traceparent, headers->>'tracestate' AS tracestate
                FROM outbox WHERE job_id = ANY(ARRAY[$1, $2, $3]::uuid[])
                """,
                [requestJob.description, generateJob, purchaseJob.description]
            ).map {
                (
                    job: try $0.decode(UUID.self, "job_id"),
                    key: try $0.decode(String.self, "routing_key"),
                    parent: try $0.decode(String?.self, "traceparent"),
                    state: try $0.decode(String?.self, "tracestate")
                )
            }
        }
        func parent(of routingKey: String) -> TraceContext? {
            rows.first { $0.key == routingKey }.flatMap { TraceContext.parse(traceparent: $0.parent) }
        }
        #expect(parent(of: "report.generate")?.spanID.hex == request.spanID)
        #expect(parent(of: "report.generate")?.traceID.hex == traceID)
        #expect(parent(of: "report.completed")?.spanID.hex == generate.spanID)
        #expect(parent(of: "report.completed")?.traceID.hex == traceID)
        #expect(rows.first { $0.key == "report.completed" }?.state == "astro=test1")
        // Every message of report.request (the follow-up job and its events) is in the caller's trace.
        let requestRows = rows.filter { $0.job == requestJob.uuid }
        #expect(requestRows.count >= 2, "\(requestRows.map(\.key))")
        for row in requestRows {
            #expect(TraceContext.parse(traceparent: row.parent)?.spanID.hex == request.spanID, "\(row.key)")
        }

        // The purchase, published untraced, is the root of a trace of its own.
        let purchase = try #require(
            receiver.span("billing.verify-purchase") { $0.attributes["astro.job.id"] == purchaseJob.description }
        )
        #expect(purchase.parentSpanID == nil)
        #expect(purchase.traceID != traceID)
        let purchaseEvents = rows.filter { $0.job == purchaseJob.uuid }
        #expect(!purchaseEvents.isEmpty)
        for event in purchaseEvents {
            #expect(TraceContext.parse(traceparent: event.parent)?.traceID.hex == purchase.traceID)
            #expect(TraceContext.parse(traceparent: event.parent)?.spanID.hex == purchase.spanID)
        }
    }

    /// The gateway continues a client's `traceparent`: its request span is the caller's child,
    /// the job it publishes (and the worker's event) stay in the trace, and its log lines carry
    /// the trace id. A request without one starts a trace.
    @Test func theGatewayContinuesTheCallersTrace() async throws {
        let ledger = try await BillingLedgerIntegrationTests()
        let receiver = try Receiver()
        defer { receiver.server.stop() }
        let running = try await GatewayHarness.launch(
            chartWorker: true,
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.server.baseURL.absoluteString,
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            ],
            label: "trace-gateway"
        )
        defer { running.processes.stop() }
        let (_, token) = try await GatewayHarness.register(running.base)
        let caller = TraceContext.newRoot(sampled: true)
        let posted = try await GatewayHarness.request(
            "POST",
            "\(running.base)/v1/profiles",
            token: token,
            body: GatewayHarness.profile,
            headers: ["traceparent": caller.traceparent]
        )
        #expect(posted.status == 202)
        let jobID = try #require(posted.json?["jobId"]?.stringValue)
        let traceID = caller.traceID.hex
        try await RuntimeTestEnvironment.eventually("the request span exported and the chart's event written") {
            let event = try await ledger.pool.withConnection { database in
                try database.query(
                    "SELECT headers->>'traceparent' AS traceparent FROM outbox WHERE job_id = $1::uuid",
                    [jobID]
                ).first?.decode(String?.self, "traceparent")
            }
            return receiver.span("POST /v1/profiles") { $0.traceID == traceID } != nil
                && receiver.span("POST /v1/devices") != nil && event != nil
        }
        let span = try #require(receiver.span("POST /v1/profiles") { $0.traceID == traceID })
        #expect(span.service == "gateway")
        #expect(span.kind == 2)
        #expect(span.parentSpanID == caller.spanID.hex)
        #expect(span.attributes["http.response.status_code"] == "202")
        #expect(span.attributes["http.route"] == "/v1/profiles")
        let eventParent = try await ledger.pool.withConnection { database in
            try database.query(
                "SELECT headers->>'traceparent' AS traceparent FROM outbox WHERE job_id = $1::uuid",
                [jobID]
            ).first?.decode(String?.self, "traceparent")
        }
        // The chart-worker's event is in the caller's trace, under the worker's own span.
        let event = try #require(TraceContext.parse(traceparent: eventParent))
        #expect(event.traceID.hex == traceID)
        #expect(event.spanID.hex != span.spanID)
        let register = try #require(receiver.span("POST /v1/devices"))
        #expect(register.parentSpanID == nil)
        #expect(register.traceID != traceID)
        #expect(running.processes.output.contains(traceID))
    }
}
