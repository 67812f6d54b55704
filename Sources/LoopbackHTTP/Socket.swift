import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few POSIX socket calls the server makes, in one place.
enum Socket {
    #if canImport(Darwin)
    static let streamType = SOCK_STREAM
    static let sendFlags: Int32 = 0
    #else
    static let streamType = Int32(SOCK_STREAM.rawValue)
    static let sendFlags = Int32(MSG_NOSIGNAL)
    #endif

    /// A listening socket on 127.0.0.1 and the port the system picked.
    static func listenOnLoopback() throws(LoopbackHTTPError) -> (Int32, Int) {
        let descriptor = socket(AF_INET, streamType, 0)
        guard descriptor >= 0 else { throw LoopbackHTTPError(message: "socket() failed: \(errnoText())") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else {
            let reason = errnoText()
            close(descriptor)
            throw LoopbackHTTPError(message: "cannot listen on 127.0.0.1: \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else {
            let reason = errnoText()
            close(descriptor)
            throw LoopbackHTTPError(message: "getsockname() failed: \(reason)")
        }
        return (descriptor, Int(UInt16(bigEndian: actual.sin_port)))
    }

    /// No Nagle delay (small responses go out at once); no SIGPIPE on Darwin; a send that stalls
    /// for 10 s gives up.
    static func configureAccepted(_ descriptor: Int32) {
        var yes: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes every byte; `false` when the peer is gone or the send timed out.
    static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, sendFlags) }
            if count > 0 {
                sent += count
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    enum ReadResult {
        case data(Int)
        case closed
        case timedOut
    }

    /// Waits up to `timeoutMilliseconds` for bytes and appends what arrives to `buffer`.
    static func read(_ descriptor: Int32, into buffer: inout [UInt8], timeoutMilliseconds: Int32) -> ReadResult {
        var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&waiting, 1, timeoutMilliseconds)
        if ready == 0 { return .timedOut }
        if ready < 0 { return errno == EINTR ? .data(0) : .closed }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count > 0 {
            buffer.append(contentsOf: chunk[0..<count])
            return .data(count)
        }
        if count < 0 && (errno == EINTR || errno == EAGAIN) { return .data(0) }
        return .closed
    }

    /// Whether the peer has closed its side (a non-blocking peek that reads nothing).
    static func peerClosed(_ descriptor: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if count == 0 { return true }
        if count < 0 { return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) }
        return false
    }
}

func errnoText() -> String { String(cString: strerror(errno)) }
