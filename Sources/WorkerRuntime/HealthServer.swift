import AstroDomain
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP/1.1 server for `/healthz`, `/readyz` and `/metrics`.
///
/// Probes and scrapes are a few small GET requests a minute, so one thread of its own (never
/// the concurrency pool) serves every connection from a `poll` loop on non-blocking sockets,
/// answering one request per connection. Whatever clients do, it keeps answering: each
/// connection must deliver its request head within `Limits.requestDeadline` (a client
/// trickling a byte a second is cut off), a head over 8 KiB is answered 431 without reading
/// further, and at most `Limits.maxConnections` are open at once — past that the oldest one
/// that has sent nothing is closed to make room. A request already in the socket when its
/// connection is accepted (a probe's usually is) is answered at once, so even a sustained flood
/// of connections cannot lock probes out; out of file descriptors, accepting pauses briefly
/// instead of spinning.
public final class HealthServer: Service, Sendable {
    /// One response.
    public struct Response: Sendable {
        public var status: Int
        public var contentType: String
        public var body: String

        public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: String) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }
    }

    /// Bounds on what a client can hold.
    public struct Limits: Sendable {
        /// Connections open at once; a new one past this closes the oldest.
        public var maxConnections: Int = 64
        /// From accept to the last byte of the response.
        public var requestDeadline: Duration = .seconds(5)

        public init(maxConnections: Int = 64, requestDeadline: Duration = .seconds(5)) {
            self.maxConnections = max(1, maxConnections)
            self.requestDeadline = requestDeadline
        }
    }

    /// Answers a GET for a path; runs on the server's thread, so it must be quick and
    /// non-blocking (read snapshots, render metrics).
    public typealias Router = @Sendable (_ path: String) -> Response?

    private let host: String
    private let requestedPort: Int
    private let router: Router
    private let logger: Logger
    private let limits: Limits
    private let state = Mutex<State>(State())

    private struct State {
        var socket: Int32 = -1
        var port: Int?
        var stopping = false
        var stopped: CheckedContinuation<Void, Never>?
        var finished = false
    }

    /// - Parameters:
    ///   - host: address to bind (`0.0.0.0` for every interface, `127.0.0.1` for loopback).
    ///   - port: port to bind; 0 picks a free one (see `boundPort`).
    ///   - limits: connection bounds (the defaults suit probes and scrapes).
    public init(host: String, port: Int, limits: Limits = Limits(), logger: Logger, router: @escaping Router) {
        self.host = host
        self.requestedPort = port
        self.router = router
        self.logger = logger
        self.limits = limits
    }

    /// The port actually bound, once `start()` returned.
    public var boundPort: Int? { state.withLock { $0.port } }

    /// Binds and starts serving on a new thread.
    /// - Throws: `HealthServerError` when the address cannot be bound (e.g. the port is in use).
    public func start() throws(HealthServerError) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HealthServerError(message: "socket() failed: \(errnoText())") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(clamping: requestedPort).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            close(descriptor)
            throw HealthServerError(message: "HTTP_HOST \(InputQuote.short(host)) is not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 128) == 0, Self.setNonBlocking(descriptor) else {
            let reason = errnoText()
            close(descriptor)
            throw HealthServerError(message: "cannot listen on \(host):\(requestedPort): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: actual.sin_port))
        state.withLock {
            $0.socket = descriptor
            $0.port = port
        }
        let thread = Thread { [self] in serve(descriptor) }
        thread.name = "health-http"
        thread.start()
        logger.info("health endpoint listening", metadata: ["http.port": "\(port)"])
    }

    /// Serves until graceful shutdown (the health server is the last service to stop, so probes
    /// answer during the drain).
    public func run() async throws {
        if boundPort == nil { try start() }
        try? await gracefulShutdown()
        await stop()
    }

    /// Stops the loop and closes the socket; returns once the thread has finished.
    public func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyFinished = state.withLock { state -> Bool in
                state.stopping = true
                if state.finished || state.socket < 0 { return true }
                state.stopped = continuation
                return false
            }
            if alreadyFinished { continuation.resume() }
        }
    }

    /// One client connection: what it sent so far, then the response being written.
    private struct Connection {
        var descriptor: Int32
        var deadline: ContinuousClock.Instant
        var accepted: UInt64
        var input: [UInt8] = []
        var output: [UInt8]?
        var sent = 0
    }

    private func serve(_ listener: Int32) {
        var connections: [Connection] = []
        var accepted: UInt64 = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        // Out of descriptors (EMFILE/ENFILE), the listener stays readable: accepting pauses
        // instead of spinning, and says so at most every ten seconds.
        var acceptPausedUntil: ContinuousClock.Instant?
        var lastDescriptorWarning: ContinuousClock.Instant?
        while !state.withLock({ $0.stopping }) {
            let accepting = acceptPausedUntil.map { ContinuousClock.now >= $0 } ?? true
            var descriptors = [pollfd(fd: listener, events: accepting ? Int16(POLLIN) : 0, revents: 0)]
            for connection in connections {
                let events = connection.output == nil ? POLLIN : POLLOUT
                descriptors.append(pollfd(fd: connection.descriptor, events: Int16(events), revents: 0))
            }
            _ = poll(&descriptors, nfds_t(descriptors.count), 100)
            let now = ContinuousClock.now

            // Clients first, then new connections: a probe accepted in the last round is read
            // before new arrivals can push it out.
            var closing = Set<Int32>()
            for (index, descriptor) in descriptors.enumerated().dropFirst() where descriptor.revents != 0 {
                let position = index - 1
                if !serviceConnection(&connections[position], buffer: &buffer) {
                    closing.insert(connections[position].descriptor)
                }
            }
            for connection in connections where connection.deadline <= now {
                closing.insert(connection.descriptor)
            }
            if !closing.isEmpty {
                for descriptor in closing { close(descriptor) }
                connections.removeAll { closing.contains($0.descriptor) }
            }

            if accepting, descriptors[0].revents & Int16(POLLIN) != 0 {
                acceptPausedUntil = nil
                for _ in 0..<16 {
                    let client = accept(listener, nil, nil)
                    guard client >= 0 else {
                        let code = errno
                        if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
                            acceptPausedUntil = now + .milliseconds(100)
                            if lastDescriptorWarning.map({ now - $0 >= .seconds(10) }) ?? true {
                                lastDescriptorWarning = now
                                logger.warning(
                                    "health endpoint cannot accept: \(String(cString: strerror(code))); pausing",
                                    metadata: ["http.open_connections": "\(connections.count)"]
                                )
                            }
                        }
                        break
                    }
                    guard Self.setNonBlocking(client) else {
                        close(client)
                        continue
                    }
                    accepted += 1
                    var connection = Connection(
                        descriptor: client,
                        deadline: now + limits.requestDeadline,
                        accepted: accepted
                    )
                    // A probe's request is usually in the socket by the time it is accepted:
                    // answered at once, it never waits behind a flood of other connections.
                    guard serviceConnection(&connection, buffer: &buffer) else {
                        close(client)
                        continue
                    }
                    if connections.count >= limits.maxConnections, let victim = Self.evictionVictim(connections) {
                        close(connections[victim].descriptor)
                        connections.remove(at: victim)
                        logger.debug("health endpoint at its connection limit; closed an idle connection")
                    }
                    connections.append(connection)
                }
            }
        }
        for connection in connections { close(connection.descriptor) }
        close(listener)
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.finished = true
            defer { state.stopped = nil }
            return state.stopped
        }
        waiter?.resume()
    }

    /// The connection to close for a new one: the oldest that has sent nothing yet (an idle
    /// flood), else the oldest.
    private static func evictionVictim(_ connections: [Connection]) -> Int? {
        let silent = connections.indices.filter { connections[$0].input.isEmpty && connections[$0].output == nil }
        let candidates = silent.isEmpty ? Array(connections.indices) : silent
        return candidates.min { connections[$0].accepted < connections[$1].accepted }
    }

    /// Reads or writes what the socket allows. Returns false when the connection is done.
    private func serviceConnection(_ connection: inout Connection, buffer: inout [UInt8]) -> Bool {
        if connection.output == nil {
            // Read no more than the head limit (plus its terminator) allows.
            let room = HealthRequest.maximumHeadBytes + 4 - connection.input.count
            let count = buffer.withUnsafeMutableBytes {
                recv(connection.descriptor, $0.baseAddress, min(room, $0.count), 0)
            }
            if count == 0 { return false }
            if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
            connection.input.append(contentsOf: buffer[0..<count])
            switch HealthRequest.parse(connection.input) {
            case .incomplete:
                if connection.input.count < HealthRequest.maximumHeadBytes + 4 { return true }
                connection.output = Self.encode(Response(status: 431, body: "request head too large\n"), head: false)
            case .invalid(let status, let reason):
                connection.output = Self.encode(Response(status: status, body: reason + "\n"), head: false)
            case .request(let method, let path):
                connection.output = Self.encode(respond(path: path), head: method == .head)
            }
            connection.input = []
        }
        guard let output = connection.output else { return true }
        let count = output[connection.sent...].withUnsafeBytes {
            send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
        if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
        connection.sent += count
        return connection.sent < output.count
    }

    /// The response to a GET or HEAD of `path`.
    func respond(path: String) -> Response {
        router(path) ?? Response(status: 404, body: "not found: try /healthz, /readyz or /metrics\n")
    }

    static func encode(_ response: Response, head: Bool) -> [UInt8] {
        let text =
            "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
            + "Content-Type: \(response.contentType)\r\nContent-Length: \(response.body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n"
        return Array(text.utf8) + (head ? [] : Array(response.body.utf8))
    }

    static func setNonBlocking(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL, 0)
        return flags >= 0 && fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 431: return "Request Header Fields Too Large"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}

/// The health endpoint could not start.
public struct HealthServerError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { "health endpoint: \(message)" }
}

private func errnoText() -> String { String(cString: strerror(errno)) }
