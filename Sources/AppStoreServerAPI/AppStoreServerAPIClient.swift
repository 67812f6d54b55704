import Foundation
import HTTPTransport
import JOSE

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Calls the App Store Server API: looks up a transaction by id.
///
/// Every request carries an ES256 JWT (reused until a minute before it expires). Rate limits
/// (429), server errors (5xx), timeouts and connection failures are retried with capped
/// exponential backoff and full jitter, honouring `Retry-After`, within the configuration's
/// attempts and total deadline; 400, 401, 403 and 404 are answered at once.
///
/// - Important: the token and the key are never logged or put in an error.
/// - Note: on Linux, URLSession is libcurl, which silently sends a request again on a fresh
///   connection when a reused keep-alive connection closes before any byte of the answer. That
///   second send is not counted in `attempts` (harmless here: the look-up is an idempotent GET).
public final class AppStoreServerAPIClient: Sendable {
    /// The clocks, sleep and randomness the retries use; the defaults are real. Tests inject a
    /// virtual clock and a sleep that returns at once.
    public struct Timing: Sendable {
        /// Wall-clock time, for the token's `iat` and `exp`.
        public var wallClock: @Sendable () -> Date
        /// Monotonic time, for the deadline.
        public var now: @Sendable () -> ContinuousClock.Instant
        /// Waits between attempts; throws when the task is cancelled.
        public var sleep: @Sendable (Duration) async throws -> Void
        /// A uniform draw from `0..<1`, for the jitter.
        public var random: @Sendable () -> Double

        public init(
            wallClock: @escaping @Sendable () -> Date,
            now: @escaping @Sendable () -> ContinuousClock.Instant,
            sleep: @escaping @Sendable (Duration) async throws -> Void,
            random: @escaping @Sendable () -> Double
        ) {
            self.wallClock = wallClock
            self.now = now
            self.sleep = sleep
            self.random = random
        }

        /// The system clocks, `Task.sleep` and the system random generator.
        public static let system = Timing(
            wallClock: { Date() },
            now: { ContinuousClock.now },
            sleep: { try await Task.sleep(for: $0) },
            random: { Double.random(in: 0..<1) }
        )
    }

    public let configuration: AppStoreServerAPIConfiguration
    // Internal, not private: the endpoints of other files (AppStoreServerAPIClient+*.swift) use them.
    let timing: Timing
    let tokens: BearerTokenProvider
    let transport: Transport

    /// - Parameters:
    ///   - configuration: where, as whom, and how patiently.
    ///   - timing: the real clocks and sleep unless a test injects its own.
    public init(configuration: AppStoreServerAPIConfiguration, timing: Timing = .system) {
        self.configuration = configuration
        self.timing = timing
        self.tokens = BearerTokenProvider(configuration: configuration, wallClock: timing.wallClock)
        self.transport = Transport(maxConnectionsPerHost: 8)
    }

    deinit { transport.invalidate() }

    /// Gets a transaction's signed information (Get Transaction Info:
    /// `GET /inApps/v1/transactions/{transactionId}`).
    /// - Parameter transactionID: the transaction's id (digits).
    /// - Returns: the `signedTransactionInfo` JWS, as Apple sent it (verify it before trusting it).
    /// - Throws: `AppStoreAPIError`; an id that is not all digits is refused without a request
    ///   (`invalid-transaction-id`, 0 attempts).
    public func signedTransactionInfo(transactionID: String) async throws(AppStoreAPIError) -> String {
        guard Self.isPlausibleTransactionID(transactionID) else {
            throw AppStoreAPIError(
                kind: .invalidTransactionID,
                reason: "the transaction id must be 1 to 64 ASCII digits; refused without asking the App Store",
                attempts: 0
            )
        }
        guard let url = URL(string: configuration.baseURL.absoluteString + "/inApps/v1/transactions/" + transactionID)
        else {
            throw AppStoreAPIError(kind: .invalidTransactionID, reason: "cannot build the request URL", attempts: 0)
        }
        let (body, attempts) = try await send(url)

        struct TransactionInfoResponse: Decodable { var signedTransactionInfo: String? }
        guard let decoded = try? JSONDecoder().decode(TransactionInfoResponse.self, from: body) else {
            throw AppStoreAPIError(
                kind: .malformedResponse,
                reason: "the 200 answer is not the expected JSON object (\(body.count) bytes)",
                httpStatus: 200,
                attempts: attempts
            )
        }
        guard let signed = decoded.signedTransactionInfo, CompactJWS.hasCompactShape(signed) else {
            throw AppStoreAPIError(
                kind: .malformedResponse,
                reason: decoded.signedTransactionInfo == nil
                    ? "the 200 answer has no signedTransactionInfo"
                    : "the 200 answer's signedTransactionInfo is not a compact JWS",
                httpStatus: 200,
                attempts: attempts
            )
        }
        return signed
    }

    /// Digits only, 1 to 64 of them.
    static func isPlausibleTransactionID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 64 && id.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    // MARK: - The retry loop

