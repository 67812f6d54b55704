import Foundation
import LLMFake
import Testing

@testable import LLMClient

@Suite("OpenAIFake answers like OpenAI", .timeLimit(.minutes(1)))
struct OpenAIFakeTests {
    @Test("the base URL ends in /v1 on loopback")
    func baseURL() throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        #expect(fixture.fake.baseURL.absoluteString == "http://127.0.0.1:\(fixture.fake.port)/v1")
    }

    @Test("401 invalid_api_key without the right key; 404 Invalid URL elsewhere; 400 for bad bodies")
    func refusals() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let completions = fixture.fake.baseURL.appendingPathComponent("chat/completions")
        let good = Data(#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#.utf8)
        let auth = ["Authorization": "Bearer \(Fixture.apiKey)", "Content-Type": "application/json"]

        let anonymous = await fetch(completions, body: good)
        #expect(anonymous.status == 401)
        #expect(errorObject(anonymous.body)?["code"] as? String == "invalid_api_key")
        #expect(errorObject(anonymous.body)?["message"] as? String == "Incorrect API key provided")
        #expect(errorObject(anonymous.body)?["type"] as? String == "invalid_request_error")

        let elsewhere = await fetch(fixture.fake.baseURL.appendingPathComponent("models"), method: "GET", headers: auth)
        #expect(elsewhere.status == 404)
        #expect(errorObject(elsewhere.body)?["message"] as? String == "Invalid URL (GET /v1/models)")

        let notJSON = await fetch(completions, headers: auth, body: Data("{".utf8))
        #expect(notJSON.status == 400)
        #expect((errorObject(notJSON.body)?["message"] as? String)?.hasPrefix("We could not parse the JSON") == true)
        let noModel = await fetch(
            completions,
            headers: auth,
            body: Data(#"{"messages":[{"role":"user","content":"x"}]}"#.utf8)
        )
        #expect(noModel.status == 400)
        #expect(errorObject(noModel.body)?["message"] as? String == "you must provide a model parameter")
        let noMessages = await fetch(completions, headers: auth, body: Data(#"{"model":"m","messages":[]}"#.utf8))
        #expect(noMessages.status == 400)
        let hot = await fetch(
            completions,
            headers: auth,
            body: Data(#"{"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3}"#.utf8)
        )
        #expect(hot.status == 400)

        // None of these used up the scripted answer.
        fixture.fake.enqueue(.success(content: "scripted"))
        let ok = await fetch(completions, headers: auth, body: good)
        #expect(ok.status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: ok.body) as? [String: Any])
        #expect(json["object"] as? String == "chat.completion")
        #expect(json["model"] as? String == "m")
        let choice = try #require((json["choices"] as? [[String: Any]])?.first)
        #expect((choice["message"] as? [String: Any])?["content"] as? String == "scripted")
        #expect((choice["message"] as? [String: Any])?["role"] as? String == "assistant")
        #expect(choice["finish_reason"] as? String == "stop")
        let usage = try #require(json["usage"] as? [String: Int])
        #expect(usage == ["prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3])
        #expect(fixture.fake.requestCount == 7)
        #expect(fixture.fake.unauthorizedCount == 1)
        #expect(fixture.fake.pendingScripted.isEmpty)
    }

    @Test("a rate limit carries Retry-After and OpenAI's error body")
    func rateLimitShape() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.rateLimited(retryAfter: 7))
        let virtual = VirtualTiming()
        let error = try #require(
            await completionError(try fixture.client(retryPolicy: .none, timing: virtual.timing))
        )
        #expect(error.httpStatus == 429)
        #expect(error.retryAfter == .seconds(7))
        #expect(error.errorCode == "rate_limit_exceeded")
        #expect(error.errorType == "requests")
        #expect(error.errorMessage?.contains(Fixture.model) == true)
    }

    @Test("stopping the fake ends a hanging request")
    func stopEndsHang() async throws {
        let fixture = try Fixture()
        fixture.fake.enqueue(.hang)
        let client = try fixture.client(requestTimeout: .seconds(300), retryPolicy: .none)
        let start = ContinuousClock.now
        let call = Task { await completionError(client) }
        try await Task.sleep(for: .milliseconds(300))
        fixture.fake.stop()
        let error = await call.value
        #expect(error?.code == "network")
        // Well before the 300 s request timeout, with room for a machine stalled by other work.
        #expect(elapsed(since: start) < 60)
    }
}
