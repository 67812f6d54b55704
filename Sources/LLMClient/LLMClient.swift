import Foundation
import HTTPTransport
import RetryBackoff

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Calls an OpenAI-compatible chat-completions API (`POST {baseURL}/chat/completions`).
///
/// Calls are async and never block a thread; one client carries many at once (up to 64
/// connections to the host). Rate limits (429), conflicts (409), request timeouts (408), server
/// errors (5xx), timeouts and connection failures are retried with capped exponential backoff and
/// full jitter, honouring `Retry-After`, within the configuration's attempts and total deadline;
/// 400, 401, 403, 404, 422 (and a 429 `insufficient_quota`) are answered at once.
///
/// - Important: the key is never logged or put in an error; an API message that echoes it is
///   scrubbed.
/// - Note: on Linux, URLSession is libcurl, which silently sends a request again on a fresh
///   connection when a reused keep-alive connection closes before any byte of the answer. That
///   second send is not counted in `attempts` (at worst it costs one more completion).
public final class LLMClient: Sendable {
    /// The largest token count of one answer taken from `usage`; larger or negative ones are
    /// treated as unreported (estimated instead).
    public static let maximumReportedTokens = 10_000_000

    /// The clock, sleep and randomness the retries use (`RetryClock`, shared with the App Store
    /// client); the defaults are real. Tests inject a virtual clock and a sleep that returns at once.
    public typealias Timing = RetryClock

    public let configuration: LLMConfiguration
    private let sender: RetryingSender
    private let endpoint: URL

    /// - Parameters:
    ///   - configuration: where, which model, which key, and how patiently.
    ///   - timing: the real clock and sleep unless a test injects its own.
    public init(configuration: LLMConfiguration, timing: Timing = .system) {
        self.configuration = configuration
        self.sender = RetryingSender(configuration: configuration, timing: timing)
        self.endpoint = configuration.baseURL.appendingPathComponent("chat").appendingPathComponent("completions")
    }

    deinit { sender.transport.invalidate() }

    /// Asks the configured model for a chat completion.
    /// - Returns: the first choice's text, its finish reason (`length` means `max_tokens` cut it
    ///   off: the caller decides what to do), the usage and the attempts made.
    /// - Throws: `LLMError`; a request without messages is refused without asking (`bad-request`,
    ///   0 attempts).
    public func complete(_ request: ChatCompletionRequest) async throws(LLMError) -> ChatCompletion {
        guard !request.messages.isEmpty else {
            throw LLMError(kind: .badRequest, reason: "a chat completion needs at least one message", attempts: 0)
        }
        let body: Data
        do {
            body = try Self.encoder.encode(
                RequestBody(
                    model: configuration.model,
                    messages: request.messages,
                    maxTokens: request.maxTokens,
                    temperature: request.temperature
                )
            )
        } catch {
            throw LLMError(
                kind: .badRequest,
                reason: "cannot encode the request as JSON (a temperature that is not a finite number?)",
                attempts: 0
            )
        }
        let (answer, attempts) = try await sender.post(body, to: endpoint, contentType: "application/json")
        return try Self.parseCompletion(answer, attempts: attempts, redact: configuration.redactingKey)
    }

    // MARK: - The request

    private struct RequestBody: Encodable {
        var model: String
        var messages: [ChatMessage]
        var maxTokens: Int?
        var temperature: Double?

        enum CodingKeys: String, CodingKey {
            case model
            case messages
            case maxTokens = "max_tokens"
            case temperature
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Full jitter: uniform in `0...min(maxDelay, baseDelay × 2^(attempt-1))`.
    func backoff(afterAttempt attempt: Int) -> Duration { sender.backoff(afterAttempt: attempt) }

    private struct ResponseBody: Decodable {
        struct Choice: Decodable {
            struct Message: Decodable {
                var content: String?
            }

            var message: Message?
            var finishReason: String?

            enum CodingKeys: String, CodingKey {
                case message
                case finishReason = "finish_reason"
            }
        }

        /// Read leniently: a usage figure of the wrong type is left out rather than failing the answer.
        struct Usage: Decodable {
            var promptTokens: Int?
            var completionTokens: Int?
            var totalTokens: Int?

            enum CodingKeys: String, CodingKey {
                case promptTokens = "prompt_tokens"
                case completionTokens = "completion_tokens"
                case totalTokens = "total_tokens"
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                // Counts from the endpoint are outside input: a negative or absurd number (they
                // are summed over attempts and stored in integer columns) counts as unreported.
                let range = 0...LLMClient.maximumReportedTokens
                promptTokens = (try? container.decodeIfPresent(Int.self, forKey: .promptTokens)).flatMap { $0 }
                    .flatMap { range.contains($0) ? $0 : nil }
                completionTokens = (try? container.decodeIfPresent(Int.self, forKey: .completionTokens)).flatMap { $0 }
                    .flatMap { range.contains($0) ? $0 : nil }
                totalTokens = try? container.decodeIfPresent(Int.self, forKey: .totalTokens)
            }
        }

