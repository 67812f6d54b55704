import Foundation
import LLMClient
import LoopbackHTTP
import Synchronization

/// A local OpenAI-compatible chat-completions API on 127.0.0.1 that behaves like OpenAI's, errors
/// included.
///
/// Every request must carry `Authorization: Bearer <apiKey>` (else 401 `invalid_api_key`, as
/// OpenAI answers). `POST /v1/chat/completions` with a well-formed body (a `model`, at least one
/// message) is answered by the next scripted response queued with `enqueue(_:count:)`, else by a
/// success whose content is the default responder's text for the messages. Any other path or
/// method is 404 `Invalid URL (…)`; a body that is not a valid request is 400
/// `invalid_request_error` (neither uses up a scripted response).
///
/// Successes report usage estimated as OpenAI's tokenizer roughly counts: a token per four
/// characters of the prompt's message contents and of the answer (`estimatedTokens(_:)`).
public final class OpenAIFake: Sendable {
    /// A scripted answer, used up by one request.
    public enum Scripted: Sendable, Hashable {
        /// 200 with `content` and `finish_reason` (`stop` unless told).
        case success(content: String, finishReason: String = "stop")
        /// 429 `rate_limit_exceeded`, with `Retry-After: n` when given.
        case rateLimited(retryAfter: Int?)
        /// `status` (500 unless told) with OpenAI's `server_error` body.
        case serverError(status: Int = 500)
        /// 401 `invalid_api_key`, whatever key the request carried.
        case unauthorized
        /// 400 `invalid_request_error` with `message`.
        case badRequest(message: String)
        /// 200 whose body is not valid JSON.
        case malformedJSON
        /// 200 with `content` and `finish_reason: "length"` (the answer hit `max_tokens`).
        case truncated(content: String)
        /// Never answers; the connection stays open until the client gives up or the fake stops.
        case hang
        /// 200 with `content`, after `seconds`.
        case delayed(seconds: Double, content: String)
        /// Any other OpenAI error: `status` with `{"error": {"message", "type", "param": null, "code"}}`
        /// (e.g. 404 `model_not_found`, 429 `insufficient_quota`, 503 overloaded).
        case apiError(status: Int, message: String, type: String, code: String?)
    }

    /// The key requests must carry.
    public let apiKey: String
    private let server: LoopbackHTTPServer
    private let store: FakeStore

    /// Starts the fake on a free loopback port.
    /// - Parameters:
    ///   - apiKey: the key requests must carry as `Authorization: Bearer <apiKey>`.
    ///   - defaultResponder: the answer to a request when nothing is scripted, built from its
    ///     messages; by default a short text quoting the last message.
    ///   - defaultDelay: how long an unscripted answer takes (a model's generation time), zero by
    ///     default; requests wait concurrently, as they do at a real endpoint.
    /// - Throws: `LoopbackHTTPError` when no port can be bound.
    public init(
        apiKey: String = "sk-fake-0123456789abcdef",
        defaultResponder: @escaping @Sendable ([ChatMessage]) -> String = OpenAIFake.echo,
        defaultDelay: Duration = .zero
    ) throws(LoopbackHTTPError) {
        self.apiKey = apiKey
        let store = FakeStore(apiKey: apiKey, defaultResponder: defaultResponder, defaultDelay: defaultDelay)
        self.store = store
        // The handler holds the store, not the fake, so releasing the fake stops the server.
        self.server = try LoopbackHTTPServer(name: "openai-fake") { request in
            await store.handle(request)
        }
    }

    /// The default responder: `Fake answer to: <the last message's content>`.
    public static let echo: @Sendable ([ChatMessage]) -> String = { messages in
        "Fake answer to: \(messages.last?.content ?? "")"
    }

    /// OpenAI's rough rule: a token per four characters (rounded up; at least 1 for non-empty text).
    public static func estimatedTokens(_ text: String) -> Int { (text.count + 3) / 4 }

    /// The `prompt_tokens` the fake reports for `messages`: the estimate of their contents together.
    public static func estimatedPromptTokens(_ messages: [ChatMessage]) -> Int {
        estimatedTokens(messages.map(\.content).joined())
    }

    /// `http://127.0.0.1:<port>/v1`, to use as the client's base URL.
    public var baseURL: URL { server.baseURL.appendingPathComponent("v1") }

