import Foundation
import JOSE

// The support and notification endpoints of the App Store Server API, as documented for API
// version 1.x (Look Up Order ID since 1.1, Get Notification History, Request a Test Notification
// and Get Test Notification Status since 1.5, Get Refund History v2 since 1.6), checked against
// Apple's reference pages in November 2026. Every answer is a JWS or a list of them: callers
// verify each one before trusting it.

/// Look Up Order ID's answer (`OrderLookupResponse`).
public struct OrderLookup: Sendable, Hashable, Codable {
    /// `OrderLookupStatus`: 0 the order id is valid, 1 it is not (no transactions then).
    public var status: Int
    /// The order's in-app purchases (JWS transactions); empty when `status` is 1.
    public var signedTransactions: [String]

    /// Whether Apple knows the order id for this app.
    public var isValid: Bool { status == 0 }
}

/// One page of Get Refund History (`RefundHistoryResponse`).
public struct RefundHistoryPage: Sendable, Hashable, Codable {
    /// Up to 20 refunded transactions (JWS), oldest revocation first.
    public var signedTransactions: [String]
    /// The token for the next page (the `revision` query parameter).
    public var revision: String?
    public var hasMore: Bool
}

/// Get Notification History's request body (`NotificationHistoryRequest`). `startDate` and
/// `endDate` are required (milliseconds since 1970); Apple keeps 180 days of history in
/// production and 30 in the sandbox.
public struct NotificationHistoryRequest: Sendable, Hashable, Codable {
    public var startDate: Int64
    public var endDate: Int64
    /// At most one of `notificationType` and `transactionId` (Apple refuses both: `4000019`).
    public var notificationType: String?
    public var notificationSubtype: String?
    public var transactionId: String?
    public var onlyFailures: Bool?

    public init(
        startDate: Date,
        endDate: Date,
        notificationType: String? = nil,
        notificationSubtype: String? = nil,
        transactionID: String? = nil,
        onlyFailures: Bool? = nil
    ) {
        self.startDate = Int64((startDate.timeIntervalSince1970 * 1000).rounded(.down))
        self.endDate = Int64((endDate.timeIntervalSince1970 * 1000).rounded(.down))
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionId = transactionID
        self.onlyFailures = onlyFailures
    }
}

/// One try of the App Store to deliver a notification (`sendAttemptItem`).
public struct SendAttempt: Sendable, Hashable, Codable {
    /// Milliseconds since 1970.
    public var attemptDate: Int64?
    /// `SUCCESS`, `TIMED_OUT`, `TLS_ISSUE`, `CIRCULAR_REDIRECT`, `NO_RESPONSE`, `SOCKET_ISSUE`,
    /// `UNSUPPORTED_CHARSET`, `INVALID_RESPONSE`, `PREMATURE_CLOSE`,
    /// `UNSUCCESSFUL_HTTP_RESPONSE_CODE` or `OTHER`.
    public var sendAttemptResult: String?

    public init(attemptDate: Int64?, sendAttemptResult: String?) {
        self.attemptDate = attemptDate
        self.sendAttemptResult = sendAttemptResult
    }
}

/// One notification the App Store sent or tried to send (`notificationHistoryResponseItem`).
public struct NotificationHistoryItem: Sendable, Hashable, Codable {
    /// The notification as it was posted (a JWS `ResponseBodyV2DecodedPayload`).
    public var signedPayload: String
    public var sendAttempts: [SendAttempt]

    public init(signedPayload: String, sendAttempts: [SendAttempt]) {
        self.signedPayload = signedPayload
        self.sendAttempts = sendAttempts
    }
}

/// One page of Get Notification History (`NotificationHistoryResponse`, at most 20 items).
public struct NotificationHistoryPage: Sendable, Hashable, Codable {
    public var notificationHistory: [NotificationHistoryItem]
    public var hasMore: Bool
    /// The token for the next page (the `paginationToken` query parameter).
    public var paginationToken: String?
}

/// Get Test Notification Status's answer (`CheckTestNotificationResponse`).
public struct TestNotificationStatus: Sendable, Hashable, Codable {
    /// The `TEST` notification the App Store tried to send (a JWS).
    public var signedPayload: String
    /// Up to six tries: the first and five retries.
    public var sendAttempts: [SendAttempt]
}

extension AppStoreServerAPIClient {
    /// The longest order id, refund revision, pagination or test token accepted (Apple's are far
    /// shorter): anything longer is refused without a request.
    static let maxTokenLength = 512

