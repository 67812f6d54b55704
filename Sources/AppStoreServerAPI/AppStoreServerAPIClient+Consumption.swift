import Foundation
import HTTPTransport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Send Consumption Information, as documented for App Store Server API 1.19+ (the current
// endpoint, not "Send Consumption Information V1"): `PUT /inApps/v2/transactions/consumption/
// {transactionId}` with a `ConsumptionRequest` body; 202 Accepted; 400 with one of
// InvalidTransactionIdError 4000006, InvalidCustomerConsentedError 4000035,
// InvalidDeliveryStatusError 4000036, InvalidSampleContentProvidedError 4000041,
// InvalidRefundPreferenceError 4000044, ConsumptionPercentageOutOfRangeError,
// UndeliveredConsumptionPercentageNonZeroError, …; 401; 404 TransactionIdNotFoundError 4040010;
// 429 RateLimitExceededError 4290000; 500 GeneralInternalError 5000000.

/// The body of Send Consumption Information (`ConsumptionRequest`, App Store Server API 1.19+).
///
/// Apple refuses (400) a body whose `customerConsented` is not `true`, a `consumptionPercentage`
/// outside 0...100 000 (milliunits: 100 000 is 100 %), a non-zero percentage when
/// `deliveryStatus` is not `DELIVERED`, and `GRANT_PRORATED` without a percentage above 0. `init`
/// refuses the same, so a value of this type is one Apple accepts.
public struct ConsumptionRequestBody: Sendable, Hashable, Codable {
    /// Apple's `deliveryStatus` values.
    public enum DeliveryStatus: String, Sendable, Hashable, Codable, CaseIterable {
        /// Delivered and working properly.
        case delivered = "DELIVERED"
        case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
        case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
        case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
        case undeliveredOther = "UNDELIVERED_OTHER"
    }

    /// Apple's `refundPreference` values.
    public enum RefundPreference: String, Sendable, Hashable, Codable, CaseIterable {
        case decline = "DECLINE"
        case grantFull = "GRANT_FULL"
        case grantProrated = "GRANT_PRORATED"
    }

    /// The largest `consumptionPercentage`: 100 % in milliunits.
    public static let fullConsumption = 100_000

    /// Always `true`: a request without the customer's consent must not be made at all.
    public let customerConsented: Bool
    /// Milliunits of the purchase consumed (0...100 000); omitted when `nil`.
    public let consumptionPercentage: Int?
    public let deliveryStatus: DeliveryStatus
    /// Omitted when `nil` (no preference stated).
    public let refundPreference: RefundPreference?
    public let sampleContentProvided: Bool

    /// - Throws: `ConsumptionRequestBodyError` for a combination Apple refuses.
    public init(
        consumptionPercentage: Int?,
        deliveryStatus: DeliveryStatus,
        refundPreference: RefundPreference?,
        sampleContentProvided: Bool
    ) throws(ConsumptionRequestBodyError) {
        if let consumptionPercentage, !(0...Self.fullConsumption).contains(consumptionPercentage) {
            throw ConsumptionRequestBodyError("consumptionPercentage \(consumptionPercentage) is outside 0...100000")
        }
        if deliveryStatus != .delivered, let consumptionPercentage, consumptionPercentage != 0 {
            throw ConsumptionRequestBodyError(
                "consumptionPercentage must be 0 when deliveryStatus is \(deliveryStatus.rawValue)"
            )
        }
        if refundPreference == .grantProrated, (consumptionPercentage ?? 0) <= 0 {
            throw ConsumptionRequestBodyError("GRANT_PRORATED needs a consumptionPercentage above 0")
        }
        self.customerConsented = true
        self.consumptionPercentage = consumptionPercentage
        self.deliveryStatus = deliveryStatus
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
    }

    enum CodingKeys: String, CodingKey {
        case customerConsented, consumptionPercentage, deliveryStatus, refundPreference, sampleContentProvided
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard try container.decode(Bool.self, forKey: .customerConsented) else {
            throw DecodingError.dataCorruptedError(
                forKey: .customerConsented,
                in: container,
                debugDescription: "customerConsented must be true"
            )
        }
        do {
            try self.init(
                consumptionPercentage: try container.decodeIfPresent(Int.self, forKey: .consumptionPercentage),
                deliveryStatus: try container.decode(DeliveryStatus.self, forKey: .deliveryStatus),
                refundPreference: try container.decodeIfPresent(RefundPreference.self, forKey: .refundPreference),
                sampleContentProvided: try container.decode(Bool.self, forKey: .sampleContentProvided)
            )
        } catch let error as ConsumptionRequestBodyError {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: [], debugDescription: error.message)
            )
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(customerConsented, forKey: .customerConsented)
        // Optional fields are left out, not sent as null: Apple documents them as optional, not nullable.
        try container.encodeIfPresent(consumptionPercentage, forKey: .consumptionPercentage)
        try container.encode(deliveryStatus, forKey: .deliveryStatus)
        try container.encodeIfPresent(refundPreference, forKey: .refundPreference)
        try container.encode(sampleContentProvided, forKey: .sampleContentProvided)
    }

    /// The JSON sent, keys sorted (stable for storage and tests).
    public func jsonData() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding a struct of strings, integers and booleans cannot fail.
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }
}