    /// The fake's port on 127.0.0.1.
    public var port: Int { server.port }

    /// Queues `response` `count` times for the next well-formed, authorized completion requests
    /// (scripted responses are used in the order queued).
    public func enqueue(_ response: Scripted, count: Int = 1) {
        store.state.withLock { $0.scripted.append(contentsOf: repeatElement(response, count: max(0, count))) }
    }

    /// Scripted responses queued and not yet used.
    public var pendingScripted: [Scripted] { store.state.withLock { $0.scripted } }

    /// Requests received, refused ones included.
    public var requestCount: Int { store.state.withLock { $0.traffic.requestCount } }

    /// Requests refused with 401 because of the key (scripted `.unauthorized` ones not included).
    public var unauthorizedCount: Int { store.state.withLock { $0.traffic.unauthorizedCount } }

    /// The messages of the last well-formed completion request (empty before one).
    public var lastRequestMessages: [ChatMessage] { store.state.withLock { $0.lastRequest?.messages ?? [] } }

    /// The `model` of the last well-formed completion request.
    public var lastRequestModel: String? { store.state.withLock { $0.lastRequest?.model } }

    /// The `max_tokens` of the last well-formed completion request, when it had one.
    public var lastRequestMaxTokens: Int? { store.state.withLock { $0.lastRequest?.maxTokens } }

    /// The `temperature` of the last well-formed completion request, when it had one.
    public var lastRequestTemperature: Double? { store.state.withLock { $0.lastRequest?.temperature } }

    /// The last request's body as sent (any path).
    public var lastRequestBody: Data? { store.state.withLock { $0.traffic.lastBody } }

    /// The last request's `Authorization` header as sent.
    public var lastAuthorizationHeader: String? { store.state.withLock { $0.traffic.lastAuthorization } }

    /// The most requests being handled at the same moment since the start (a delayed answer is
    /// being handled until it is sent).
    public var maxConcurrentRequests: Int { store.state.withLock { $0.traffic.maxInFlight } }

    /// Stops serving: open connections are closed and hanging or delayed requests end.
    public func stop() { server.stop() }
}

/// A completion request as the fake read it.
struct CompletionRequest: Decodable, Sendable {
    var model: String?
    var messages: [ChatMessage]?
    var maxTokens: Int?
    var temperature: Double?

    enum CodingKeys: String, CodingKey {
        case model
        case messages
        case maxTokens = "max_tokens"
        case temperature
    }
}

/// The fake's state, shared by the fake and its server's handler.
private final class FakeStore: Sendable {
    struct Recorded {
        var model: String
        var messages: [ChatMessage]
        var maxTokens: Int?
        var temperature: Double?
    }

    struct State {
        var scripted: [OpenAIFake.Scripted] = []
        var traffic = TrafficCounters()
        var lastRequest: Recorded?
        var nextID = 0
    }

    let state = Mutex(State())
    let apiKey: String
    let defaultResponder: @Sendable ([ChatMessage]) -> String
    let defaultDelay: Duration

