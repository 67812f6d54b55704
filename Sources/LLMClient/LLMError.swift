import Foundation
import HTTPTransport
import RetryBackoff

/// Why a chat completion failed.
///
/// `code` is a stable string callers switch on; `isTransient` says whether the same call later
/// (a retry of the whole job) may succeed. `description` is one line without the API key;
/// `debugDescription` adds where the error was raised.
public struct LLMError: Error, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The kinds of failure; `rawValue` is the stable `code`.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// 401 or 403: the key was refused (wrong, revoked, or without access to the model or region).
        case unauthorized = "unauthorized"
        /// 400, 404, 422 or another 4xx that a retry cannot fix: the request itself is wrong (unknown
        /// model, context too long, invalid parameter).
        case badRequest = "bad-request"
        /// 429 on every attempt (or a 429 `insufficient_quota`, which is not retried and not transient).
        case rateLimited = "rate-limited"
        /// 5xx or 409 on every attempt.
        case serverError = "server-error"
        /// No answer within the request timeout (or a 408) on every attempt.
        case timeout = "timeout"
        /// The connection failed (refused, reset, closed without a response, DNS, TLS).
        case network = "network"
        /// An answer this client cannot read: not JSON, no `choices`, or an unexpected status.
        case malformedResponse = "malformed-response"
        /// The total deadline passed before an attempt succeeded.
        case deadlineExceeded = "deadline-exceeded"
        /// The calling task was cancelled (e.g. the worker is shutting down).
        case cancelled = "cancelled"

        /// Whether a later retry of the whole call may succeed.
        public var isTransient: Bool {
            switch self {
            case .rateLimited, .serverError, .timeout, .network, .deadlineExceeded, .cancelled: return true
            case .unauthorized, .badRequest, .malformedResponse: return false
            }
        }
    }

    public var kind: Kind
    /// What went wrong, in words (never the key).
    public var reason: String
    /// The HTTP status of the last response, if there was one.
    public var httpStatus: Int?
    /// `error.message` of the last response body, when it had one (anything resembling the key
    /// is replaced by `<redacted>`).
    public var errorMessage: String?
    /// `error.type` of the last response body, e.g. `invalid_request_error`.
    public var errorType: String?
    /// `error.code` of the last response body, e.g. `invalid_api_key`, `rate_limit_exceeded`.
    public var errorCode: String?
    /// Requests sent (0 when the call was refused before any request).
    public var attempts: Int
    /// The server's `Retry-After` on the last response, when it sent one.
    public var retryAfter: Duration?
    /// Whether a later retry of the whole call may succeed; the kind's `isTransient` unless the
    /// API said otherwise (a 429 `insufficient_quota` is a billing problem, not a rate limit).
    public var isTransient: Bool
    public var file: String
    public var line: Int

    public init(
        kind: Kind,
        reason: String,
        httpStatus: Int? = nil,
        errorMessage: String? = nil,
        errorType: String? = nil,
        errorCode: String? = nil,
        attempts: Int,
        retryAfter: Duration? = nil,
        isTransient: Bool? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.kind = kind
        self.reason = reason
        self.httpStatus = httpStatus
        self.errorMessage = errorMessage
        self.errorType = errorType
        self.errorCode = errorCode
        self.attempts = attempts
        self.retryAfter = retryAfter
        self.isTransient = isTransient ?? kind.isTransient
        self.file = file
        self.line = line
    }

    /// The stable code, e.g. `rate-limited`.
    public var code: String { kind.rawValue }

    public var description: String {
        var details: [String] = []
        if let httpStatus { details.append("HTTP \(httpStatus)") }
        if errorCode != nil || errorType != nil || errorMessage != nil {
            var api = "API error"
            if let code = errorCode ?? errorType { api += " \(Self.oneLine(code))" }
            if let errorMessage, !errorMessage.isEmpty { api += " \(Self.quoted(Self.oneLine(errorMessage)))" }
            details.append(api)
        }
        if let retryAfter { details.append("Retry-After \(Self.seconds(retryAfter)) s") }
        details.append(attempts == 1 ? "1 attempt" : "\(attempts) attempts")
        return "LLM API: \(Self.oneLine(reason)) (\(details.joined(separator: ", ")))"
    }

    public var debugDescription: String { "\(code): \(description) [\(file):\(line)]" }

    static func oneLine(_ text: String) -> String {
        let flat = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return flat.count > 300 ? String(flat.prefix(300)) + "…" : flat
    }

    /// `text` in double quotes, with `"` and `\` escaped (and nothing else, unlike `debugDescription`).
    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    private static func seconds(_ duration: Duration) -> String {
        let value = duration.seconds
        return value == value.rounded() ? String(Int(value)) : String((value * 1_000).rounded() / 1_000)
    }
}
