import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Serves the requests of one accepted connection, one after another, on the calling thread.
struct Connection {
    let core: ServerCore
    let descriptor: Int32

    /// Returns when the connection should be closed (the caller closes the descriptor).
    func serve() {
        var buffer: [UInt8] = []
        while !core.isStopping {
            guard let headEnd = readHead(&buffer) else { return }
            let head: RequestHead
            do {
                head = try RequestHeadParser.parse(buffer[0..<headEnd], maxBodyBytes: core.limits.maxBodyBytes)
            } catch {
                core.countRequest()
                write(.text(status: error.status, error.message + "\n"), keepAlive: false, isHead: false)
                return
            }
            if head.expectsContinue && buffer.count - headEnd < head.contentLength {
                guard Socket.sendAll(descriptor, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return }
            }
            while buffer.count - headEnd < head.contentLength {
                guard readMore(&buffer) else { return }
            }
            let body = Data(buffer[headEnd..<(headEnd + head.contentLength)])
            buffer.removeFirst(headEnd + head.contentLength)
            core.countRequest()

            let request = HTTPRequest(
                method: head.method,
                path: head.path,
                query: head.query,
                headers: head.headers,
                body: body,
                version: head.version
            )
            guard case .response(let response) = core.respond(to: request) else { return }
            switch response.disposition {
            case .closeWithoutResponse:
                return
            case .hangUntilStopped:
                hang()
                return
            case .respond:
                let closeRequested = response.headers.values(for: "Connection").contains {
                    $0.lowercased().contains("close")
                }
                let keepAlive = head.keepAlive && !closeRequested && !core.isStopping
                guard write(response, keepAlive: keepAlive, isHead: head.method == "HEAD", version: head.version),
                    keepAlive
                else { return }
            }
        }
    }

    /// Reads until the buffer holds a whole request head; `nil` when the connection is done (closed,
    /// idle too long, server stopping, or a head over the limit, which is answered with 431).
    private func readHead(_ buffer: inout [UInt8]) -> Int? {
        var searched = 0
        while true {
            if let end = RequestHeadParser.headEnd(in: buffer, searchingFrom: searched) { return end }
            if buffer.count > core.limits.maxHeaderBytes {
                core.countRequest()
                write(
                    .text(status: 431, "the request head is over \(core.limits.maxHeaderBytes) bytes\n"),
                    keepAlive: false,
                    isHead: false
                )
                return nil
            }
            searched = buffer.count
            guard readMore(&buffer) else { return nil }
        }
    }

    /// Waits for more bytes in slices of 100 ms (to notice a stop) up to the idle timeout.
    private func readMore(_ buffer: inout [UInt8]) -> Bool {
        let idle = core.limits.idleTimeout
        let idleMilliseconds = idle.components.seconds * 1_000 + idle.components.attoseconds / 1_000_000_000_000_000
        var waited: Int64 = 0
        while !core.isStopping {
            switch Socket.read(descriptor, into: &buffer, timeoutMilliseconds: 100) {
            case .data:
                return true
            case .closed:
                return false
            case .timedOut:
                waited += 100
                if waited >= idleMilliseconds { return false }
            }
        }
        return false
    }

    /// Keeps the connection open and silent until the peer closes it or the server stops.
    private func hang() {
        while !core.isStopping {
            var waiting = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&waiting, 1, 100)
            guard ready > 0 else { continue }
            if Socket.peerClosed(descriptor) { return }
            if waiting.revents & Int16(POLLHUP | POLLERR) != 0 { return }
            // Bytes are waiting (a pipelined request nobody will answer): just keep hanging.
            _ = poll(nil, 0, 100)
        }
    }

    @discardableResult
    private func write(_ response: HTTPResponse, keepAlive: Bool, isHead: Bool, version: String = "HTTP/1.1") -> Bool {
        let bodyAllowed = !(response.status == 204 || response.status == 304 || (100..<200).contains(response.status))
        var head = "HTTP/1.1 \(response.status) \(HTTPResponse.reasonPhrase(response.status))\r\n"
        for field in response.headers {
            let name = field.name.lowercased()
            if name == "content-length" || name == "transfer-encoding" || name == "connection" { continue }
            head += "\(field.name): \(field.value)\r\n"
        }
        if bodyAllowed { head += "Content-Length: \(response.body.count)\r\n" }
        if !keepAlive {
            head += "Connection: close\r\n"
        } else if version == "HTTP/1.0" {
            head += "Connection: keep-alive\r\n"
        }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if bodyAllowed && !isHead { bytes.append(contentsOf: response.body) }
        return Socket.sendAll(descriptor, bytes)
    }
}