    init(apiKey: String, defaultResponder: @escaping @Sendable ([ChatMessage]) -> String, defaultDelay: Duration) {
        self.apiKey = apiKey
        self.defaultResponder = defaultResponder
        self.defaultDelay = defaultDelay
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let authorized = state.withLock { $0.traffic.begin(request, apiKey: apiKey) }
        defer { state.withLock { $0.traffic.end() } }

        guard authorized else { return OpenAIErrorResponse.invalidAPIKey }
        guard request.path == "/v1/chat/completions", request.method == "POST" else {
            return OpenAIErrorResponse.invalidURL(request)
        }
        let parsed: Recorded
        switch Self.validate(request.body) {
        case .failure(let refusal): return refusal.response
        case .success(let recorded): parsed = recorded
        }
        let (scripted, id) = state.withLock { state -> (OpenAIFake.Scripted?, Int) in
            state.lastRequest = parsed
            state.nextID += 1
            return (state.scripted.isEmpty ? nil : state.scripted.removeFirst(), state.nextID)
        }
        guard let scripted else {
            if defaultDelay > .zero { try? await Task.sleep(for: defaultDelay) }
            return success(parsed, content: defaultResponder(parsed.messages), finishReason: "stop", id: id)
        }
        switch scripted {
        case .success(let content, let finishReason):
            return success(parsed, content: content, finishReason: finishReason, id: id)
        case .truncated(let content):
            return success(parsed, content: content, finishReason: "length", id: id)
        case .delayed(let seconds, let content):
            // Cancelled (and so answered at once, to nobody) when the server stops.
            try? await Task.sleep(for: .milliseconds(Int64((max(0, seconds) * 1_000).rounded())))
            return success(parsed, content: content, finishReason: "stop", id: id)
        case .rateLimited(let retryAfter):
            return OpenAIErrorResponse.rateLimited(model: parsed.model, retryAfter: retryAfter)
        case .serverError(let status):
            return OpenAIErrorResponse.serverError(status: status)
        case .unauthorized:
            return OpenAIErrorResponse.invalidAPIKey
        case .badRequest(let message):
            return OpenAIErrorResponse.invalidRequest(message)
        case .malformedJSON:
            return .json(status: 200, text: #"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"mess"#)
        case .hang:
            return .hangUntilStopped
        case .apiError(let status, let message, let type, let code):
            return OpenAIErrorResponse.make(status: status, message: message, type: type, code: code)
        }
    }

    /// The request if it is one OpenAI would take, else the 400 it would answer.
    private static func validate(_ body: Data) -> Result<Recorded, Refusal> {
        func refuse(_ message: String) -> Result<Recorded, Refusal> {
            .failure(Refusal(response: OpenAIErrorResponse.invalidRequest(message)))
        }
        guard let request = try? JSONDecoder().decode(CompletionRequest.self, from: body) else {
            return refuse(OpenAIErrorResponse.unparsableJSON)
        }
        guard let model = request.model, !model.isEmpty else { return refuse("you must provide a model parameter") }
        guard let messages = request.messages else { return refuse("Missing required parameter: 'messages'.") }
        guard !messages.isEmpty else { return refuse("[] is too short - 'messages'") }
        if let maxTokens = request.maxTokens, maxTokens < 1 {
            return refuse("Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, got \(maxTokens)")
        }
        if let temperature = request.temperature, temperature < 0 {
            return refuse("\(temperature) is less than the minimum of 0 - 'temperature'")
        }
        if let temperature = request.temperature, temperature > 2 {
            return refuse("\(temperature) is greater than the maximum of 2 - 'temperature'")
        }
        return .success(
            Recorded(
                model: model,
                messages: messages,
                maxTokens: request.maxTokens,
                temperature: request.temperature
            )
        )
    }

    private struct Refusal: Error {
        var response: HTTPResponse
    }

    private func success(_ request: Recorded, content: String, finishReason: String, id: Int) -> HTTPResponse {
        let promptTokens = OpenAIFake.estimatedPromptTokens(request.messages)
        let completionTokens = OpenAIFake.estimatedTokens(content)
        let body = CompletionBody(
            id: "chatcmpl-fake\(id)",
            created: Int(Date().timeIntervalSince1970),
            model: request.model,
            choices: [
                .init(
                    message: .init(content: content),
                    finishReason: finishReason
                )
            ],
            usage: .init(
                promptTokens: promptTokens,
                completionTokens: completionTokens,
                totalTokens: promptTokens + completionTokens
            )
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return .json(
            status: 200,
            body,
            headers: ["x-request-id": "req_fake\(id)", "openai-processing-ms": "1"],
            encoder: encoder
        )
    }
}

/// A chat completion as OpenAI sends it.
private struct CompletionBody: Encodable {
    struct Choice: Encodable {
        struct Message: Encodable {
            var role = "assistant"
            var content: String
        }

        var index = 0
        var message: Message
        var finishReason: String

        enum CodingKeys: String, CodingKey {
            case index
            case message
            case finishReason = "finish_reason"
        }
    }

    struct Usage: Encodable {
        var promptTokens: Int
        var completionTokens: Int
        var totalTokens: Int

        enum CodingKeys: String, CodingKey {
            case promptTokens = "prompt_tokens"
            case completionTokens = "completion_tokens"
            case totalTokens = "total_tokens"
        }
    }

    var id: String
    var object = "chat.completion"
    var created: Int
    var model: String
    var choices: [Choice]
    var usage: Usage
    var systemFingerprint = "fp_fake"

    enum CodingKeys: String, CodingKey {
        case id
        case object
        case created
        case model
        case choices
        case usage
        case systemFingerprint = "system_fingerprint"
    }
}
