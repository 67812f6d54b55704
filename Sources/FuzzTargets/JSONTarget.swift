import AstroDomain
import Foundation

#if DEBUG || ASTRO_FUZZING
@testable import WorkerRuntime
#else
import WorkerRuntime
#endif

/// `json`: job bodies as they arrive from the broker.
///
/// Every input goes through `JSONValue.parse`, `ChartCalculateRequest.decode(from:)`, `JobHead.parse`
/// (the envelope the runtime reads first; only where `@testable import WorkerRuntime` works, i.e. debug
/// and fuzzing builds) and `JobEnvelope.decode` for every other job payload type. Invariants:
/// - what `JSONValue.parse` accepts, its writer writes as JSON that parses again and writes identically;
/// - a `chart.calculate` body that decodes, written back as JSON (`ChartCalculateRequest.json`),
///   decodes to an equal request (a worker can republish what it accepted);
/// - a payload that decodes, encoded with `JSONCoding.encoder`, decodes again and encodes identically.
enum JSONTarget {
    static let target = FuzzTarget(
        name: "json",
        summary: "JSONValue.parse, ChartCalculateRequest.decode, JobHead.parse, JobEnvelope.decode of every payload",
        run: run
    )

    private static let jobID = JobID(UUID(uuid: (1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16)))

    static func run(_ data: Data) {
        checkJSONValue(data)
        checkChartRequest(data)
        #if DEBUG || ASTRO_FUZZING
        _ = JobHead.parse(data)
        #endif
        checkPayload(VerifyPurchaseRequest.self, .billingVerifyPurchase, data)
        checkPayload(ReportRequest.self, .reportRequest, data)
        checkPayload(ReportGenerateRequest.self, .reportGenerate, data)
        checkPayload(RefundCreditRequest.self, .billingRefundCredit, data)
        checkPayload(StoreNotificationRequest.self, .billingStoreNotification, data)
        checkPayload(StoryGenerateRequest.self, .storyGenerate, data)
        checkPayload(StoryIllustrateRequest.self, .storyIllustrate, data)
        checkPayload(StoryReadRequest.self, .storyRead, data)
        checkPayload(SendConsumptionRequest.self, .billingSendConsumption, data)
        checkPayload(RecoverNotificationsRequest.self, .billingRecoverNotifications, data)
    }

    private static func checkJSONValue(_ data: Data) {
        guard let value = try? JSONValue.parse(data) else { return }
        let written = value.jsonData()
        let reparsed: JSONValue
        do {
            reparsed = try JSONValue.parse(written)
        } catch {
            fatalError(
                "JSONValue: the writer's output does not parse (\(error)): "
                    + quoted(String(decoding: written, as: UTF8.self))
            )
        }
        let rewritten = reparsed.jsonData()
        invariant(
            rewritten == written,
            "JSONValue: writing is not stable: \(quoted(String(decoding: written, as: UTF8.self))) became "
                + quoted(String(decoding: rewritten, as: UTF8.self))
        )
    }

    private static func checkChartRequest(_ data: Data) {
        _ = ChartCalculateRequest.jobID(in: data)
        guard let request = try? ChartCalculateRequest.decode(from: data) else { return }
        let body = request.json.jsonData()
        do {
            let again = try ChartCalculateRequest.decode(from: body)
            invariant(
                again == request,
                "ChartCalculateRequest: \(quoted(String(decoding: body, as: UTF8.self))) decodes to a different request"
            )
        } catch {
            fatalError(
                "ChartCalculateRequest: its own JSON \(quoted(String(decoding: body, as: UTF8.self))) "
                    + "does not decode: \(error)"
            )
        }
    }

    private static func checkPayload<Payload: Codable>(_ type: Payload.Type, _ jobType: JobType, _ data: Data) {
        let envelope = JobEnvelope(jobID: jobID, type: jobType, body: data)
        guard let payload = try? envelope.decode(type) else { return }
        let encoder = JSONCoding.encoder
        let encoded: Data
        do {
            encoded = try encoder.encode(payload)
        } catch {
            fatalError("\(Payload.self): a decoded payload does not encode: \(error)")
        }
        do {
            let again = try JobEnvelope(jobID: jobID, type: jobType, body: encoded).decode(type)
            let reencoded = try encoder.encode(again)
            invariant(
                reencoded == encoded,
                "\(Payload.self): encoding is not stable: \(quoted(String(decoding: encoded, as: UTF8.self))) "
                    + "became \(quoted(String(decoding: reencoded, as: UTF8.self)))"
            )
        } catch {
            fatalError(
                "\(Payload.self): its own encoding \(quoted(String(decoding: encoded, as: UTF8.self))) "
                    + "does not decode: \(error)"
            )
        }
    }
}
