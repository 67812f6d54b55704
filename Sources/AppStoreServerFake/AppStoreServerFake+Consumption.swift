import Foundation
import LoopbackHTTP
import Synchronization

/// Send Consumption Information as Apple documents it (App Store Server API 1.19+):
/// `PUT /inApps/v2/transactions/consumption/{transactionId}` answers 202 with an empty body
/// when the body is a valid `ConsumptionRequest` for a known transaction, and otherwise:
/// 400 `4000006` for an id that is not digits; 404 `4040010` for an id not registered with
/// `register(signedTransaction:forTransactionID:)`; 400 with Apple's error for a body Apple
/// refuses (`4000035` customerConsented not `true`, `4000036` bad deliveryStatus, `4000041` bad
/// sampleContentProvided, `4000044` bad refundPreference, and for consumptionPercentage out of
/// 0...100000, non-zero while undelivered, or missing with GRANT_PRORATED the general
/// `4000000`: the numeric codes of those 1.19 errors are not in the documentation read). A
/// malformed body answers 400 without an error code, as Apple documents. Queued failures
/// (`enqueueFailure`, e.g. `.rateLimited(retryAfter: 1)`) come first, as for every route.
final class ConsumptionEndpoint: Sendable {
    static let pathPrefix = "/inApps/v2/transactions/consumption/"

    private let received = Mutex<[AppStoreServerFake.ReceivedConsumption]>([])

    var requests: [AppStoreServerFake.ReceivedConsumption] { received.withLock { $0 } }

    /// The answer when `request` is for this endpoint, else nil (another route's).
    func answer(_ request: HTTPRequest, knownTransactionIDs: Set<String>) -> HTTPResponse? {
        guard request.path.hasPrefix(Self.pathPrefix) else { return nil }
        let rawID = String(request.path.dropFirst(Self.pathPrefix.count))
        guard request.method == "PUT" else { return .empty(status: 405, headers: ["Allow": "PUT"]) }
        let id = rawID.removingPercentEncoding ?? rawID
        guard !id.isEmpty, id.utf8.count <= 64, id.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return FakeStore.appleError(status: 400, code: 4_000_006, message: "Invalid transaction id.")
        }
        guard knownTransactionIDs.contains(id) else {
            return FakeStore.appleError(status: 404, code: 4_040_010, message: "Transaction id not found.")
        }
        guard request.body.count <= 4_096,
            let object = try? JSONDecoder().decode([String: Scalar].self, from: request.body)
        else { return .empty(status: 400) }
        if let refusal = Self.validate(object) { return refusal }
        let body = String(decoding: request.body, as: UTF8.self)
        received.withLock {
            $0.append(AppStoreServerFake.ReceivedConsumption(transactionID: id, body: body, receivedAt: Date()))
        }
        return .empty(status: 202)
    }

    /// A JSON member's value, as far as the checks need it.
    enum Scalar: Decodable, Equatable {
        case bool(Bool)
        case number(Double)
        case string(String)
        case null, other

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer()
            if value.decodeNil() {
                self = .null
            } else if let bool = try? value.decode(Bool.self) {
                self = .bool(bool)
            } else if let number = try? value.decode(Double.self) {
                self = .number(number)
            } else if let text = try? value.decode(String.self) {
                self = .string(text)
            } else {
                self = .other
            }
        }
    }

    /// Apple's checks of a `ConsumptionRequest`, in the order of its fields' documentation.
    static func validate(_ object: [String: Scalar]) -> HTTPResponse? {
        func refuse(_ code: Int, _ message: String) -> HTTPResponse {
            FakeStore.appleError(status: 400, code: code, message: "Invalid request. " + message)
        }
        guard object["customerConsented"] == .bool(true) else {
            return refuse(
                4_000_035,
                "The customer consented field is required and must indicate the customer consented."
            )
        }
        let deliveries = [
            "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE",
            "UNDELIVERED_OTHER",
        ]
        guard case .string(let delivery)? = object["deliveryStatus"], deliveries.contains(delivery) else {
            return refuse(4_000_036, "The delivery status field is invalid.")
        }
        guard case .bool? = object["sampleContentProvided"] else {
            return refuse(4_000_041, "The sample content provided field is invalid.")
        }
        var preference: String?
        switch object["refundPreference"] {
        case nil, .null?: break
        case .string(let text)? where ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"].contains(text): preference = text
        default: return refuse(4_000_044, "The refund preference field is invalid.")
        }
        var percentage = 0
        switch object["consumptionPercentage"] {
        case nil, .null?: break
        case .number(let value)? where value == value.rounded() && (0...100_000).contains(value):
            percentage = Int(value)
        default: return refuse(4_000_000, "The consumption percentage is outside the valid range.")
        }
        if delivery != "DELIVERED", percentage != 0 {
            return refuse(4_000_000, "The consumption percentage must be zero for this delivery status.")
        }
        if preference == "GRANT_PRORATED", percentage <= 0 {
            return refuse(4_000_000, "GRANT_PRORATED needs a consumption percentage above zero.")
        }
        return nil
    }
}

extension AppStoreServerFake {
    /// A Send Consumption Information request the fake accepted (answered 202).
    public struct ReceivedConsumption: Sendable, Hashable {
        /// The transaction id of the path.
        public var transactionID: String
        /// The JSON body as sent.
        public var body: String
        public var receivedAt: Date
    }

    /// The consumption requests accepted so far, in order (refused ones are not recorded:
    /// `requestCount(path:)` counts every request).
    public var consumptionRequests: [ReceivedConsumption] { store.consumption.requests }

    /// The path of Send Consumption Information for `transactionID`.
    public static func consumptionPath(transactionID: String) -> String {
        ConsumptionEndpoint.pathPrefix + transactionID
    }
}
