import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A minimal HTTP/1.1 server for `/healthz`, `/readyz` and `/metrics`.
///
/// Probes and scrapes are a few small GET requests a minute, so the server is a plain blocking
/// socket loop on a thread of its own (never on the concurrency pool), answering one request
/// per connection. A full HTTP stack would cost minutes of build time for nothing more.
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

    /// Answers a GET for a path; runs on the server's thread, so it must be quick and
    /// non-blocking (read snapshots, render metrics).
    public typealias Router = @Sendable (_ path: String) -> Response?

    private let host: String
    private let requestedPort: Int
    private let router: Router
    private let logger: Logger
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
    public init(host: String, port: Int, logger: Logger, router: @escaping Router) {
        self.host = host
        self.requestedPort = port
        self.router = router
        self.logger = logger
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
        address.sin_port = in_port_t(UInt16(requestedPort).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            close(descriptor)
            throw HealthServerError(message: "HTTP_HOST \(host.debugDescription) is not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 64) == 0 else {
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

    private func serve(_ listener: Int32) {
        while !state.withLock({ $0.stopping }) {
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 200)
            guard ready > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            handle(client)
            close(client)
        }
        close(listener)
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.finished = true
            defer { state.stopped = nil }
            return state.stopped
        }
        waiter?.resume()
    }

    private func handle(_ client: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 2048)
        // Read the request head only; these endpoints take no body.
        while request.count < 16_384 {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            request.append(contentsOf: buffer[0..<count])
            if request.count >= 4, request.suffix(4).elementsEqual([13, 10, 13, 10]) { break }
            if let text = String(bytes: request, encoding: .utf8), text.contains("\r\n\r\n") { break }
        }
        let response = respond(to: String(decoding: request, as: UTF8.self))
        let head =
            "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
            + "Content-Type: \(response.contentType)\r\nContent-Length: \(response.body.utf8.count)\r\n"
            + "Connection: close\r\n\r\n"
        let bytes = Array((head + response.body).utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { break }
            sent += count
        }
    }

    func respond(to request: String) -> Response {
        let requestLine = request.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count >= 2 else { return Response(status: 400, body: "bad request\n") }
        guard parts[0] == "GET" || parts[0] == "HEAD" else {
            return Response(status: 405, body: "only GET is supported\n")
        }
        let path = String(parts[1].split(separator: "?", maxSplits: 1).first ?? "")
        return router(path) ?? Response(status: 404, body: "not found: try /healthz, /readyz or /metrics\n")
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 503: return "Service Unavailable"
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
