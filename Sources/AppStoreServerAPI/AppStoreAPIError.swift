/// Why an App Store Server API call failed.
///
/// `code` is a stable string callers switch on; `isTransient` says whether the same call later
/// (a retry of the whole job) may succeed. `description` is one line without the token, key or
/// signed data; `debugDescription` adds where the error was raised.
public struct AppStoreAPIError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kinds of failure; `rawValue` is the stable `code`.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// 404: the App Store has no such transaction (Apple's `4040010 TransactionIdNotFoundError`).
        case transactionNotFound = "transaction-not-found"
        /// The id is not a transaction id: refused locally (no request made) or by Apple with 400
        /// (`4000006 InvalidTransactionIdError`).
        case invalidTransactionID = "invalid-transaction-id"
        /// 401 or 403: the token was refused (wrong key, key id, issuer id or bundle id, or a revoked key).
        case unauthorized = "unauthorized"
        /// 429 (`4290000 RateLimitExceededError`) on every attempt.
        case rateLimited = "rate-limited"
        /// 5xx (`5000000 GeneralInternalError`, `5000001 GeneralInternalRetryableError`) on every attempt.
        case serverError = "server-error"
        /// No answer within the request timeout on every attempt.
        case timeout = "timeout"
        /// The connection failed (refused, reset, closed without a response, DNS, TLS).
        case network = "network"
        /// An answer this client cannot read: not JSON, no `signedTransactionInfo`, or an unexpected status.
        case malformedResponse = "malformed-response"
        /// The total deadline passed before an attempt succeeded.
        case deadlineExceeded = "deadline-exceeded"
        /// The calling task was cancelled (e.g. the worker is shutting down).
        case cancelled = "cancelled"
        /// 404 for something other than a transaction id: an order, a test notification token,
        /// or no notification URL configured (Apple's `40400xx` codes).
        case notFound = "not-found"
        /// 400 for a request other than a transaction id: a body the App Store refused (e.g. Send
        /// Consumption Information's `4000035 InvalidCustomerConsentedError`), dates, a pagination
        /// token, a revision; `errorCode` says which.
        case invalidRequest = "invalid-request"

        /// Whether a later retry of the whole call may succeed.
        public var isTransient: Bool {
            switch self {
            case .rateLimited, .serverError, .timeout, .network, .deadlineExceeded, .cancelled: return true
            case .transactionNotFound, .invalidTransactionID, .unauthorized, .malformedResponse, .notFound,
                .invalidRequest:
                return false
            }
        }
    }

    public var kind: Kind
    /// What went wrong, in words (never a token, key or signed payload).
    public var reason: String
    /// The HTTP status of the last response, if there was one.
    public var httpStatus: Int?
    /// Apple's `errorCode` from the last response body, when it had one (e.g. `4040010`).
    public var errorCode: Int?
    /// Apple's `errorMessage` from the last response body, when it had one.
    public var errorMessage: String?
    /// Requests sent (0 when the call was refused before any request).
    public var attempts: Int
    /// The server's `Retry-After` on the last response, when it sent one.
    public var retryAfter: Duration?
    public var file: String
    public var line: Int

    public init(
        kind: Kind,
        reason: String,
        httpStatus: Int? = nil,
        errorCode: Int? = nil,
        errorMessage: String? = nil,
        attempts: Int,
        retryAfter: Duration? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.kind = kind
        self.reason = reason
        self.httpStatus = httpStatus
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.attempts = attempts
        self.retryAfter = retryAfter
        self.file = file
        self.line = line
    }

    /// The stable code, e.g. `transaction-not-found`.
    public var code: String { kind.rawValue }

    /// Whether a later retry of the whole call may succeed (rate limits, outages, timeouts,
    /// network failures, a passed deadline, cancellation).
    public var isTransient: Bool { kind.isTransient }

    public var description: String {
        var details: [String] = []
        if let httpStatus { details.append("HTTP \(httpStatus)") }
        if let errorCode {
            var apple = "Apple error \(errorCode)"
            if let errorMessage, !errorMessage.isEmpty { apple += " \(Self.oneLine(errorMessage).debugDescription)" }
            details.append(apple)
        }
        if let retryAfter { details.append("Retry-After \(retryAfter.components.seconds) s") }
        details.append(attempts == 1 ? "1 attempt" : "\(attempts) attempts")
        return "App Store Server API: \(Self.oneLine(reason)) (\(details.joined(separator: ", ")))"
    }

    public var debugDescription: String { "\(code): \(description) [\(file):\(line)]" }

    private static func oneLine(_ text: String) -> String {
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return flat.count > 300 ? String(flat.prefix(300)) + "…" : flat
    }
}
