import Foundation
import LoopbackHTTP
import Synchronization
import UUIDText

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The fake's support and notification endpoints, shaped as Apple documents them for App Store
// Server API 1.x (Look Up Order ID, Get Refund History v2, Get Notification History, Request a
// Test Notification, Get Test Notification Status): the same paths, bodies, 400/404 error codes
// and pagination, so a client that works here works against Apple.

extension AppStoreServerFake {
    /// Signs a notification payload (its JSON bytes) into a JWS, as the App Store's key does.
    /// Tests pass the development PKI's signer.
    public typealias PayloadSigner = @Sendable (Data) throws -> String

    /// Makes `GET /inApps/v1/lookup/{orderID}` answer status 0 with these signed transactions
    /// (any other order id answers status 1, as Apple does for an unknown order).
    public func registerOrder(_ orderID: String, signedTransactions: [String]) {
        store.support.state.withLock { $0.orders[orderID] = signedTransactions }
    }

    /// Makes `GET /inApps/v2/refund/lookup/{id}` answer, for each of `transactionIDs`, these
    /// refunded transactions (sorted by the caller, oldest revocation first), 20 per page
    /// unless `setPageSize` says otherwise.
    public func registerRefunds(_ signedTransactions: [String], forTransactionIDs transactionIDs: [String]) {
        store.support.state.withLock { state in
            for id in transactionIDs { state.refunds[id] = signedTransactions }
        }
    }

    /// Adds a notification to the history `POST /inApps/v1/notifications/history` returns.
    /// - Parameters:
    ///   - signedPayload: the notification (sign it with the test PKI).
    ///   - sentAt: when the App Store first tried to send it (the history's window is on this).
    ///   - delivered: whether that try succeeded (`SUCCESS`) or not (`NO_RESPONSE`).
    public func addNotificationHistory(signedPayload: String, sentAt: Date, delivered: Bool = false) {
        let attempt = SendAttemptRecord(
            attemptDate: Self.millis(sentAt),
            sendAttemptResult: delivered ? "SUCCESS" : "NO_RESPONSE"
        )
        store.support.state.withLock {
            $0.history.append(HistoryRecord(signedPayload: signedPayload, sentAt: sentAt, sendAttempts: [attempt]))
        }
    }

    /// Items per page of the history endpoints (Apple's is 20); tests set it lower to page.
    public func setPageSize(_ size: Int) {
        store.support.state.withLock { $0.pageSize = max(1, min(size, 100)) }
    }

    /// Where `POST /inApps/v1/notifications/test` sends its `TEST` notification, and with what
    /// it signs it. Without this the endpoint answers 404 `4040007`
    /// (ServerNotificationURLNotFoundError), as Apple does for an app with no notification URL.
    public func configureNotifications(url: URL, bundleID: String, environment: String, signer: @escaping PayloadSigner)
    {
        store.support.state.withLock {
            $0.notificationTarget = NotificationTarget(
                url: url,
                bundleID: bundleID,
                environment: environment,
                signer: signer
            )
        }
    }

    /// Requests made to the history endpoint, in order (their `paginationToken`, nil for a first page).
    public var notificationHistoryTokens: [String?] { store.support.state.withLock { $0.historyTokens } }

    /// The test notifications the fake tried to send, by token, with the HTTP status the target
    /// answered (nil when it did not answer).
    public var testNotificationResults: [String: Int?] { store.support.state.withLock { $0.testResults } }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
}

struct SendAttemptRecord: Codable, Sendable, Hashable {
    var attemptDate: Int64
    var sendAttemptResult: String
}

struct HistoryRecord: Sendable {
    var signedPayload: String
    var sentAt: Date
    var sendAttempts: [SendAttemptRecord]
}

struct NotificationTarget: Sendable {
    var url: URL
    var bundleID: String
    var environment: String
    var signer: AppStoreServerFake.PayloadSigner
}

/// The state and routes of the support endpoints (the transaction look-up stays in
/// `AppStoreServerFake.swift`).
final class FakeSupportRoutes: Sendable {
    struct State {
        var orders: [String: [String]] = [:]
        var refunds: [String: [String]] = [:]
        var history: [HistoryRecord] = []
        var historyTokens: [String?] = []
        var pageSize = 20
        var notificationTarget: NotificationTarget?
        var tests: [String: (signedPayload: String, attempts: [SendAttemptRecord])] = [:]
        var testResults: [String: Int?] = [:]
    }

    let state = Mutex(State())

