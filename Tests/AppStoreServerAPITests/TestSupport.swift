import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(Glibc)
private let systemSend = Glibc.send
#elseif canImport(Darwin)
private let systemSend = Darwin.send
#endif

/// Runs blocking work (raw sockets) on a thread of its own, never on the cooperative pool.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}

/// Seconds since `start`.
func elapsed(since start: ContinuousClock.Instant) -> Double {
    let duration = ContinuousClock.now - start
    return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// A URLSession that allows many connections per host (Linux's default is 6).
func makeTestSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = 32
    configuration.urlCache = nil
    return URLSession(configuration: configuration)
}

/// GET/POST through URLSession with a completion handler (the async API differs across platforms).
func fetch(
    _ session: URLSession,
    _ url: URL,
    method: String = "GET",
    headers: [String: String] = [:],
    body: Data? = nil
) async -> (status: Int, headers: [String: String], body: Data, error: URLError?) {
    var request = URLRequest(url: url)
    request.httpMethod = method
    request.httpBody = body
    request.timeoutInterval = 10
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return await withCheckedContinuation { continuation in
        let task = session.dataTask(with: request) { data, response, error in
            let http = response as? HTTPURLResponse
            var fields: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] {
                fields[String(describing: name).lowercased()] = String(describing: value)
            }
            continuation.resume(
                returning: (http?.statusCode ?? 0, fields, data ?? Data(), error as? URLError)
            )
        }
        task.resume()
    }
}

/// A response read off a raw socket.
struct RawResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: String
}

/// A blocking HTTP/1.1 client on one TCP connection, for what URLSession hides (keep-alive,
/// pipelining, malformed requests). Use it only inside `onThread`.
final class RawConnection {
    let descriptor: Int32
    private var buffer: [UInt8] = []

    init?(port: Int) {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { systemSend(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            sent += count
        }
    }

    /// Reads more bytes; `false` on EOF, error or timeout.
    private func fill(timeoutMilliseconds: Int32) -> Bool {
        var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&waiting, 1, timeoutMilliseconds) > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    /// Reads one response (head and Content-Length body); `nil` when the connection closed or
    /// stayed silent for `timeoutMilliseconds` first (by default long enough for a loaded
    /// machine: a test expecting silence gives a short one).
    func readResponse(timeoutMilliseconds: Int32 = 30_000) -> RawResponse? {
        while true {
            if let end = headEnd() {
                let head = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
                let statusLine = lines.removeFirst()
                let status = Int(statusLine.split(separator: " ")[1]) ?? 0
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                        .trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                while buffer.count < end + length {
                    guard fill(timeoutMilliseconds: timeoutMilliseconds) else { return nil }
                }
                let body = String(decoding: buffer[end..<(end + length)], as: UTF8.self)
                buffer.removeFirst(end + length)
                return RawResponse(status: status, headers: headers, body: body)
            }
            guard fill(timeoutMilliseconds: timeoutMilliseconds) else { return nil }
        }
    }

    /// Whether the server closed the connection (EOF) within `timeoutMilliseconds`, with no bytes.
    func closedByServer(timeoutMilliseconds: Int32 = 30_000) -> Bool {
        guard buffer.isEmpty else { return false }
        var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&waiting, 1, timeoutMilliseconds) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(descriptor, &byte, 1, 0) == 0
    }

    private func headEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}
