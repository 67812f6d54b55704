import Foundation
import RetryBackoff
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The response headers of one exchange, looked up without regard to case.
public struct HTTPHeaders: Sendable, Hashable {
    private let values: [String: String]

    public init(_ values: [String: String]) {
        self.values = Dictionary(
            values.map { ($0.key.lowercased(), $0.value) },
            uniquingKeysWith: { first, _ in first }
        )
    }

    /// The value of header `name` (any case), or nil.
    public subscript(name: String) -> String? { values[name.lowercased()] }
}

/// What one HTTP exchange came to.
public enum TransportOutcome: Sendable {
    /// An HTTP answer, whatever its status.
    case response(status: Int, headers: HTTPHeaders, body: Data)
    /// No complete answer within the attempt's timeout (the request was cancelled).
    case timedOut
    /// The connection failed; `code` is the `URLError` code.
    case failed(code: Int, summary: String)
    /// The calling task was cancelled.
    case cancelled
}

/// Runs one request on a `URLSession` with a timeout of our own: the transport under the App Store
/// Server API client and the LLM client (both retry on top of it, each by its API's rules).
///
/// On Linux, FoundationNetworking turns `URLRequest.timeoutInterval` into whole seconds
/// (`Int(timeoutInterval) * 1000` ms), so 0.5 s would become 0 and fail at once, and it is an idle
/// timeout besides. So the request carries a generous whole-second backstop and a timer of ours
/// cancels the task at the exact per-attempt timeout.
public struct Transport: Sendable {
    let session: URLSession
    private let bodies: BoundedBodies

    /// The largest answer body read by default (32 MiB: an image in base64 is a few MB).
    public static let defaultMaxResponseBytes = 32 << 20

    /// A transport on an ephemeral session (no cache, no cookies).
    /// - Parameters:
    ///   - maxConnectionsPerHost: connections kept to one host: an LLM client keeps many slow
    ///     completions in flight, the App Store client a few quick look-ups.
    ///   - maxResponseBytes: an answer body larger than this is not read whole: the exchange is
    ///     cancelled as it grows past it and ends `.failed` (an endpoint, or anyone between, must
    ///     not decide how much memory a worker spends).
    public init(maxConnectionsPerHost: Int, maxResponseBytes: Int = defaultMaxResponseBytes) {
        bodies = BoundedBodies(limit: max(1, maxResponseBytes))
        session = Self.makeSession(maxConnectionsPerHost: maxConnectionsPerHost, delegate: bodies)
    }

    static func makeSession(maxConnectionsPerHost: Int, delegate: BoundedBodies) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = maxConnectionsPerHost
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// Cancels what is in flight and lets the session go (the owning client's deinit).
    public func invalidate() { session.invalidateAndCancel() }

    /// Sends `request`; never throws: every way it can end is a `TransportOutcome`.
    public func send(_ request: URLRequest, timeout: Duration) async -> TransportOutcome {
        var request = request
        request.timeoutInterval = (timeout.seconds.rounded(.up) + 1).clamped(to: 2...600)
        let exchange = Exchange()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportOutcome, Never>) in
                guard exchange.install(continuation) else { return }
                let task = session.dataTask(with: request)
                bodies.register(task) { data, response, error in
                    exchange.finish(Self.outcome(data: data, response: response, error: error))
                }
                let timer = Task {
                    // Cancelled (and so returns early) when the exchange finishes first.
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    exchange.finish(.timedOut)
                }
                guard exchange.attach(task: task, timer: timer) else { return }
                task.resume()
            }
        } onCancel: {
            exchange.finish(.cancelled)
        }
    }

    private static func outcome(data: Data?, response: URLResponse?, error: (any Error)?) -> TransportOutcome {
        if let error {
            let urlError = error as? URLError
            if urlError?.code == .timedOut { return .timedOut }
            if urlError?.code == .cancelled { return .cancelled }
            let code = urlError?.code.rawValue ?? (error as NSError).code
            return .failed(code: code, summary: Self.summary(code: code))
        }
        guard let http = response as? HTTPURLResponse else {
            return .failed(code: URLError.badServerResponse.rawValue, summary: "the answer was not HTTP")
        }
        var headers: [String: String] = [:]
        for case let (name as String, value as String) in http.allHeaderFields { headers[name] = value }
        return .response(status: http.statusCode, headers: HTTPHeaders(headers), body: data ?? Data())
    }

    /// A short phrase for a `URLError` code (the localized descriptions differ by platform).
    public static func summary(code: Int) -> String {
        switch URLError.Code(rawValue: code) {
        case .cannotConnectToHost: return "cannot connect to the host"
        case .cannotFindHost, .dnsLookupFailed: return "cannot resolve the host"
        case .networkConnectionLost: return "the connection was lost"
        case .notConnectedToInternet: return "no network"
        case .badServerResponse: return "the server closed the connection or sent a broken response"
        case .secureConnectionFailed: return "the TLS handshake failed"
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot:
            return "the server's certificate is not trusted"
        case .timedOut: return "timed out"
        case .dataLengthExceedsMaximum: return "the answer was larger than the transport reads"
        default: return "URLError \(code)"
        }
    }
}