        var model: String?
        var choices: [Choice]?
        var usage: Usage?
    }

    /// Reads a 2xx answer; anything but a chat completion with a first choice is malformed.
    static func parseCompletion(
        _ body: Data,
        attempts: Int,
        redact: (String) -> String
    ) throws(LLMError) -> ChatCompletion {
        func malformed(_ reason: String) -> LLMError {
            LLMError.malformedAnswer(body, reason: reason, attempts: attempts, redact: redact)
        }
        guard let decoded = try? JSONDecoder().decode(ResponseBody.self, from: body) else {
            throw malformed("the answer is not a chat completion in JSON (\(body.count) bytes)")
        }
        guard let choice = decoded.choices?.first, let message = choice.message else {
            throw malformed("the answer has no choices[0].message")
        }
        guard message.content != nil || choice.finishReason != nil else {
            throw malformed("the answer's first choice has neither content nor a finish_reason")
        }
        return ChatCompletion(
            content: message.content ?? "",
            finishReason: choice.finishReason,
            model: decoded.model,
            promptTokens: decoded.usage?.promptTokens,
            completionTokens: decoded.usage?.completionTokens,
            totalTokens: decoded.usage?.totalTokens,
            attempts: attempts
        )
    }

    /// `Retry-After` in seconds (fractions allowed; the HTTP-date form is ignored), at most an hour.
    static func parseRetryAfter(_ text: String) -> Duration? {
        guard let seconds = Double(text.trimmingCharacters(in: .whitespaces)), seconds.isFinite, seconds >= 0
        else { return nil }
        return .seconds(double: min(seconds, 3_600))
    }

    /// OpenAI's `retry-after-ms`, at most an hour.
    static func parseRetryAfterMilliseconds(_ text: String) -> Duration? {
        guard let milliseconds = Double(text.trimmingCharacters(in: .whitespaces)), milliseconds.isFinite,
            milliseconds >= 0
        else { return nil }
        return .seconds(double: min(milliseconds / 1_000, 3_600))
    }
}

/// What `RetryingSender` takes from a client's configuration (chat or images).
protocol SenderConfiguration: Sendable {
    /// The `Authorization` header's value.
    var authorization: String { get }
    var retryPolicy: LLMConfiguration.RetryPolicy { get }
    var requestTimeout: Duration { get }
    /// `text` with the key scrubbed.
    func redactingKey(_ text: String) -> String
}

extension LLMConfiguration: SenderConfiguration {}
extension ImageConfiguration: SenderConfiguration {}

extension RetryingSender {
    /// A sender for `configuration` on a transport of its own. Answers take seconds, and many
    /// calls wait on one client at once, so it keeps up to 64 connections per host.
    init(configuration: some SenderConfiguration, timing: LLMClient.Timing) {
        self.init(
            transport: Transport(maxConnectionsPerHost: 64),
            timing: timing,
            retryPolicy: configuration.retryPolicy,
            requestTimeout: configuration.requestTimeout,
            authorization: configuration.authorization,
            redact: { configuration.redactingKey($0) }
        )
    }
}

/// The retry loop of the OpenAI-compatible clients (chat and images): POSTs a body with the
/// bearer key until a 2xx or a final error, retrying by the rules `LLMClient` documents.
struct RetryingSender: Sendable {
    let transport: Transport
    let timing: LLMClient.Timing
    let retryPolicy: LLMConfiguration.RetryPolicy
    /// One attempt's timeout (the deadline may cut the last one short).
    let requestTimeout: Duration
    /// The `Authorization` header's value.
    let authorization: String
    /// Scrubs the key from API messages that echo it.
    let redact: @Sendable (String) -> String

    /// POSTs `body` to `endpoint` until a 2xx (its body and the attempts made) or a final error.
    func post(_ body: Data, to endpoint: URL, contentType: String) async throws(LLMError) -> (Data, Int) {
        let (answer, attempts) = try await RetryLoop.run(schedule: schedule, clock: timing) {
            attempt,
            timeout throws(LLMError) in
            var request = URLRequest(url: endpoint)
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue(authorization, forHTTPHeaderField: "Authorization")
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            request.setValue("astrosvitla-backend", forHTTPHeaderField: "User-Agent")
            return Self.classify(await transport.send(request, timeout: timeout), attempt: attempt, redact: redact)
        }
        return (answer, attempts)
    }

    /// The retry policy (forced into usable ranges) and the request timeout, as `RetryLoop` takes them.
    var schedule: RetrySchedule {
        let policy = retryPolicy.normalized
        return RetrySchedule(
            maxAttempts: policy.maxAttempts,
            baseDelay: policy.baseDelay,
            maxDelay: policy.maxDelay,
            deadline: policy.deadline,
            requestTimeout: requestTimeout
        )
    }

