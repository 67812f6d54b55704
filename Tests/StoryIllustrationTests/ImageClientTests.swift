import Foundation
import LLMClient
import LLMFake
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("ImageClient against the images fake", .timeLimit(.minutes(1)))
struct ImageClientTests {
    @Test("a generation: the JSON request as OpenAI wants it, the PNG decoded")
    func generate() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let result = try await fixture.client().generate(prompt: "A fox in a forest")
        #expect(result.image == OpenAIImagesFake.defaultImage(prompt: "A fox in a forest"))
        #expect(result.image.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        #expect(result.attempts == 1)
        #expect(result.revisedPrompt == nil)
        #expect(fixture.fake.generationsCount == 1)
        #expect(fixture.fake.editsCount == 0)
        #expect(fixture.fake.lastAuthorizationHeader == "Bearer \(ImagesFixture.apiKey)")
        let body = try #require(fixture.fake.lastRequestBody)
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(json["model"] as? String == ImagesFixture.model)
        #expect(json["prompt"] as? String == "A fox in a forest")
        #expect(json["n"] as? Int == 1)
        #expect(json["size"] as? String == "512x512")
        #expect(json["response_format"] as? String == "b64_json")
    }

    @Test("an edit sends the reference image as a multipart file part; the fake receives identical bytes")
    func editSendsTheImage() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let reference = OpenAIImagesFake.tinyPNG(width: 16, height: 4, red: 10, green: 20, blue: 30)
        // A reference containing CR LF and dashes, as real PNGs do, must arrive unchanged.
        var tricky = reference
        tricky.append(contentsOf: Array("\r\n--not-the-boundary\r\n".utf8))
        let result = try await fixture.client().edit(
            prompt: "Same fox, now by a lake",
            image: tricky,
            imageMediaType: "image/png"
        )
        #expect(result.attempts == 1)
        #expect(fixture.fake.editsCount == 1)
        #expect(fixture.fake.generationsCount == 0)
        #expect(fixture.fake.lastEditImage == tricky)
        #expect(fixture.fake.lastEditPrompt == "Same fox, now by a lake")
        #expect(fixture.fake.lastModel == ImagesFixture.model)
        #expect(fixture.fake.lastSize == "512x512")
        #expect(fixture.fake.lastResponseFormat == "b64_json")
        #expect(fixture.fake.lastEditImageFile?.filename == "reference.png")
        #expect(fixture.fake.lastEditImageFile?.contentType == "image/png")
        #expect(result.image == OpenAIImagesFake.defaultImage(prompt: "Same fox, now by a lake"))
    }

    @Test("the revised prompt is returned when the API sends one")
    func revisedPrompt() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.success(revisedPrompt: "A friendly fox in a sunlit forest"))
        let result = try await fixture.client().generate(prompt: "fox")
        #expect(result.revisedPrompt == "A friendly fox in a sunlit forest")
    }

    @Test("429 with Retry-After: 1 waits a second, then succeeds")
    func rateLimitedThenSuccess() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.rateLimited(retryAfter: 1))
        let start = ContinuousClock.now
        let result = try await fixture.client().generate(prompt: "fox")
        let elapsed = ContinuousClock.now - start
        #expect(result.attempts == 2)
        #expect(elapsed >= .milliseconds(950), "waited only \(elapsed)")
        // Far below the client's longest backoff; only a machine stalled for half a minute fails it.
        #expect(elapsed < .seconds(30))
        #expect(fixture.fake.requestCount == 2)
    }

    @Test("500 on every attempt: server-error after maxAttempts, with backoff between")
    func serverErrorsExhausted() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.serverError(), count: 4)
        let sleeps = RecordedSleeps()
        let client = try fixture.client(timing: sleeps.timing)
        let error = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "fox") }
        )
        #expect(error.code == "server-error")
        #expect(error.httpStatus == 500)
        #expect(error.attempts == 3)
        #expect(error.isTransient)
        #expect(fixture.fake.requestCount == 3)
        #expect(sleeps.sleeps == [.milliseconds(5), .milliseconds(10)])
        #expect(fixture.fake.pendingScripted.count == 1)
    }

    @Test("a wrong key is 401 unauthorized, not retried, and no key is in the error")
    func unauthorized() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let wrong = "sk-wrong-\(UUID().uuidString)"
        let client = try fixture.client(apiKey: wrong)
        let error = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "fox") }
        )
        #expect(error.code == "unauthorized")
        #expect(error.errorCode == "invalid_api_key")
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
        #expect(fixture.fake.requestCount == 1)
        #expect(fixture.fake.unauthorizedCount == 1)
        for text in [error.description, error.debugDescription] {
            #expect(!text.contains(wrong))
            #expect(!text.contains(ImagesFixture.apiKey))
        }
    }

    @Test("a content-policy refusal is a bad request with its code, not retried")
    func contentPolicy() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.contentPolicy)
        let client = try fixture.client()
        let error = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "fox") }
        )
        #expect(error.code == "bad-request")
        #expect(error.httpStatus == 400)
        #expect(error.errorCode == "content_policy_violation")
        #expect(error.errorMessage?.contains("safety system") == true)
        #expect(error.attempts == 1)
        #expect(fixture.fake.requestCount == 1)
    }

    @Test("a 200 that is not JSON is malformed-response, not retried")
    func malformedJSON() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.malformedJSON)
        let client = try fixture.client()
        let error = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "fox") }
        )
        #expect(error.code == "malformed-response")
        #expect(error.attempts == 1)
        #expect(!error.isTransient)
    }

    @Test("a hanging request times out after the request timeout; with one attempt it is a timeout error")
    func hangIsTimeout() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        fixture.fake.enqueue(.hang)
        let client = try fixture.client(requestTimeout: .milliseconds(500), retryPolicy: .none)
        let start = ContinuousClock.now
        let error = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "fox") }
        )
        let elapsed = ContinuousClock.now - start
        #expect(error.code == "timeout")
        #expect(error.isTransient)
        #expect(elapsed >= .milliseconds(450))
        // Without the timeout the request would hang until the fake stops.
        #expect(elapsed < .seconds(30))

        // With retries, the next attempt succeeds.
        fixture.fake.enqueue(.hang)
        let retrying = try fixture.client(requestTimeout: .milliseconds(500))
        let result = try await retrying.generate(prompt: "fox")
        #expect(result.attempts == 2)
    }

    @Test("empty prompts and images are refused without asking")
    func refusedLocally() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let client = try fixture.client()
        let empty = try #require(
            await imageError { () async throws(LLMError) in try await client.generate(prompt: "  ") }
        )
        #expect(empty.code == "bad-request")
        #expect(empty.attempts == 0)
        let noImage = try #require(
            await imageError { () async throws(LLMError) in
                try await client.edit(prompt: "fox", image: Data(), imageMediaType: "image/png")
            }
        )
        #expect(noImage.attempts == 0)
        #expect(fixture.fake.requestCount == 0)
    }

    @Test("the fake refuses what OpenAI refuses: no prompt, no image part, no multipart, a wrong path")
    func fakeRefusals() async throws {
        let fixture = try ImagesFixture()
        defer { fixture.fake.stop() }
        let base = fixture.fake.baseURL
        let auth = "Bearer \(ImagesFixture.apiKey)"
        func post(_ path: String, contentType: String, body: Data) async throws -> (Int, String) {
            var request = URLRequest(url: base.appendingPathComponent(path))
            request.httpMethod = "POST"
            request.httpBody = body
            request.setValue(auth, forHTTPHeaderField: "Authorization")
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            // The callback API: the async one differs across platforms.
            let (status, data) = await withCheckedContinuation {
                (continuation: CheckedContinuation<(Int, Data), Never>) in
                URLSession.shared.dataTask(with: request) { data, response, _ in
                    continuation.resume(returning: ((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data()))
                }.resume()
            }
            let message =
                (try? JSONSerialization.jsonObject(with: data) as? [String: Any])
                .flatMap { $0["error"] as? [String: Any] }?["message"] as? String
            return (status, message ?? "")
        }
        let noPrompt = try await post(
            "images/generations",
            contentType: "application/json",
            body: Data(#"{"model":"m"}"#.utf8)
        )
        #expect(noPrompt == (400, "Missing required parameter: 'prompt'."))
        let notJSON = try await post("images/generations", contentType: "application/json", body: Data("{".utf8))
        #expect(notJSON.0 == 400)
        let boundary = "b-123"
        let fieldsOnly = Data(
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nfox\r\n--\(boundary)--\r\n".utf8
        )
        let noImage = try await post(
            "images/edits",
            contentType: "multipart/form-data; boundary=\(boundary)",
            body: fieldsOnly
        )
        #expect(noImage == (400, "Missing required parameter: 'image'."))
        let notMultipart = try await post("images/edits", contentType: "application/json", body: Data("{}".utf8))
        #expect(notMultipart.0 == 400)
        #expect(notMultipart.1.contains("multipart/form-data"))
        let wrongPath = try await post("images/variations", contentType: "application/json", body: Data("{}".utf8))
        #expect(wrongPath.0 == 404)
        #expect(fixture.fake.generationsCount == 0)
        #expect(fixture.fake.editsCount == 0)
    }

    @Test("the fake's PNG is well formed: signature, IHDR with the size, IDAT, IEND")
    func tinyPNG() {
        let png = [UInt8](OpenAIImagesFake.tinyPNG(width: 3, height: 2, red: 255, green: 0, blue: 0))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        #expect(Array(png[12..<16]) == Array("IHDR".utf8))
        #expect(Array(png[16..<24]) == [0, 0, 0, 3, 0, 0, 0, 2])
        #expect(Array(png[24..<29]) == [8, 2, 0, 0, 0])
        // IHDR's CRC, as computed by zlib.crc32 for these exact bytes.
        #expect(Array(png[29..<33]) == [0x12, 0x16, 0xF1, 0x4D])
        #expect(Array(png[37..<41]) == Array("IDAT".utf8))
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0] + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
    }

    @Test("requests wait concurrently at the fake's default delay")
    func concurrentDelay() async throws {
        let fixture = try ImagesFixture(defaultDelay: .seconds(1))
        defer { fixture.fake.stop() }
        let client = try fixture.client()
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<8 { group.addTask { try await client.generate(prompt: "page \(index)").attempts } }
            for try await attempts in group { #expect(attempts == 1) }
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(950))
        // Concurrency is what the fake saw, not a duration: a loaded machine stretches durations.
        #expect(fixture.fake.maxConcurrentRequests >= 4, "the requests were not concurrent")
    }
}
