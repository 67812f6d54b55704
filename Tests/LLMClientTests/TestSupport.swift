import Foundation
import LLMFake
import Synchronization

@testable import LLMClient

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

typealias RetryPolicy = LLMConfiguration.RetryPolicy

extension RetryPolicy {
    /// Quick backoff so retry tests with real sleeping stay fast.
    static let fast = RetryPolicy(
        maxAttempts: 4,
        baseDelay: .milliseconds(10),
        maxDelay: .milliseconds(40),
        deadline: .seconds(10)
    )
}

/// A fake OpenAI-compatible API and clients configured for it.
struct Fixture {
    static let apiKey = "sk-test-\(UUID().uuidString)"
    static let model = "gpt-test-mini"

    let fake: OpenAIFake

    init(defaultResponder: (@Sendable ([ChatMessage]) -> String)? = nil) throws {
        if let defaultResponder {
            fake = try OpenAIFake(apiKey: Self.apiKey, defaultResponder: defaultResponder)
        } else {
            fake = try OpenAIFake(apiKey: Self.apiKey)
        }
    }

    func configuration(
        apiKey: String = Fixture.apiKey,
        requestTimeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = .fast
    ) throws -> LLMConfiguration {
        try LLMConfiguration(
            baseURL: fake.baseURL,
            model: Self.model,
            apiKey: apiKey,
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy
        )
    }

    func client(
        apiKey: String = Fixture.apiKey,
        requestTimeout: Duration = .seconds(5),
        retryPolicy: RetryPolicy = .fast,
        timing: LLMClient.Timing = .system
    ) throws -> LLMClient {
        LLMClient(
            configuration: try configuration(apiKey: apiKey, requestTimeout: requestTimeout, retryPolicy: retryPolicy),
            timing: timing
        )
    }
}

/// A short request.
let hello = ChatCompletionRequest(messages: [.system("You are terse."), .user("Say hello.")])

/// The error a completion threw, or `nil` when it succeeded.
func completionError(_ client: LLMClient, _ request: ChatCompletionRequest = hello) async -> LLMError? {
    do {
        _ = try await client.complete(request)
        return nil
    } catch {
        return error
    }
}

/// Virtual time: `sleep` returns at once, records the delay and moves the monotonic clock.
final class VirtualTiming: Sendable {
    private let offset = Mutex<Duration>(.zero)
    private let recorded = Mutex<[Duration]>([])
    let randomValue: Double

    init(random: Double = 0.5) { self.randomValue = random }

    var sleeps: [Duration] { recorded.withLock { $0 } }

    var timing: LLMClient.Timing {
        LLMClient.Timing(
            now: { ContinuousClock.now + self.offset.withLock { $0 } },
            sleep: { duration in
                try Task.checkCancellation()
                self.recorded.withLock { $0.append(duration) }
                self.offset.withLock { $0 += duration }
            },
            random: { self.randomValue }
        )
    }
}

/// Seconds since `start`.
func elapsed(since start: ContinuousClock.Instant) -> Double {
    let duration = ContinuousClock.now - start
    return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// A plain HTTP exchange through URLSession (the async API differs across platforms), for
/// checking the fake itself.
func fetch(
    _ url: URL,
    method: String = "POST",
    headers: [String: String] = [:],
    body: Data? = nil
) async -> (status: Int, body: Data) {
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.httpBody = body
    request.timeoutInterval = 10
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let session = URLSession(configuration: .ephemeral)
    defer { session.finishTasksAndInvalidate() }
    return await withCheckedContinuation { continuation in
        let task = session.dataTask(with: request) { data, response, _ in
            continuation.resume(returning: ((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data()))
        }
        task.resume()
    }
}

/// The `error` object of an OpenAI error body.
func errorObject(_ body: Data) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["error"] as? [String: Any]
}