    /// The answer for a support path, or nil for a path this file does not serve.
    func route(_ request: HTTPRequest, now: Date) async -> HTTPResponse? {
        let segments = request.pathSegments
        guard segments.count >= 3, segments[0] == "inApps" else { return nil }
        switch (request.method, Array(segments.dropFirst())) {
        case ("GET", let rest) where rest.count == 3 && rest[0] == "v1" && rest[1] == "lookup":
            return lookUpOrder(rest[2])
        case ("GET", let rest) where rest.count == 4 && rest[0] == "v2" && rest[1] == "refund" && rest[2] == "lookup":
            return refundHistory(rest[3], revision: request.queryItems.first { $0.name == "revision" }?.value)
        case ("POST", let rest) where rest == ["v1", "notifications", "history"]:
            return notificationHistory(request, now: now)
        case ("POST", let rest) where rest == ["v1", "notifications", "test"]:
            return requestTest(now: now)
        case ("GET", let rest)
        where rest.count == 4 && rest[0] == "v1" && rest[1] == "notifications" && rest[2] == "test":
            return testStatus(rest[3])
        default:
            return nil
        }
    }

    private func lookUpOrder(_ orderID: String) -> HTTPResponse {
        struct Answer: Encodable {
            var status: Int
            var signedTransactions: [String]?
        }
        guard let transactions = state.withLock({ $0.orders[orderID] }) else {
            return .json(status: 200, Answer(status: 1, signedTransactions: nil))
        }
        return .json(status: 200, Answer(status: 0, signedTransactions: transactions))
    }

