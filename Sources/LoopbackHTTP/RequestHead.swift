import Foundation

/// The parsed start line and header fields of one request.
struct RequestHead: Sendable, Equatable {
    var method: String
    var path: String
    var query: String?
    var version: String
    var headers: HTTPHeaders
    var contentLength: Int
    var keepAlive: Bool
    var expectsContinue: Bool
}

/// Why a request head was refused: the status to answer with and a one-line explanation.
struct RequestHeadRejection: Error, Sendable, Equatable {
    var status: Int
    var message: String
}

enum RequestHeadParser {
    static let terminator: [UInt8] = [13, 10, 13, 10]

    /// The index just past the blank line that ends the head, if the buffer holds a whole head.
    static func headEnd(in buffer: [UInt8], searchingFrom start: Int = 0) -> Int? {
        guard buffer.count >= 4 else { return nil }
        var index = max(0, start - 3)
        while index + 4 <= buffer.count {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 {
                return index + 4
            }
            index += 1
        }
        return nil
    }

    /// Parses a head (the bytes up to and including the blank line).
    /// - Throws: `RequestHeadRejection` with the status to answer (400, 411, 413, 505).
    static func parse(_ bytes: ArraySlice<UInt8>, maxBodyBytes: Int) throws(RequestHeadRejection) -> RequestHead {
        guard let text = String(bytes: bytes, encoding: .utf8) ?? String(bytes: bytes, encoding: .isoLatin1) else {
            throw RequestHeadRejection(status: 400, message: "the request head is not text")
        }
        var lines = text.components(separatedBy: "\r\n")
        while lines.last == "" { lines.removeLast() }
        guard let requestLine = lines.first, !requestLine.isEmpty else {
            throw RequestHeadRejection(status: 400, message: "the request line is missing")
        }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw RequestHeadRejection(status: 400, message: "malformed request line \(requestLine.debugDescription)")
        }
        let method = String(parts[0])
        let version = String(parts[2])
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw RequestHeadRejection(status: 505, message: "only HTTP/1.1 and HTTP/1.0 are supported, not \(version)")
        }
        let (path, query) = try splitTarget(String(parts[1]))

        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            if line.first == " " || line.first == "\t" {
                throw RequestHeadRejection(status: 400, message: "folded header lines are not supported")
            }
            guard let colon = line.firstIndex(of: ":") else {
                throw RequestHeadRejection(status: 400, message: "malformed header line \(line.debugDescription)")
            }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "\t" }) else {
                throw RequestHeadRejection(status: 400, message: "malformed header name \(name.debugDescription)")
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.add(name: name, value: value)
        }

        if headers.contains("Transfer-Encoding") {
            throw RequestHeadRejection(
                status: 411,
                message: "request bodies with Transfer-Encoding (chunked) are not supported; send Content-Length"
            )
        }
        let lengths = Set(
            headers.values(for: "Content-Length").flatMap { $0.split(separator: ",") }.map {
                $0.trimmingCharacters(in: .whitespaces)
            }
        )
        var contentLength = 0
        if !lengths.isEmpty {
            guard lengths.count == 1, let only = lengths.first, let length = Int(only), length >= 0,
                only.allSatisfy(\.isASCII)
            else {
                throw RequestHeadRejection(status: 400, message: "invalid Content-Length \(lengths.sorted())")
            }
            contentLength = length
        }
        guard contentLength <= maxBodyBytes else {
            throw RequestHeadRejection(
                status: 413,
                message: "the body of \(contentLength) bytes is over the limit of \(maxBodyBytes)"
            )
        }

        let connection = headers.values(for: "Connection").flatMap { $0.split(separator: ",") }.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        }
        let keepAlive =
            version == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
        let expectsContinue = headers["Expect"]?.lowercased() == "100-continue"
        return RequestHead(
            method: method,
            path: path,
            query: query,
            version: version,
            headers: headers,
            contentLength: contentLength,
            keepAlive: keepAlive,
            expectsContinue: expectsContinue
        )
    }

    /// Splits an origin-form (`/a?b`) or absolute-form (`http://host/a?b`) target into path and query.
    static func splitTarget(_ target: String) throws(RequestHeadRejection) -> (String, String?) {
        var rest = Substring(target)
        if !rest.hasPrefix("/") && rest != "*" {
            guard let schemeEnd = rest.range(of: "://") else {
                throw RequestHeadRejection(status: 400, message: "malformed request target \(target.debugDescription)")
            }
            let afterScheme = rest[schemeEnd.upperBound...]
            rest = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }).map { afterScheme[$0...] } ?? "/"
            if rest.hasPrefix("?") { rest = Substring("/" + rest) }
        }
        if let mark = rest.firstIndex(of: "?") {
            return (String(rest[..<mark]), String(rest[rest.index(after: mark)...]))
        }
        return (String(rest), nil)
    }
}
