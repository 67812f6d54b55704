import Foundation
import Testing

@testable import LLMClient

@Suite("LLMConfiguration, backoff and errors")
struct ConfigurationTests {
    static let key = "sk-proj-Zq8uR2x9LmN4vT7wK1pB"

    /// The refusal's description, or "" when the environment was accepted.
    private func refusal(_ environment: [String: String]) -> String {
        do {
            _ = try LLMConfiguration.fromEnvironment(environment)
            return ""
        } catch {
            return error.description
        }
    }

    private func temporaryFile(_ contents: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("llm-key-\(UUID().uuidString)").path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("no LLM_BASE_URL: no LLM")
    func unset() throws {
        #expect(try LLMConfiguration.fromEnvironment([:]) == nil)
        #expect(try LLMConfiguration.fromEnvironment(["LLM_BASE_URL": "  ", "LLM_MODEL": "m"]) == nil)
        #expect(try LLMConfiguration.fromEnvironment(["LLM_MODEL": "m", "LLM_API_KEY": Self.key]) == nil)
    }

    @Test("the defaults, and every variable read")
    func fromEnvironment() throws {
        let defaults = try #require(
            try LLMConfiguration.fromEnvironment([
                "LLM_BASE_URL": "https://api.openai.com/v1/", "LLM_MODEL": "gpt-4o-mini", "LLM_API_KEY": Self.key,
            ])
        )
        #expect(defaults.baseURL.absoluteString == "https://api.openai.com/v1")
        #expect(defaults.model == "gpt-4o-mini")
        #expect(defaults.authorization == "Bearer \(Self.key)")
        #expect(defaults.requestTimeout == .seconds(60))
        #expect(
            defaults.retryPolicy
                == RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), maxDelay: .seconds(20), deadline: .seconds(120))
        )

        let tuned = try #require(
            try LLMConfiguration.fromEnvironment([
                "LLM_BASE_URL": "http://127.0.0.1:11434/v1", "LLM_MODEL": " llama3.1:8b ", "LLM_API_KEY": Self.key,
                "LLM_TIMEOUT_SECONDS": "2.5", "LLM_MAX_ATTEMPTS": "2", "LLM_DEADLINE_SECONDS": "30",
            ])
        )
        #expect(tuned.baseURL.absoluteString == "http://127.0.0.1:11434/v1")
        #expect(tuned.model == "llama3.1:8b")
        #expect(tuned.requestTimeout == .milliseconds(2_500))
        #expect(tuned.retryPolicy.maxAttempts == 2)
        #expect(tuned.retryPolicy.deadline == .seconds(30))
    }

    @Test("missing or invalid settings are refused with the variable named")
    func refusals() {
        let base = ["LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "gpt-4o-mini", "LLM_API_KEY": Self.key]
        func with(_ changes: [String: String?]) -> [String: String] {
            var environment = base
            for (name, value) in changes { environment[name] = value }
            return environment
        }
        #expect(refusal(base) == "")
        #expect(refusal(with(["LLM_MODEL": nil])).contains("LLM_MODEL is required"))
        #expect(refusal(with(["LLM_MODEL": ""])).contains("LLM_MODEL is required"))
        let noKey = refusal(with(["LLM_API_KEY": nil]))
        #expect(noKey.contains("LLM_API_KEY or LLM_API_KEY_FILE is required"))
        #expect(refusal(with(["LLM_API_KEY_FILE": "/tmp/k"])).contains("not both"))
        #expect(refusal(with(["LLM_API_KEY": "sk-with\u{7}bell"])).contains("LLM_API_KEY must be printable ASCII"))
        #expect(refusal(with(["LLM_BASE_URL": "http://api.example.com/v1"])).contains("LLM_BASE_URL"))
        #expect(refusal(with(["LLM_BASE_URL": "http://api.example.com/v1"])).contains("must be https"))
        #expect(refusal(with(["LLM_BASE_URL": "http://localhost:8000/v1"])) == "")
        #expect(refusal(with(["LLM_BASE_URL": "https://api.example.com/v1?x=1"])).contains("query"))
        let credentials = refusal(with(["LLM_BASE_URL": "https://user:hunter2@api.example.com/v1"]))
        #expect(credentials.contains("LLM_BASE_URL must not carry credentials"))
        #expect(!credentials.contains("hunter2"))
        #expect(refusal(with(["LLM_TIMEOUT_SECONDS": "soon"])).contains("LLM_TIMEOUT_SECONDS"))
        #expect(refusal(with(["LLM_TIMEOUT_SECONDS": "0"])).contains("LLM_TIMEOUT_SECONDS"))
        #expect(refusal(with(["LLM_TIMEOUT_SECONDS": "900"])).contains("LLM_TIMEOUT_SECONDS"))
        #expect(refusal(with(["LLM_MAX_ATTEMPTS": "0"])).contains("LLM_MAX_ATTEMPTS must be 1...20"))
        #expect(refusal(with(["LLM_MAX_ATTEMPTS": "2.5"])).contains("LLM_MAX_ATTEMPTS"))
        #expect(refusal(with(["LLM_DEADLINE_SECONDS": "-1"])).contains("LLM_DEADLINE_SECONDS"))
    }

    @Test("a key file is read and trimmed; a missing or empty one is refused with the variable named")
    func keyFile() throws {
        let path = try temporaryFile("  \(Self.key)\n\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try #require(
            try LLMConfiguration.fromEnvironment([
                "LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "gpt-4o-mini", "LLM_API_KEY_FILE": path,
            ])
        )
        #expect(configuration.authorization == "Bearer \(Self.key)")

        let missing = refusal([
            "LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "m", "LLM_API_KEY_FILE": "/nonexistent/llm-key",
        ])
        #expect(missing.contains("LLM_API_KEY_FILE /nonexistent/llm-key: no such file"))

        let emptyPath = try temporaryFile(" \n")
        defer { try? FileManager.default.removeItem(atPath: emptyPath) }
        let empty = refusal([
            "LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "m", "LLM_API_KEY_FILE": emptyPath,
        ])
        #expect(empty.contains("LLM_API_KEY_FILE \(emptyPath) is empty"))

        let badPath = try temporaryFile("sk-two words")
        defer { try? FileManager.default.removeItem(atPath: badPath) }
        let bad = refusal(["LLM_BASE_URL": "https://api.openai.com/v1", "LLM_MODEL": "m", "LLM_API_KEY_FILE": badPath])
        #expect(bad.contains("LLM_API_KEY_FILE"))
        #expect(!bad.contains("sk-two"))
    }

    @Test("the key file's key is the one sent, against the fake")
    func keyFileAgainstTheFake() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let path = try temporaryFile("\(Fixture.apiKey)\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let configuration = try #require(
            try LLMConfiguration.fromEnvironment([
                "LLM_BASE_URL": fixture.fake.baseURL.absoluteString, "LLM_MODEL": "file-model",
                "LLM_API_KEY_FILE": path,
            ])
        )
        let completion = try await LLMClient(configuration: configuration).complete(hello)
        #expect(completion.model == "file-model")
        #expect(fixture.fake.unauthorizedCount == 0)
    }

    @Test("the key never appears in a description, a dump or a refusal")
    func keyNeverShown() throws {
        let configuration = try LLMConfiguration(
            baseURL: URL(string: "https://api.openai.com/v1")!,
            model: "gpt-4o-mini",
            apiKey: Self.key
        )
        var dumped = ""
        dump(configuration, to: &dumped)
        let client = LLMClient(configuration: configuration)
        for text in [
            configuration.description, configuration.debugDescription, String(reflecting: configuration),
            "\(configuration)", dumped, String(reflecting: client.configuration),
        ] {
            #expect(!text.contains(Self.key))
            #expect(!text.contains("Zq8uR2"))
        }
        #expect(configuration.description.contains("apiKey: <redacted>"))
        #expect(dumped.contains("<redacted>"))

        do {
            _ = try LLMConfiguration(baseURL: URL(string: "https://api.openai.com/v1")!, model: "m", apiKey: "sk-a b")
            Issue.record("a key with a space was accepted")
        } catch {
            #expect(error.description.contains("apiKey must be printable ASCII"))
            #expect(!error.description.contains("sk-a b"))
        }
    }

    @Test("invalid settings in code are refused with the field named")
    func initValidation() {
        func refusal(
            baseURL: String = "https://api.openai.com/v1",
            model: String = "gpt-4o-mini",
            requestTimeout: Duration = .seconds(60),
            retryPolicy: RetryPolicy = RetryPolicy()
        ) -> String {
            do {
                _ = try LLMConfiguration(
                    baseURL: URL(string: baseURL)!,
                    model: model,
                    apiKey: Self.key,
                    requestTimeout: requestTimeout,
                    retryPolicy: retryPolicy
                )
                return ""
            } catch {
                return error.description
            }
        }
        #expect(refusal() == "")
        #expect(refusal(model: "").contains("model is empty"))
        #expect(refusal(model: " gpt").contains("model"))
        #expect(refusal(baseURL: "ftp://example.com").contains("baseURL"))
        #expect(refusal(requestTimeout: .zero).contains("requestTimeout"))
        #expect(refusal(retryPolicy: RetryPolicy(maxAttempts: 0)).contains("maxAttempts"))
        #expect(refusal(retryPolicy: RetryPolicy(baseDelay: .seconds(30), maxDelay: .seconds(1))).contains("baseDelay"))
        #expect(refusal(retryPolicy: RetryPolicy(deadline: .zero)).contains("deadline"))
    }

    @Test("full-jitter backoff doubles from the base delay up to the cap")
    func backoff() throws {
        let configuration = try LLMConfiguration(
            baseURL: URL(string: "https://api.openai.com/v1")!,
            model: "m",
            apiKey: Self.key
        )
        let top = LLMClient(configuration: configuration, timing: .init(now: { .now }, sleep: { _ in }, random: { 1 }))
        #expect((1...7).map { top.backoff(afterAttempt: $0) } == [1, 2, 4, 8, 16, 20, 20].map { Duration.seconds($0) })
        let bottom = LLMClient(
            configuration: configuration,
            timing: .init(now: { .now }, sleep: { _ in }, random: { 0 })
        )
        #expect(bottom.backoff(afterAttempt: 3) == .zero)
        let system = LLMClient(configuration: configuration)
        for attempt in 1...8 {
            let delay = system.backoff(afterAttempt: attempt)
            #expect(delay >= .zero && delay <= .seconds(20))
        }
        // A policy changed after validation is still used sanely.
        var odd = configuration
        odd.retryPolicy.maxAttempts = 0
        odd.retryPolicy.baseDelay = .seconds(-1)
        #expect(odd.retryPolicy.normalized.maxAttempts == 1)
        #expect(
            LLMClient(configuration: odd, timing: .init(now: { .now }, sleep: { _ in }, random: { 1 })).backoff(
                afterAttempt: 2
            ) == .zero
        )
    }

    @Test("Retry-After in seconds (fractions too) and retry-after-ms; other forms ignored")
    func retryAfter() {
        #expect(LLMClient.parseRetryAfter("1") == .seconds(1))
        #expect(LLMClient.parseRetryAfter(" 30 ") == .seconds(30))
        #expect(LLMClient.parseRetryAfter("0.5") == .milliseconds(500))
        #expect(LLMClient.parseRetryAfter("-1") == nil)
        #expect(LLMClient.parseRetryAfter("99999") == .seconds(3_600))
        #expect(LLMClient.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == nil)
        #expect(LLMClient.parseRetryAfterMilliseconds("1250") == .milliseconds(1_250))
        #expect(LLMClient.parseRetryAfterMilliseconds("soon") == nil)
    }

    @Test("API error bodies: OpenAI's, a number code, top-level fields, a bare string")
    func errorBodies() {
        func parse(_ text: String) -> APIErrorBody? { APIErrorBody.parse(Data(text.utf8), redact: { $0 }) }
        #expect(
            parse(#"{"error":{"message":"m","type":"t","param":null,"code":"c"}}"#)
                == APIErrorBody(message: "m", type: "t", code: "c")
        )
        #expect(parse(#"{"error":{"message":"m","type":"t","code":400}}"#)?.code == "400")
        #expect(parse(#"{"object":"error","message":"m","type":"BadRequestError","code":400}"#)?.message == "m")
        #expect(parse(#"{"error":"Unauthorized"}"#) == APIErrorBody(message: "Unauthorized", type: nil, code: nil))
        #expect(parse("<html>502 Bad Gateway</html>") == nil)
        #expect(parse("") == nil)
    }

    @Test("a 200 without a usable first choice is malformed; null content with a finish reason is empty text")
    func completionBodies() throws {
        func parse(_ text: String) -> Result<ChatCompletion, LLMError> {
            do {
                return .success(try LLMClient.parseCompletion(Data(text.utf8), attempts: 1, redact: { $0 }))
            } catch {
                return .failure(error)
            }
        }
        let filtered = try parse(#"{"choices":[{"message":{"content":null},"finish_reason":"content_filter"}]}"#).get()
        #expect(filtered.content == "")
        #expect(filtered.finishReason == "content_filter")
        #expect(filtered.promptTokens == nil)
        let oddUsage = try parse(
            #"{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":"7","completion_tokens":3}}"#
        ).get()
        #expect(oddUsage.promptTokens == nil)
        #expect(oddUsage.completionTokens == 3)
        for body in [
            #"{"choices":[]}"#, #"{"choices":[{"message":{}}]}"#, #"[1,2]"#, #"{"error":{"message":"overloaded"}}"#,
        ] {
            guard case .failure(let error) = parse(body) else {
                Issue.record("accepted \(body)")
                continue
            }
            #expect(error.code == "malformed-response")
        }
        guard case .failure(let wrapped) = parse(#"{"error":{"message":"overloaded","type":"server_error"}}"#) else {
            Issue.record("accepted an error body")
            return
        }
        #expect(wrapped.errorMessage == "overloaded")
    }

    @Test("the error's description is one line with the facts, and the codes are stable")
    func errorDescription() {
        let error = LLMError(
            kind: .rateLimited,
            reason: "the API's rate limit was exceeded",
            httpStatus: 429,
            errorMessage: "Rate limit reached\nfor gpt-4o",
            errorType: "requests",
            errorCode: "rate_limit_exceeded",
            attempts: 4,
            retryAfter: .milliseconds(1_500)
        )
        #expect(
            error.description
                == "LLM API: the API's rate limit was exceeded (HTTP 429, API error rate_limit_exceeded "
                + "\"Rate limit reached for gpt-4o\", Retry-After 1.5 s, 4 attempts)"
        )
        #expect(!error.description.contains("\n"))
        #expect(error.debugDescription.hasPrefix("rate-limited: "))
        #expect(
            LLMError.Kind.allCases.map(\.rawValue) == [
                "unauthorized", "bad-request", "rate-limited", "server-error", "timeout", "network",
                "malformed-response", "deadline-exceeded", "cancelled",
            ]
        )
        #expect(
            LLMError.Kind.allCases.filter(\.isTransient).map(\.rawValue) == [
                "rate-limited", "server-error", "timeout", "network", "deadline-exceeded", "cancelled",
            ]
        )
        #expect(LLMError(kind: .network, reason: "x", attempts: 1).description == "LLM API: x (1 attempt)")
        let quoted = LLMError(kind: .badRequest, reason: "r", errorMessage: #"model's "x" \ y"#, attempts: 2)
        #expect(quoted.description == #"LLM API: r (API error "model's \"x\" \\ y", 2 attempts)"#)
    }
}
