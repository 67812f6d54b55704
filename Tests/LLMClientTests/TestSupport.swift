import Foundation
import LLMFake
import Synchronization

@testable import LLMClient

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

typealias RetryPolicy = LLMConfiguration.RetryPolicy

extension RetryPolicy {
    /// Quick backoff so retry tests with real sleeping stay fast; a deadline (like the fixture's
    /// request timeout) that only a stalled machine reaches: tests of timeouts set their own.
    static let fast = RetryPolicy(
        maxAttempts: 4,
        baseDelay: .milliseconds(10),
        maxDelay: .milliseconds(40),
        deadline: .seconds(60)
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
        requestTimeout: Duration = .seconds(30),
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
        requestTimeout: Duration = .seconds(30),
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

/// A loopback port that refuses every connection for as long as this value lives: its socket is
/// bound and never listens. A stopped server's port would do only until another test binds it,
/// and in a parallel run one does.
final class RefusingPort: Sendable {
    let port: UInt16
    private let socket: Int32

    init() throws {
        let descriptor = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                Glibc.bind(descriptor, socketAddress, length) == 0
                    && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(descriptor)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        socket = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    /// `http://127.0.0.1:<port>/v1`, where an OpenAI-compatible API would answer.
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/v1")! }

    deinit { close(socket) }
}