/// Collects each task's answer body through the session's delegate, up to a limit: past it the
/// task is cancelled and completes with `URLError.dataLengthExceedsMaximum`, so an oversized
/// answer is never held whole.
final class BoundedBodies: NSObject, URLSessionDataDelegate, Sendable {
    typealias Completion = @Sendable (Data?, URLResponse?, (any Error)?) -> Void

    private struct Entry {
        var data = Data()
        var overflow = false
        var completion: Completion
    }

    let limit: Int
    private let entries = Mutex<[Int: Entry]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// Call before `resume()`.
    func register(_ task: URLSessionTask, completion: @escaping Completion) {
        entries.withLock { $0[task.taskIdentifier] = Entry(completion: completion) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let tooLarge = entries.withLock { entries -> Bool in
            guard var entry = entries[dataTask.taskIdentifier], !entry.overflow else { return false }
            if entry.data.count + data.count > limit {
                entry.overflow = true
                entry.data = Data()
            } else {
                entry.data.append(data)
            }
            entries[dataTask.taskIdentifier] = entry
            return entry.overflow
        }
        if tooLarge { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let entry = entries.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if entry.overflow {
            entry.completion(nil, task.response, URLError(.dataLengthExceedsMaximum))
        } else {
            entry.completion(error == nil ? entry.data : nil, task.response, error)
        }
    }
}

/// The state one exchange's three racers (the response, the timer, cancellation) share; the first
/// to `finish` wins, resumes the caller and stops the others.
private final class Exchange: Sendable {
    private struct State {
        var continuation: CheckedContinuation<TransportOutcome, Never>?
        var task: URLSessionDataTask?
        var timer: Task<Void, Never>?
        /// Set when finished before the continuation was installed (cancelled early).
        var early: TransportOutcome?
        var finished = false
    }

    private let state = Mutex(State())

    /// Keeps the continuation; `false` (and resumes it at once) when already finished.
    func install(_ continuation: CheckedContinuation<TransportOutcome, Never>) -> Bool {
        let early = state.withLock { state -> TransportOutcome? in
            if state.finished { return state.early ?? .cancelled }
            state.continuation = continuation
            return nil
        }
        if let early {
            continuation.resume(returning: early)
            return false
        }
        return true
    }

    /// Keeps the task and timer; `false` (and cancels the task) when already finished.
    func attach(task: URLSessionDataTask, timer: Task<Void, Never>) -> Bool {
        let finished = state.withLock { state -> Bool in
            if state.finished { return true }
            state.task = task
            state.timer = timer
            return false
        }
        if finished {
            task.cancel()
            timer.cancel()
        }
        return !finished
    }

    func finish(_ outcome: TransportOutcome) {
        let (continuation, task, timer) = state.withLock {
            state -> (CheckedContinuation<TransportOutcome, Never>?, URLSessionDataTask?, Task<Void, Never>?) in
            guard !state.finished else { return (nil, nil, nil) }
            state.finished = true
            if state.continuation == nil { state.early = outcome }
            defer {
                state.continuation = nil
                state.task = nil
                state.timer = nil
            }
            return (state.continuation, state.task, state.timer)
        }
        timer?.cancel()
        if case .response = outcome {} else { task?.cancel() }
        continuation?.resume(returning: outcome)
    }
}
