import Foundation
import LLMFake
import Testing

@testable import LLMClient

@Suite("LLMClient against the OpenAI fake", .timeLimit(.minutes(1)))
struct LLMClientTests {
    @Test("a completion: content, finish reason, model and usage parsed; the request as OpenAI wants it")
    func success() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.success(content: "Hello there, traveller."))
        let request = ChatCompletionRequest(messages: hello.messages, maxTokens: 300, temperature: 0.7)
        let completion = try await fixture.client().complete(request)

        #expect(completion.content == "Hello there, traveller.")
        #expect(completion.finishReason == "stop")
        #expect(completion.model == Fixture.model)
        #expect(completion.attempts == 1)
        let promptTokens = OpenAIFake.estimatedPromptTokens(hello.messages)
        #expect(promptTokens == ("You are terse.Say hello.".count + 3) / 4)
        #expect(completion.promptTokens == promptTokens)
        #expect(completion.completionTokens == ("Hello there, traveller.".count + 3) / 4)
        #expect(completion.totalTokens == promptTokens + completion.completionTokens!)

        #expect(fixture.fake.requestCount == 1)
        #expect(fixture.fake.lastRequestModel == Fixture.model)
        #expect(fixture.fake.lastRequestMessages == hello.messages)
        #expect(fixture.fake.lastRequestMaxTokens == 300)
        #expect(fixture.fake.lastRequestTemperature == 0.7)
        #expect(fixture.fake.lastAuthorizationHeader == "Bearer \(Fixture.apiKey)")
        let body = try #require(fixture.fake.lastRequestBody)
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(Set(json.keys) == ["model", "messages", "max_tokens", "temperature"])
        let messages = try #require(json["messages"] as? [[String: String]])
        #expect(
            messages == [["role": "system", "content": "You are terse."], ["role": "user", "content": "Say hello."]]
        )
    }

    @Test("max_tokens and temperature are left out when not given; the default responder answers from the prompt")
    func defaultResponderAndOptionalFields() async throws {
        let fixture = try Fixture { messages in
            "Report for \(messages.last?.content ?? "?") (\(messages.count) messages)"
        }
        defer { fixture.fake.stop() }
        let completion = try await fixture.client().complete(
            ChatCompletionRequest(messages: [.user("Libra Sun, Leo rising")])
        )
        #expect(completion.content == "Report for Libra Sun, Leo rising (1 messages)")
        #expect(completion.finishReason == "stop")
        let body = try #require(fixture.fake.lastRequestBody)
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(Set(json.keys) == ["model", "messages"])
        #expect(fixture.fake.lastRequestMaxTokens == nil)
        #expect(fixture.fake.lastRequestTemperature == nil)
    }

    @Test("429 with Retry-After: 1 waits a second, then succeeds")
    func rateLimitedThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.rateLimited(retryAfter: 1))
        fixture.fake.enqueue(.success(content: "after the wait"))
        let start = ContinuousClock.now
        let completion = try await fixture.client().complete(hello)
        let seconds = elapsed(since: start)
        #expect(completion.content == "after the wait")
        #expect(completion.attempts == 2)
        #expect(seconds >= 0.95, "waited only \(seconds) s")
        // Far below the client's longest backoff; only a machine stalled for half a minute fails it.
        #expect(seconds < 30, "\(seconds) s")
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("500 twice, then success, with full-jitter backoff from the 1 s base")
    func serverErrorsThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.serverError())
        fixture.fake.enqueue(.serverError(status: 503))
        fixture.fake.enqueue(.success(content: "third time"))
        let virtual = VirtualTiming(random: 0.5)
        let client = try fixture.client(retryPolicy: RetryPolicy(), timing: virtual.timing)
        let completion = try await client.complete(hello)
        #expect(completion.content == "third time")
        #expect(completion.attempts == 3)
        #expect(fixture.fake.requestCount == 3)
        // Half of 1 s, then half of 2 s.
        #expect(virtual.sleeps == [.milliseconds(500), .seconds(1)])
    }

    @Test("retries exhausted: server-error with attempts == maxAttempts and the API's message")
    func retriesExhausted() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.serverError(), count: 5)
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(maxAttempts: 4), timing: virtual.timing)
        let error = try #require(await completionError(client))
        #expect(error.code == "server-error")
        #expect(error.kind == .serverError)
        #expect(error.attempts == 4)
        #expect(error.httpStatus == 500)
        #expect(error.errorType == "server_error")
        #expect(error.errorMessage == "The server had an error while processing your request. Sorry about that!")
        #expect(error.isTransient)
        #expect(fixture.fake.requestCount == 4)
        #expect(virtual.sleeps.count == 3)
        #expect(fixture.fake.pendingScripted.count == 1)
    }

    @Test("a wrong key is 401 unauthorized, not retried, and the key stays out of the error")
    func unauthorized() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let wrongKey = "sk-wrong-\(UUID().uuidString)"
        let error = try #require(await completionError(try fixture.client(apiKey: wrongKey)))
        #expect(error.code == "unauthorized")
        #expect(error.httpStatus == 401)
        #expect(error.errorMessage == "Incorrect API key provided")
        #expect(error.errorCode == "invalid_api_key")
        #expect(error.errorType == "invalid_request_error")
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
        #expect(fixture.fake.unauthorizedCount == 1)
        for text in [error.description, error.debugDescription, String(reflecting: error)] {
            #expect(!text.contains(wrongKey))
            #expect(!text.contains(Fixture.apiKey))
        }

        // A scripted 401 answers even the right key, once.
        fixture.fake.enqueue(.unauthorized)
        let scripted = try #require(await completionError(try fixture.client()))
        #expect(scripted.code == "unauthorized")
        #expect(fixture.fake.requestCount == 2)
        #expect(await completionError(try fixture.client()) == nil)
    }

    @Test("400 is bad-request with the API's message, not retried")
    func badRequest() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let message =
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."
        fixture.fake.enqueue(.badRequest(message: message))
        let error = try #require(await completionError(try fixture.client()))
        #expect(error.code == "bad-request")
        #expect(error.httpStatus == 400)
        #expect(error.errorMessage == message)
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
        #expect(error.description.contains("HTTP 400"))
        #expect(error.description.contains(message))
    }

    @Test(
        "statuses a retry cannot fix are answered at once",
        arguments: [(403, "unauthorized"), (404, "bad-request"), (422, "bad-request"), (402, "bad-request")]
    )
    func notRetried(status: Int, code: String) async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(
            .apiError(status: status, message: "nope \(status)", type: "invalid_request_error", code: "c\(status)")
        )
        fixture.fake.enqueue(.success(content: "should not be reached"))
        let error = try #require(await completionError(try fixture.client()))
        #expect(error.code == code)
        #expect(error.httpStatus == status)
        #expect(error.errorCode == "c\(status)")
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("408, 409, 502 and 503 are retried", arguments: [408, 409, 502, 503])
    func retried(status: Int) async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.apiError(status: status, message: "try later", type: "server_error", code: nil))
        fixture.fake.enqueue(.success(content: "ok"))
        let completion = try await fixture.client().complete(hello)
        #expect(completion.content == "ok")
        #expect(completion.attempts == 2)
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("a 429 insufficient_quota is a billing problem: not retried, not transient")
    func insufficientQuota() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(
            .apiError(
                status: 429,
                message: "You exceeded your current quota, please check your plan and billing details.",
                type: "insufficient_quota",
                code: "insufficient_quota"
            )
        )
        let error = try #require(await completionError(try fixture.client()))
        #expect(error.code == "rate-limited")
        #expect(!error.isTransient)
        #expect(error.attempts == 1)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a 200 that is not JSON is malformed-response, not retried")
    func malformedJSON() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.malformedJSON)
        let error = try #require(await completionError(try fixture.client()))
        #expect(error.code == "malformed-response")
        #expect(error.httpStatus == 200)
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a truncated answer is returned with finish_reason length: the caller decides")
    func truncated() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.truncated(content: "The Sun in Libra asks for bal"))
        let completion = try await fixture.client().complete(hello)
        #expect(completion.content == "The Sun in Libra asks for bal")
        #expect(completion.finishReason == "length")
        #expect(completion.attempts == 1)
        #expect(completion.completionTokens == OpenAIFake.estimatedTokens("The Sun in Libra asks for bal"))
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a hanging request times out after the 0.5 s request timeout and the retry succeeds")
    func hangThenSuccess() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.hang)
        fixture.fake.enqueue(.success(content: "second try"))
        let client = try fixture.client(requestTimeout: .milliseconds(500))
        let start = ContinuousClock.now
        let completion = try await client.complete(hello)
        let seconds = elapsed(since: start)
        #expect(completion.content == "second try")
        #expect(completion.attempts == 2)
        #expect(seconds >= 0.45, "\(seconds) s")
        // Without its timeout the hanging request never ends; the bound leaves room for a machine
        // stalled by other work.
        #expect(seconds < 30, "\(seconds) s")
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("with one attempt, a hang is a timeout error")
    func hangIsTimeout() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.hang)
        let client = try fixture.client(requestTimeout: .milliseconds(500), retryPolicy: .none)
        let start = ContinuousClock.now
        let error = try #require(await completionError(client))
        let seconds = elapsed(since: start)
        #expect(error.code == "timeout")
        #expect(error.isTransient)
        #expect(error.attempts == 1)
        #expect(error.httpStatus == nil)
        // The fake hangs until stopped: a finite bound proves the timeout; 30 s tolerates load.
        #expect(seconds >= 0.45 && seconds < 30, "\(seconds) s")
    }

    @Test("the total deadline ends the retries")
    func deadline() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.hang, count: 10)
        let policy = RetryPolicy(
            maxAttempts: 10,
            baseDelay: .milliseconds(20),
            maxDelay: .milliseconds(20),
            deadline: .milliseconds(1_300)
        )
        let client = try fixture.client(requestTimeout: .milliseconds(500), retryPolicy: policy)
        let start = ContinuousClock.now
        let error = try #require(await completionError(client))
        let seconds = elapsed(since: start)
        #expect(error.code == "deadline-exceeded")
        #expect(error.isTransient)
        // Ten attempts of 0.5 s would take over 5 s: the deadline stops them after a few (counted,
        // not timed: a loaded machine stretches durations). A timed-out attempt can end late, so
        // one attempt may use it all up.
        #expect((1...4).contains(error.attempts), "\(error.attempts) attempts")
        #expect(fixture.fake.requestCount <= 4)
        #expect(seconds >= 1.2, "\(seconds) s")
    }

    @Test("a Retry-After past the deadline gives up at once instead of sleeping")
    func retryAfterBeyondDeadline() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.rateLimited(retryAfter: 300))
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(), timing: virtual.timing)
        let error = try #require(await completionError(client))
        #expect(error.code == "deadline-exceeded")
        #expect(error.httpStatus == 429)
        #expect(error.errorCode == "rate_limit_exceeded")
        #expect(error.retryAfter == .seconds(300))
        #expect(error.attempts == 1)
        #expect(virtual.sleeps.isEmpty)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("rate limits on every attempt: rate-limited, honouring Retry-After each time")
    func rateLimitedExhausted() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.rateLimited(retryAfter: 2), count: 3)
        let virtual = VirtualTiming()
        let client = try fixture.client(retryPolicy: RetryPolicy(maxAttempts: 3), timing: virtual.timing)
        let error = try #require(await completionError(client))
        #expect(error.code == "rate-limited")
        #expect(error.isTransient)
        #expect(error.attempts == 3)
        #expect(error.retryAfter == .seconds(2))
        #expect(virtual.sleeps == [.seconds(2), .seconds(2)])
    }

    @Test("32 calls at once to a fake that answers after 1 s all finish in about a second")
    func concurrentCalls() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        for index in 0..<32 { fixture.fake.enqueue(.delayed(seconds: 1, content: "answer \(index)")) }
        let client = try fixture.client(requestTimeout: .seconds(10), retryPolicy: .none)
        let start = ContinuousClock.now
        let contents = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<32 {
                group.addTask {
                    try await client.complete(ChatCompletionRequest(messages: [.user("question \(index)")])).content
                }
            }
            var contents: [String] = []
            for try await content in group { contents.append(content) }
            return contents
        }
        let seconds = elapsed(since: start)
        #expect(Set(contents) == Set((0..<32).map { "answer \($0)" }))
        #expect(seconds >= 0.95, "\(seconds) s")
        // Concurrency is what the fake saw, not a duration: a loaded machine stretches durations.
        #expect(fixture.fake.maxConcurrentRequests >= 16, "at most \(fixture.fake.maxConcurrentRequests) at once")
        #expect(fixture.fake.requestCount == 32)
    }

    @Test("a refused connection is a network error, retried up to maxAttempts")
    func connectionRefused() async throws {
        let refusing = try RefusingPort()
        let configuration = try LLMConfiguration(
            baseURL: refusing.baseURL,
            model: Fixture.model,
            apiKey: Fixture.apiKey,
            requestTimeout: .seconds(5),
            retryPolicy: RetryPolicy(maxAttempts: 3)
        )
        let virtual = VirtualTiming()
        let error = try #require(await completionError(LLMClient(configuration: configuration, timing: virtual.timing)))
        withExtendedLifetime(refusing) {}
        #expect(error.code == "network")
        #expect(error.isTransient)
        #expect(error.attempts == 3)
        #expect(error.httpStatus == nil)
        #expect(virtual.sleeps.count == 2)
    }

    @Test("cancelling the calling task ends a hanging call at once")
    func cancellation() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.hang)
        let client = try fixture.client(requestTimeout: .seconds(300))
        let start = ContinuousClock.now
        let call = Task { await completionError(client) }
        try await Task.sleep(for: .milliseconds(300))
        call.cancel()
        let error = await call.value
        #expect(error?.code == "cancelled")
        #expect(error?.isTransient == true)
        // Not cancelled, the call would wait out the 300 s request timeout; the bound leaves room
        // for a machine stalled by other work.
        #expect(elapsed(since: start) < 60)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a request without messages is refused without asking")
    func emptyRequest() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let error = try #require(await completionError(try fixture.client(), ChatCompletionRequest(messages: [])))
        #expect(error.code == "bad-request")
        #expect(error.attempts == 0)
        #expect(fixture.fake.requestCount == 0)
    }

    @Test("an API message that echoes the key is scrubbed")
    func keyEchoRedacted() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let masked = "sk-tes" + "*****************" + String(Fixture.apiKey.suffix(4))
        fixture.fake.enqueue(
            .badRequest(message: "Incorrect API key provided: \(masked). Also: \(Fixture.apiKey), see the docs.")
        )
        let error = try #require(await completionError(try fixture.client()))
        let message = try #require(error.errorMessage)
        #expect(message == "Incorrect API key provided: <redacted>. Also: <redacted>, see the docs.")
        #expect(!error.description.contains(Fixture.apiKey))
        #expect(!error.description.contains(masked))
    }
}