    /// Full jitter: uniform in `0...min(maxDelay, baseDelay × 2^(attempt-1))`.
    func backoff(afterAttempt attempt: Int) -> Duration {
        schedule.backoff.delay(afterAttempt: attempt, random: timing.random())
    }

    // MARK: - Classifying answers

    private static func classify(
        _ outcome: TransportOutcome,
        attempt: Int,
        redact: (String) -> String
    ) -> AttemptVerdict<LLMError> {
        switch outcome {
        case .cancelled:
            return .retryable(LLMError(kind: .cancelled, reason: "the call was cancelled", attempts: attempt))
        case .timedOut:
            return .retryable(
                LLMError(kind: .timeout, reason: "no answer within the request timeout", attempts: attempt)
            )
        case .failed(let code, let summary):
            return .retryable(LLMError(kind: .network, reason: "\(summary) (URLError \(code))", attempts: attempt))
        case .response(let status, let headers, let body):
            if (200...299).contains(status) { return .success(body) }
            let api = APIErrorBody.parse(body, redact: redact)
            let retryAfter =
                headers["retry-after-ms"].flatMap(LLMClient.parseRetryAfterMilliseconds)
                ?? headers["Retry-After"].flatMap(LLMClient.parseRetryAfter)
            func error(_ kind: LLMError.Kind, _ reason: String, isTransient: Bool? = nil) -> LLMError {
                LLMError(
                    kind: kind,
                    reason: reason,
                    httpStatus: status,
                    errorMessage: api?.message,
                    errorType: api?.type,
                    errorCode: api?.code,
                    attempts: attempt,
                    retryAfter: retryAfter,
                    isTransient: isTransient
                )
            }
            switch status {
            case 401:
                return .final(error(.unauthorized, "the API refused the key"))
            case 403:
                return .final(error(.unauthorized, "the API denied access with this key"))
            case 408:
                return .retryable(error(.timeout, "the server timed out waiting for the request"))
            case 409:
                return .retryable(error(.serverError, "the API reported a conflict"))
            case 429 where api?.code == "insufficient_quota":
                return .final(
                    error(
                        .rateLimited,
                        "the account's quota is used up (check the plan and billing)",
                        isTransient: false
                    )
                )
            case 429:
                return .retryable(error(.rateLimited, "the API's rate limit was exceeded"))
            case 400...499:
                return .final(error(.badRequest, "the API refused the request"))
            case 500...599:
                return .retryable(error(.serverError, "the API answered with a server error"))
            default:
                return .final(error(.malformedResponse, "unexpected HTTP status \(status)"))
            }
        }
    }
}

/// The API's error body: `{"error": {"message": …, "type": …, "param": …, "code": …}}` (OpenAI;
/// `code` may be a string, a number or null), or the same fields at the top level (some
/// compatible servers), or `{"error": "text"}`.
struct APIErrorBody: Sendable, Hashable {
    var message: String?
    var type: String?
    var code: String?

    static func parse(_ body: Data, redact: (String) -> String) -> APIErrorBody? {
        guard !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return nil
        }
        func text(_ value: Any?) -> String? {
            switch value {
            case let string as String: return string
            case let number as NSNumber: return number.stringValue
            default: return nil
            }
        }
        let fields: [String: Any]
        if let nested = object["error"] as? [String: Any] {
            fields = nested
        } else if let message = object["error"] as? String {
            fields = ["message": message]
        } else {
            fields = object
        }
        let parsed = APIErrorBody(
            message: text(fields["message"]).map(redact),
            type: text(fields["type"]).map(redact),
            code: text(fields["code"]).map(redact)
        )
        guard parsed.message != nil || parsed.type != nil || parsed.code != nil else { return nil }
        return parsed
    }
}

extension LLMError: RetriedFailure {
    public var isCancellation: Bool { kind == .cancelled }

    public var isExchangeTimeout: Bool { kind == .timeout && httpStatus == nil }

    public func cancelledWhileWaiting(attempts: Int) -> LLMError {
        var cancelled = self
        cancelled.kind = .cancelled
        cancelled.isTransient = true
        cancelled.reason = "cancelled while waiting to retry; last: \(reason)"
        return cancelled
    }

    public func deadlineExceeded(deadline: Duration, attempts: Int) -> LLMError {
        var error = self
        error.kind = .deadlineExceeded
        error.isTransient = true
        error.attempts = attempts
        error.reason = "gave up within the \(deadline) deadline; last: \(reason)"
        return error
    }

    /// A 2xx answer this client cannot read, with the API's error fields if the body has them.
    static func malformedAnswer(
        _ body: Data,
        reason: String,
        attempts: Int,
        redact: (String) -> String
    ) -> LLMError {
        let api = APIErrorBody.parse(body, redact: redact)
        return LLMError(
            kind: .malformedResponse,
            reason: reason,
            httpStatus: 200,
            errorMessage: api?.message,
            errorType: api?.type,
            errorCode: api?.code,
            attempts: attempts
        )
    }
}