    /// Sends `method` to `url` (with a JSON `body` when given) until a success (its body and the
    /// attempts made) or a final error; `classify` judges each attempt's answer (an endpoint with
    /// its own success status or error codes passes its own).
    func send(
        _ url: URL,
        method: String = "GET",
        body: Data? = nil,
        classify: @Sendable (TransportOutcome, Int) -> AttemptVerdict<AppStoreAPIError> = {
            AppStoreServerAPIClient.classify($0, attempt: $1)
        }
    ) async throws(AppStoreAPIError) -> (Data, Int) {
        let clock = RetryClock(now: timing.now, sleep: timing.sleep, random: timing.random)
        let (body, attempts) = try await RetryLoop.run(schedule: schedule, clock: clock) {
            attempt,
            timeout throws(AppStoreAPIError) in
            let token: String
            do {
                token = try tokens.token()
            } catch {
                throw AppStoreAPIError(
                    kind: .unauthorized,
                    reason: "cannot sign the bearer token",
                    attempts: attempt - 1
                )
            }
            var request = URLRequest(url: url)
            request.httpMethod = method
            if let body {
                request.httpBody = body
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            request.setValue("astrosvitla-backend", forHTTPHeaderField: "User-Agent")
            let verdict = classify(await transport.send(request, timeout: timeout), attempt)
            if case .final(let error) = verdict, error.kind == .unauthorized { tokens.invalidate() }
            return verdict
        }
        return (body, attempts)
    }

    /// The retry policy and the request timeout, as `RetryLoop` takes them.
    var schedule: RetrySchedule {
        let policy = configuration.retryPolicy
        return RetrySchedule(
            maxAttempts: policy.maxAttempts,
            baseDelay: policy.baseDelay,
            maxDelay: policy.maxDelay,
            deadline: policy.deadline,
            requestTimeout: configuration.requestTimeout
        )
    }

    /// Full jitter: uniform in `0...min(maxDelay, baseDelay × 2^(attempt-1))`.
    func backoff(afterAttempt attempt: Int) -> Duration {
        schedule.backoff.delay(afterAttempt: attempt, random: timing.random())
    }

    static func classify(_ outcome: TransportOutcome, attempt: Int) -> AttemptVerdict<AppStoreAPIError> {
        switch outcome {
        case .cancelled:
            return .retryable(AppStoreAPIError(kind: .cancelled, reason: "the call was cancelled", attempts: attempt))
        case .timedOut:
            return .retryable(
                AppStoreAPIError(kind: .timeout, reason: "no answer within the request timeout", attempts: attempt)
            )
        case .failed(let code, let summary):
            return .retryable(
                AppStoreAPIError(kind: .network, reason: "\(summary) (URLError \(code))", attempts: attempt)
            )
        case .response(let status, let headers, let body):
            if status == 200 { return .success(body) }
            let apple = AppleErrorBody.parse(body)
            let retryAfter = headers["Retry-After"].flatMap(parseRetryAfter)
            func error(_ kind: AppStoreAPIError.Kind, _ reason: String) -> AppStoreAPIError {
                AppStoreAPIError(
                    kind: kind,
                    reason: reason,
                    httpStatus: status,
                    errorCode: apple?.errorCode,
                    errorMessage: apple?.errorMessage,
                    attempts: attempt,
                    retryAfter: retryAfter
                )
            }
            switch status {
            case 400:
                return .final(error(.invalidTransactionID, "the App Store refused the transaction id"))
            case 401:
                return .final(
                    error(
                        .unauthorized,
                        "the App Store refused the bearer token (check key id, issuer id, bundle id and key)"
                    )
                )
            case 403:
                return .final(error(.unauthorized, "the App Store denied access with this key"))
            case 404:
                return .final(error(.transactionNotFound, "the App Store has no transaction with this id"))
            case 429:
                return .retryable(error(.rateLimited, "the App Store's rate limit was exceeded"))
            case 500...599:
                return .retryable(error(.serverError, "the App Store answered with a server error"))
            default:
                return .final(error(.malformedResponse, "unexpected HTTP status \(status)"))
            }
        }
    }

    /// `Retry-After` in seconds (the HTTP-date form is not used by this API and is ignored).
    static func parseRetryAfter(_ text: String) -> Duration? {
        guard let seconds = Int(text.trimmingCharacters(in: .whitespaces)), seconds >= 0 else { return nil }
        return .seconds(min(seconds, 3_600))
    }
}

/// Apple's error body: `{"errorCode": 4040010, "errorMessage": "Transaction id not found."}`.
struct AppleErrorBody: Decodable, Sendable {
    var errorCode: Int?
    var errorMessage: String?

    static func parse(_ body: Data) -> AppleErrorBody? {
        guard !body.isEmpty, let parsed = try? JSONDecoder().decode(AppleErrorBody.self, from: body),
            parsed.errorCode != nil || parsed.errorMessage != nil
        else { return nil }
        return parsed
    }
}

extension AppStoreAPIError: RetriedFailure {
    public var isCancellation: Bool { kind == .cancelled }

    public var isExchangeTimeout: Bool { kind == .timeout }

    public func cancelledWhileWaiting(attempts: Int) -> AppStoreAPIError {
        AppStoreAPIError(
            kind: .cancelled,
            reason: "cancelled while waiting to retry; last: \(reason)",
            httpStatus: httpStatus,
            errorCode: errorCode,
            errorMessage: errorMessage,
            attempts: attempts,
            retryAfter: retryAfter
        )
    }

    public func deadlineExceeded(deadline: Duration, attempts: Int) -> AppStoreAPIError {
        AppStoreAPIError(
            kind: .deadlineExceeded,
            reason: "gave up within the \(deadline) deadline; last: \(reason)",
            httpStatus: httpStatus,
            errorCode: errorCode,
            errorMessage: errorMessage,
            attempts: attempts,
            retryAfter: retryAfter
        )
    }
}