/// A consumption request body Apple would refuse; `message` names the field.
public struct ConsumptionRequestBodyError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "ConsumptionRequest: \(message)" }
}

/// What the App Store answered to a Send Consumption Information request it accepted.
public struct ConsumptionSendReceipt: Sendable, Hashable {
    /// 202 (Apple documents no other success).
    public var httpStatus: Int
    /// Requests sent, retries included.
    public var attempts: Int
}

extension AppStoreServerAPIClient {
    /// Sends consumption information for the transaction of a CONSUMPTION_REQUEST (Send
    /// Consumption Information, App Store Server API 1.19+:
    /// `PUT /inApps/v2/transactions/consumption/{transactionId}`).
    ///
    /// Retried like every call of this client (429 honouring `Retry-After`, 5xx, timeouts,
    /// connection failures), within the configuration's attempts and deadline. The PUT is
    /// idempotent on Apple's side: a retry after a lost 202 repeats the same information.
    /// - Parameters:
    ///   - transactionID: the notification's transaction id (digits).
    ///   - body: the information; its `customerConsented` is always `true`.
    /// - Returns: the 202 and the attempts made.
    /// - Throws: `AppStoreAPIError`: `invalid-transaction-id` (refused locally, or Apple's 400
    ///   4000006), `invalid-request` (another 400; `errorCode` says which field),
    ///   `transaction-not-found` (404), `unauthorized`, and the transient kinds once retries are
    ///   spent.
    public func sendConsumptionInformation(
        transactionID: String,
        body: ConsumptionRequestBody
    ) async throws(AppStoreAPIError) -> ConsumptionSendReceipt {
        guard Self.isPlausibleTransactionID(transactionID),
            let url = URL(
                string: configuration.baseURL.absoluteString + "/inApps/v2/transactions/consumption/" + transactionID
            )
        else {
            throw AppStoreAPIError(
                kind: .invalidTransactionID,
                reason: "the transaction id must be 1 to 64 ASCII digits; refused without asking the App Store",
                attempts: 0
            )
        }
        let (answer, attempts) = try await send(url, method: "PUT", body: body.jsonData()) {
            Self.classifyConsumption($0, attempt: $1)
        }
        // The loop carries a success's body; this endpoint's body is empty, so it carries the status.
        return ConsumptionSendReceipt(
            httpStatus: Int(String(decoding: answer, as: UTF8.self)) ?? 202,
            attempts: attempts
        )
    }

    /// One attempt's answer: 202 (any 2xx) succeeds; 400 and 404 are final with Apple's code;
    /// the rest as for every call.
    static func classifyConsumption(_ outcome: TransportOutcome, attempt: Int) -> AttemptVerdict<AppStoreAPIError> {
        switch outcome {
        case .response(let status, let headers, let body):
            if (200...299).contains(status) { return .success(Data(String(status).utf8)) }
            let apple = AppleErrorBody.parse(body)
            func error(_ kind: AppStoreAPIError.Kind, _ reason: String) -> AppStoreAPIError {
                AppStoreAPIError(
                    kind: kind,
                    reason: reason,
                    httpStatus: status,
                    errorCode: apple?.errorCode,
                    errorMessage: apple?.errorMessage,
                    attempts: attempt,
                    retryAfter: headers["Retry-After"].flatMap(parseRetryAfter)
                )
            }
            switch status {
            case 400 where apple?.errorCode == 4_000_006:
                return .final(error(.invalidTransactionID, "the App Store refused the transaction id"))
            case 400:
                return .final(error(.invalidRequest, "the App Store refused the consumption information"))
            case 404:
                return .final(error(.transactionNotFound, "the App Store has no transaction with this id"))
            default:
                break
            }
        default:
            break
        }
        switch classify(outcome, attempt: attempt) {
        case .success:
            // A 2xx was answered above; classify has no other success.
            return .final(AppStoreAPIError(kind: .malformedResponse, reason: "unexpected success", attempts: attempt))
        case .retryable(let error): return .retryable(error)
        case .final(let error): return .final(error)
        }
    }
}
