import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server on 127.0.0.1, for local fakes of outside services in tests and demos.
///
/// It binds an ephemeral port, accepts on a thread of its own and serves every connection on a
/// thread of its own, so no blocking socket call ever runs on Swift's cooperative pool. Each
/// request is handed to the async handler in a task; the connection thread waits for the answer.
/// Connections are kept alive (HTTP/1.1 default; `Connection: close` and HTTP/1.0 are honoured);
/// request bodies must come with `Content-Length` (a `Transfer-Encoding` body is refused with 411).
///
/// - Important: `stop()` (or the last reference going away) closes every connection, cancels the
///   handler tasks still running and joins the threads. A handler must not keep a strong reference
///   to its own server, or the server is never released before `stop()`.
public final class LoopbackHTTPServer: Sendable {
    /// Answers one request. Runs in a task of its own; it may suspend (e.g. `Task.sleep` to answer
    /// late) and is cancelled when the server stops.
    public typealias Handler = @Sendable (HTTPRequest) async -> HTTPResponse

    /// Bounds on what a client may send, and how long an idle connection is kept.
    public struct Limits: Sendable {
        /// The request line and header fields together, at most (431 beyond).
        public var maxHeaderBytes: Int = 65_536
        /// A request body, at most (413 beyond).
        public var maxBodyBytes: Int = 16 * 1_024 * 1_024
        /// An idle keep-alive connection is closed after this long.
        public var idleTimeout: Duration = .seconds(60)

        public init() {}
    }

    /// The bound port on 127.0.0.1.
    public let port: Int
    private let core: ServerCore

    /// Binds 127.0.0.1 on a free port and starts serving.
    /// - Parameters:
    ///   - name: names the threads (`<name>-accept`, `<name>-conn-<n>`), for debuggers and crash logs.
    ///   - limits: request size limits and the idle timeout.
    ///   - handler: answers every request.
    /// - Throws: `LoopbackHTTPError` when no socket can be bound.
    public init(
        name: String = "loopback-http",
        limits: Limits = Limits(),
        handler: @escaping Handler
    ) throws(LoopbackHTTPError) {
        let (listener, port) = try Socket.listenOnLoopback()
        self.port = port
        self.core = ServerCore(name: name, limits: limits, listener: listener, handler: handler)
        core.startAccepting()
    }

    deinit { core.stop() }

    /// `http://127.0.0.1:<port>`.
    public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Connections accepted since the start.
    public var connectionsAccepted: Int { core.statistics.accepted }

    /// Requests read completely (and handed to the handler or refused) since the start.
    public var requestsReceived: Int { core.statistics.requests }

    /// Connections open right now.
    public var openConnections: Int { core.statistics.open }

    /// Closes the listener and every connection, cancels running handlers and waits for the
    /// threads to finish. Idempotent; safe to call from any thread or task.
    public func stop() { core.stop() }

    /// Whether `stop()` has been called.
    public var isStopped: Bool { core.isStopping }
}

/// The server could not start.
public struct LoopbackHTTPError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(message: String) { self.message = message }

    public var description: String { "loopback http: \(message)" }
}

/// The shared state of a server; the threads hold this, never the `LoopbackHTTPServer`, so the
/// server's `deinit` can stop them.
final class ServerCore: Sendable {
    let name: String
    let limits: LoopbackHTTPServer.Limits
    let handler: LoopbackHTTPServer.Handler
    private let listener: Int32
    private let state = Mutex(State())
    private let threads = DispatchGroup()

    private struct State {
        var stopping = false
        var nextID = 0
        var connections: [Int: Int32] = [:]
        var pending: [Int: PendingHandler] = [:]
        var accepted = 0
        var requests = 0
    }

    private struct PendingHandler {
        var slot: ResponseSlot
        var task: Task<Void, Never>
    }

    init(
        name: String,
        limits: LoopbackHTTPServer.Limits,
        listener: Int32,
        handler: @escaping LoopbackHTTPServer.Handler
    ) {
        self.name = name
        self.limits = limits
        self.listener = listener
        self.handler = handler
    }

    var isStopping: Bool { state.withLock { $0.stopping } }

    var statistics: (accepted: Int, requests: Int, open: Int) {
        state.withLock { ($0.accepted, $0.requests, $0.connections.count) }
    }

    func startAccepting() {
        threads.enter()
        let thread = Thread { [self] in
            acceptLoop()
            threads.leave()
        }
        thread.name = "\(name)-accept"
        thread.start()
    }

    func stop() {
        state.withLock { state in
            guard !state.stopping else { return }
            state.stopping = true
            // Under the lock, so a descriptor is never shut down after its thread closed it
            // (and the number was reused).
            for descriptor in state.connections.values { _ = shutdown(descriptor, Int32(SHUT_RDWR)) }
            for pending in state.pending.values {
                pending.slot.resolve(.abandoned)
                pending.task.cancel()
            }
        }
        // The accept loop notices within one poll interval and closes the listener.
        _ = threads.wait(timeout: .now() + .seconds(10))
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !isStopping {
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 50)
            guard ready > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            Socket.configureAccepted(client)
            let id = state.withLock { state -> Int? in
                guard !state.stopping else { return nil }
                state.nextID += 1
                state.accepted += 1
                state.connections[state.nextID] = client
                return state.nextID
            }
            guard let id else {
                close(client)
                return
            }
            threads.enter()
            let thread = Thread { [self] in
                Connection(core: self, descriptor: client).serve()
                closeConnection(id)
                threads.leave()
            }
            thread.name = "\(name)-conn-\(id)"
            thread.start()
        }
    }

    private func closeConnection(_ id: Int) {
        state.withLock { state in
            if let descriptor = state.connections.removeValue(forKey: id) { close(descriptor) }
        }
    }

    func countRequest() { state.withLock { $0.requests += 1 } }

    /// Runs the handler in a task and blocks this (connection) thread until it answers or the
    /// server stops.
    func respond(to request: HTTPRequest) -> ResponseSlot.Outcome {
        let slot = ResponseSlot()
        let handler = self.handler
        let key = state.withLock { state -> Int? in
            guard !state.stopping else { return nil }
            state.nextID += 1
            let task = Task.detached {
                let response = await handler(request)
                slot.resolve(.response(response))
            }
            state.pending[state.nextID] = PendingHandler(slot: slot, task: task)
            return state.nextID
        }
        guard let key else { return .abandoned }
        let outcome = slot.wait()
        _ = state.withLock { $0.pending.removeValue(forKey: key) }
        return outcome
    }
}

/// One handler's answer, handed from its task to the waiting connection thread.
final class ResponseSlot: Sendable {
    enum Outcome: Sendable {
        case response(HTTPResponse)
        /// The server stopped before the handler answered.
        case abandoned
    }

    private let outcome = Mutex<Outcome?>(nil)
    private let signal = DispatchSemaphore(value: 0)

    func resolve(_ value: Outcome) {
        let first = outcome.withLock { current -> Bool in
            guard current == nil else { return false }
            current = value
            return true
        }
        if first { signal.signal() }
    }

    func wait() -> Outcome {
        signal.wait()
        return outcome.withLock { $0 } ?? .abandoned
    }
}