    private func refundHistory(_ transactionID: String, revision: String?) -> HTTPResponse {
        guard !transactionID.isEmpty, transactionID.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return FakeStore.appleError(status: 400, code: 4_000_006, message: "Invalid transaction id.")
        }
        let (list, pageSize) = state.withLock { ($0.refunds[transactionID], $0.pageSize) }
        guard let list else {
            return FakeStore.appleError(status: 404, code: 4_040_010, message: "Transaction id not found.")
        }
        var offset = 0
        if let revision {
            guard let decoded = Self.decodeToken(revision, prefix: "rev:\(transactionID):"), decoded <= list.count
            else {
                return FakeStore.appleError(status: 400, code: 4_000_005, message: "Invalid request revision.")
            }
            offset = decoded
        }
        let end = min(list.count, offset + pageSize)
        struct Answer: Encodable {
            var signedTransactions: [String]
            var revision: String
            var hasMore: Bool
        }
        return .json(
            status: 200,
            Answer(
                signedTransactions: Array(list[offset..<end]),
                revision: Self.encodeToken("rev:\(transactionID):", end),
                hasMore: end < list.count
            )
        )
    }

    private func notificationHistory(_ request: HTTPRequest, now: Date) -> HTTPResponse {
        struct Body: Decodable {
            var startDate: Int64?
            var endDate: Int64?
            var notificationType: String?
            var transactionId: String?
        }
        let token = request.queryItems.first { $0.name == "paginationToken" }?.value
        state.withLock { $0.historyTokens.append(token) }
        guard let body = try? request.decodeJSON(Body.self) else {
            return FakeStore.appleError(status: 400, code: 4_000_000, message: "Bad request.")
        }
        guard let start = body.startDate else {
            return FakeStore.appleError(status: 400, code: 4_000_015, message: "Invalid start date.")
        }
        guard let end = body.endDate else {
            return FakeStore.appleError(status: 400, code: 4_000_016, message: "Invalid end date.")
        }
        guard start < end else {
            return FakeStore.appleError(
                status: 400,
                code: 4_000_013,
                message: "Start date is after end date, or the two are equal."
            )
        }
        // Production keeps 180 days (the sandbox 30; the fake is lenient like production).
        guard start >= AppStoreServerFake.millis(now.addingTimeInterval(-180 * 86_400)) else {
            return FakeStore.appleError(status: 400, code: 4_000_012, message: "Start date too far in past.")
        }
        if body.notificationType != nil, body.transactionId != nil {
            return FakeStore.appleError(status: 400, code: 4_000_019, message: "Multiple filters supplied.")
        }
        // A token names the request it continues: another window with an old token is refused.
        let prefix = "hist:\(start):\(end):"
        var offset = 0
        if let token {
            guard let decoded = Self.decodeToken(token, prefix: prefix) else {
                return FakeStore.appleError(status: 400, code: 4_000_014, message: "Invalid pagination token.")
            }
            offset = decoded
        }
        // An end date in the future means now, as Apple documents.
        let effectiveEnd = min(end, AppStoreServerFake.millis(now))
        let (records, pageSize) = state.withLock { state in
            (
                state.history.filter {
                    let sent = AppStoreServerFake.millis($0.sentAt)
                    return sent >= start && sent < effectiveEnd
                }.sorted { $0.sentAt < $1.sentAt },
                state.pageSize
            )
        }
        guard offset <= records.count else {
            return FakeStore.appleError(status: 400, code: 4_000_014, message: "Invalid pagination token.")
        }
        let last = min(records.count, offset + pageSize)
        struct Item: Encodable {
            var signedPayload: String
            var sendAttempts: [SendAttemptRecord]
        }
        struct Answer: Encodable {
            var notificationHistory: [Item]
            var hasMore: Bool
            var paginationToken: String?
        }
        let hasMore = last < records.count
        return .json(
            status: 200,
            Answer(
                notificationHistory: records[offset..<last].map {
                    Item(signedPayload: $0.signedPayload, sendAttempts: $0.sendAttempts)
                },
                hasMore: hasMore,
                paginationToken: hasMore ? Self.encodeToken(prefix, last) : nil
            )
        )
    }

    private func requestTest(now: Date) -> HTTPResponse {
        guard let target = state.withLock({ $0.notificationTarget }) else {
            return FakeStore.appleError(status: 404, code: 4_040_007, message: "No App Store Server Notification URL.")
        }
        let uuid = UUID().lowercasedText
        let token = "\(uuid)_\(AppStoreServerFake.millis(now))"
        let payload: [String: AnyEncodable] = [
            "notificationType": AnyEncodable("TEST"),
            "notificationUUID": AnyEncodable(uuid),
            "version": AnyEncodable("2.0"),
            "signedDate": AnyEncodable(AppStoreServerFake.millis(now)),
            "data": AnyEncodable(["bundleId": target.bundleID, "environment": target.environment]),
        ]
        let signed: String
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            signed = try target.signer(try encoder.encode(payload))
        } catch {
            return FakeStore.appleError(status: 500, code: 5_000_000, message: "An unknown error occurred.")
        }
        state.withLock { $0.tests[token] = (signed, []) }
        // Apple posts after answering; so does the fake.
        Task.detached { [self] in await self.post(signed, token: token, to: target.url) }
        return .json(status: 200, ["testNotificationToken": token])
    }

    private func post(_ signedPayload: String, token: String, to url: URL) async {
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try? JSONEncoder().encode(["signedPayload": signedPayload])
        let configuration = URLSessionConfiguration.ephemeral
        let session = URLSession(configuration: configuration)
        defer { session.finishTasksAndInvalidate() }
        var status: Int?
        var result = "NO_RESPONSE"
        if let (_, response) = try? await session.data(for: request), let http = response as? HTTPURLResponse {
            status = http.statusCode
            result = (200...206).contains(http.statusCode) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        }
        let attempt = SendAttemptRecord(attemptDate: AppStoreServerFake.millis(Date()), sendAttemptResult: result)
        state.withLock { state in
            state.tests[token]?.attempts.append(attempt)
            state.testResults[token] = status
            state.history.append(HistoryRecord(signedPayload: signedPayload, sentAt: Date(), sendAttempts: [attempt]))
        }
    }

    private func testStatus(_ token: String) -> HTTPResponse {
        guard token.utf8.count <= 512, let test = state.withLock({ $0.tests[token] }) else {
            return FakeStore.appleError(status: 404, code: 4_040_008, message: "Test notification not found.")
        }
        struct Answer: Encodable {
            var signedPayload: String
            var sendAttempts: [SendAttemptRecord]
        }
        return .json(status: 200, Answer(signedPayload: test.signedPayload, sendAttempts: test.attempts))
    }

    /// An opaque token: base64 of `prefix` and an offset (what it continues, and where).
    static func encodeToken(_ prefix: String, _ offset: Int) -> String {
        Data((prefix + String(offset)).utf8).base64EncodedString()
    }

    static func decodeToken(_ token: String, prefix: String) -> Int? {
        guard token.utf8.count <= 512, let data = Data(base64Encoded: token) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        guard text.hasPrefix(prefix), let offset = Int(text.dropFirst(prefix.count)), offset >= 0 else { return nil }
        return offset
    }
}

/// A JSON value of any encodable type, for the fake's hand-built payloads.
private struct AnyEncodable: Encodable, @unchecked Sendable {
    let encodeValue: (Encoder) throws -> Void
    init<T: Encodable>(_ value: T) { encodeValue = value.encode }
    func encode(to encoder: Encoder) throws { try encodeValue(encoder) }
}