    /// Look Up Order ID: `GET /inApps/v1/lookup/{orderId}` (production only: the sandbox has no
    /// order ids).
    /// - Parameter orderID: the order id from the customer's receipt e-mail (letters and digits).
    /// - Returns: the status and the signed transactions; a status of 1 is an unknown order id.
    /// - Throws: `AppStoreAPIError`; an id that is not 1–64 ASCII letters and digits is refused
    ///   without a request (`invalid-request`, 0 attempts).
    public func lookUpOrder(orderID: String) async throws(AppStoreAPIError) -> OrderLookup {
        guard Self.isPlausibleOrderID(orderID) else {
            throw AppStoreAPIError(
                kind: .invalidRequest,
                reason: "the order id must be 1 to 64 ASCII letters and digits; refused without asking the App Store",
                attempts: 0
            )
        }
        struct Answer: Decodable {
            var status: Int?
            var signedTransactions: [String]?
        }
        let (answer, attempts): (Answer, Int) = try await call("/inApps/v1/lookup/" + orderID)
        guard let status = answer.status else {
            throw Self.malformed("the 200 answer has no status", attempts: attempts)
        }
        let transactions = answer.signedTransactions ?? []
        guard transactions.allSatisfy(CompactJWS.hasCompactShape) else {
            throw Self.malformed("a signedTransactions entry is not a compact JWS", attempts: attempts)
        }
        return OrderLookup(status: status, signedTransactions: transactions)
    }

    /// Get Refund History (v2): `GET /inApps/v2/refund/lookup/{transactionId}?revision=…`.
    /// - Parameters:
    ///   - transactionID: any transaction id of the customer (digits).
    ///   - revision: `nil` for the first page, then the previous page's `revision`.
    /// - Throws: `AppStoreAPIError` (`invalid-transaction-id` without a request for an id that
    ///   is not digits; `invalid-request` for a revision that is too long or not printable).
    public func refundHistory(
        transactionID: String,
        revision: String? = nil
    ) async throws(AppStoreAPIError) -> RefundHistoryPage {
        guard Self.isPlausibleTransactionID(transactionID) else {
            throw AppStoreAPIError(
                kind: .invalidTransactionID,
                reason: "the transaction id must be 1 to 64 ASCII digits; refused without asking the App Store",
                attempts: 0
            )
        }
        var query: [URLQueryItem] = []
        if let revision {
            try Self.requireToken(revision, "revision")
            query.append(URLQueryItem(name: "revision", value: revision))
        }
        struct Answer: Decodable {
            var signedTransactions: [String]?
            var revision: String?
            var hasMore: Bool?
        }
        let (answer, attempts): (Answer, Int) = try await call(
            "/inApps/v2/refund/lookup/" + transactionID,
            query: query
        )
        let transactions = answer.signedTransactions ?? []
        guard transactions.allSatisfy(CompactJWS.hasCompactShape) else {
            throw Self.malformed("a signedTransactions entry is not a compact JWS", attempts: attempts)
        }
        return RefundHistoryPage(
            signedTransactions: transactions,
            revision: answer.revision,
            hasMore: answer.hasMore ?? false
        )
    }

    /// Get Notification History: `POST /inApps/v1/notifications/history?paginationToken=…`.
    /// - Parameters:
    ///   - request: the window and filters (the same body for every page).
    ///   - paginationToken: `nil` for the first page, then the previous page's token.
    /// - Throws: `AppStoreAPIError` (`invalid-request` for Apple's 400s: dates out of range,
    ///   an invalid or expired token).
    public func notificationHistory(
        _ request: NotificationHistoryRequest,
        paginationToken: String? = nil
    ) async throws(AppStoreAPIError) -> NotificationHistoryPage {
        var query: [URLQueryItem] = []
        if let paginationToken {
            try Self.requireToken(paginationToken, "paginationToken")
            query.append(URLQueryItem(name: "paginationToken", value: paginationToken))
        }
        let body: Data
        do {
            body = try JSONEncoder().encode(request)
        } catch {
            throw AppStoreAPIError(kind: .invalidRequest, reason: "cannot encode the request body", attempts: 0)
        }
        struct Answer: Decodable {
            var notificationHistory: [NotificationHistoryItem]?
            var hasMore: Bool?
            var paginationToken: String?
        }
        let (answer, attempts): (Answer, Int) = try await call(
            "/inApps/v1/notifications/history",
            query: query,
            method: "POST",
            body: body
        )
        let items = answer.notificationHistory ?? []
        guard items.allSatisfy({ CompactJWS.hasCompactShape($0.signedPayload) }) else {
            throw Self.malformed("a signedPayload is not a compact JWS", attempts: attempts)
        }
        if answer.hasMore == true, answer.paginationToken?.isEmpty ?? true {
            throw Self.malformed("hasMore is true but there is no paginationToken", attempts: attempts)
        }
        return NotificationHistoryPage(
            notificationHistory: items,
            hasMore: answer.hasMore ?? false,
            paginationToken: answer.paginationToken
        )
    }

