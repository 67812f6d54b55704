import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one HTTP exchange came to.
enum TransportOutcome: Sendable {
    /// `retryAfter` is the `Retry-After` header, `retryAfterMilliseconds` the `retry-after-ms` one
    /// (OpenAI's, more precise).
    case response(status: Int, retryAfter: String?, retryAfterMilliseconds: String?, body: Data)
    /// No complete answer within the attempt's timeout (the request was cancelled).
    case timedOut
    /// The connection failed; `code` is the `URLError` code.
    case failed(code: Int, summary: String)
    /// The calling task was cancelled.
    case cancelled
}

/// Runs one request on a `URLSession` with a timeout of our own.
///
/// On Linux, FoundationNetworking turns `URLRequest.timeoutInterval` into whole seconds
/// (`Int(timeoutInterval) * 1000` ms), so 0.5 s would become 0 and fail at once, and it is an idle
/// timeout besides. So the request carries a generous whole-second backstop and a timer of ours
/// cancels the task at the exact per-attempt timeout.
struct Transport: Sendable {
    let session: URLSession

    static func makeSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        // Completions take seconds; many are in flight at once on one client.
        configuration.httpMaximumConnectionsPerHost = 64
        return URLSession(configuration: configuration)
    }

    func send(_ request: URLRequest, timeout: Duration) async -> TransportOutcome {
        var request = request
        request.timeoutInterval = (timeout.seconds.rounded(.up) + 1).clamped(to: 2...600)
        let exchange = Exchange()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<TransportOutcome, Never>) in
                guard exchange.install(continuation) else { return }
                let task = session.dataTask(with: request) { data, response, error in
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
        return .response(
            status: http.statusCode,
            retryAfter: http.value(forHTTPHeaderField: "Retry-After"),
            retryAfterMilliseconds: http.value(forHTTPHeaderField: "retry-after-ms"),
            body: data ?? Data()
        )
    }

    /// A short phrase for a `URLError` code (the localized descriptions differ by platform).
    static func summary(code: Int) -> String {
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
        default: return "URLError \(code)"
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

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    static func seconds(double value: Double) -> Duration {
        .nanoseconds(Int64((value * 1e9).rounded()))
    }
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self { min(max(self, range.lowerBound), range.upperBound) }
}