    /// Request a Test Notification: `POST /inApps/v1/notifications/test`. The App Store then
    /// posts a `TEST` notification to the URL configured in App Store Connect for this
    /// environment.
    /// - Returns: the `testNotificationToken`, for `testNotificationStatus(token:)`.
    /// - Throws: `AppStoreAPIError` (`not-found` when no notification URL is configured).
    public func requestTestNotification() async throws(AppStoreAPIError) -> String {
        struct Answer: Decodable { var testNotificationToken: String? }
        let (answer, attempts): (Answer, Int) = try await call("/inApps/v1/notifications/test", method: "POST")
        guard let token = answer.testNotificationToken, !token.isEmpty, token.utf8.count <= Self.maxTokenLength
        else {
            throw Self.malformed("the 200 answer has no usable testNotificationToken", attempts: attempts)
        }
        return token
    }

    /// Get Test Notification Status: `GET /inApps/v1/notifications/test/{testNotificationToken}`.
    /// - Throws: `AppStoreAPIError` (`not-found` for an unknown token).
    public func testNotificationStatus(token: String) async throws(AppStoreAPIError) -> TestNotificationStatus {
        try Self.requireToken(token, "testNotificationToken")
        guard let escaped = token.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) else {
            throw AppStoreAPIError(kind: .invalidRequest, reason: "cannot escape the token", attempts: 0)
        }
        struct Answer: Decodable {
            var signedPayload: String?
            var sendAttempts: [SendAttempt]?
        }
        let (answer, attempts): (Answer, Int) = try await call("/inApps/v1/notifications/test/" + escaped)
        guard let signed = answer.signedPayload, CompactJWS.hasCompactShape(signed) else {
            throw Self.malformed("the 200 answer has no signedPayload JWS", attempts: attempts)
        }
        return TestNotificationStatus(signedPayload: signed, sendAttempts: answer.sendAttempts ?? [])
    }

    // MARK: - Shared

    /// Letters and digits only, 1 to 64 of them (Apple's order ids look like `MK5TTTVWJH`).
    static func isPlausibleOrderID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64
            && id.utf8.allSatisfy {
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
            }
    }

    private static func requireToken(_ value: String, _ name: String) throws(AppStoreAPIError) {
        guard !value.isEmpty, value.utf8.count <= maxTokenLength,
            value.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value < 0x7F })
        else {
            throw AppStoreAPIError(
                kind: .invalidRequest,
                reason:
                    "the \(name) must be 1 to \(maxTokenLength) printable ASCII characters; refused without a request",
                attempts: 0
            )
        }
    }

    private static func malformed(_ reason: String, attempts: Int) -> AppStoreAPIError {
        AppStoreAPIError(kind: .malformedResponse, reason: reason, httpStatus: 200, attempts: attempts)
    }

    /// Sends one request and decodes its 200 answer; 400 and 404 are reported as this API's
    /// `invalid-request` and `not-found` (the transaction look-up's kinds name a transaction).
    private func call<Answer: Decodable>(
        _ path: String,
        query: [URLQueryItem] = [],
        method: String = "GET",
        body: Data? = nil
    ) async throws(AppStoreAPIError) -> (Answer, Int) {
        guard var components = URLComponents(string: configuration.baseURL.absoluteString + path) else {
            throw AppStoreAPIError(kind: .invalidRequest, reason: "cannot build the request URL", attempts: 0)
        }
        if !query.isEmpty {
            components.queryItems = query
            // `+` and `/` are legal in a query but Apple's tokens are base64: keep them literal.
            components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(
                of: "+",
                with: "%2B"
            )
        }
        guard let url = components.url else {
            throw AppStoreAPIError(kind: .invalidRequest, reason: "cannot build the request URL", attempts: 0)
        }
        let data: Data
        let attempts: Int
        do {
            (data, attempts) = try await send(url, method: method, body: body)
        } catch {
            var error = error
            switch (error.kind, error.httpStatus) {
            case (.invalidTransactionID, 400?):
                if error.errorCode != 4_000_006 {
                    error.kind = .invalidRequest
                    error.reason = "the App Store refused the request"
                }
            case (.transactionNotFound, 404?):
                if error.errorCode != 4_040_010 {
                    error.kind = .notFound
                    error.reason = "the App Store has no such resource"
                }
            default: break
            }
            throw error
        }
        do {
            return (try JSONDecoder().decode(Answer.self, from: data), attempts)
        } catch {
            throw Self.malformed(
                "the 200 answer is not the expected JSON object (\(data.count) bytes)",
                attempts: attempts
            )
        }
    }
}
