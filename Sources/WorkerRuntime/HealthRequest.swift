/// The request head of a health, readiness or metrics probe, parsed strictly from raw bytes.
///
/// The health endpoint serves GET and HEAD without bodies, so only the request line matters;
/// header lines are checked for shape (no control characters, a colon) and skipped. Every
/// input gives one of the defined results below, whatever its bytes and length.
public enum HealthRequest: Sendable, Equatable {
    /// The head is not complete yet: read more (within the size and time limits).
    case incomplete
    /// A complete head.
    case request(method: Method, path: String)
    /// A head that can never become valid: answer with this status and close.
    case invalid(status: Int, reason: String)

    /// The methods the endpoint knows; anything else is 405.
    public enum Method: String, Sendable {
        case get = "GET"
        case head = "HEAD"
    }

    /// The largest request head accepted, in bytes; a longer one is answered 431.
    public static let maximumHeadBytes = 8192

    /// Parses the bytes received so far on a connection.
    /// - Parameter bytes: everything received, from the first byte.
    /// - Returns: `.incomplete` until the blank line ending the head has arrived (and the
    ///   bytes are still within `maximumHeadBytes`), then the request or why it is invalid.
    public static func parse(_ bytes: some Collection<UInt8>) -> HealthRequest {
        let bytes = Array(bytes.prefix(maximumHeadBytes + 4))
        guard let end = headEnd(bytes) else {
            if bytes.count > maximumHeadBytes {
                return .invalid(status: 431, reason: "request head larger than \(maximumHeadBytes) bytes")
            }
            // A request line that is already wrong need not wait for the rest.
            if let lineEnd = bytes.firstIndex(of: 10) {
                if case .invalid(let status, let reason) = requestLine(bytes[..<lineEnd]) {
                    return .invalid(status: status, reason: reason)
                }
            } else if bytes.contains(where: { $0 == 0 || ($0 < 32 && $0 != 13 && $0 != 9) || $0 == 127 }) {
                return .invalid(status: 400, reason: "control character in the request line")
            }
            return .incomplete
        }
        guard end <= maximumHeadBytes else {
            return .invalid(status: 431, reason: "request head larger than \(maximumHeadBytes) bytes")
        }
        let head = bytes[..<end]
        // Each line loses one CR before its LF, here and only here: a second CR is a control
        // character whether the head arrives whole or in pieces.
        var lines = head.split(separator: 10, omittingEmptySubsequences: false).map { line in
            line.last == 13 ? line.dropLast() : line
        }
        // The head ends with an empty line, which split leaves at the end.
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let first = lines.first else { return .invalid(status: 400, reason: "empty request") }
        if first.contains(13) { return .invalid(status: 400, reason: "control character in the request line") }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                !line[..<colon].contains(where: { $0 <= 32 || $0 >= 127 }),
                !line.contains(where: { ($0 < 32 && $0 != 9) || $0 == 127 })
            else {
                return .invalid(status: 400, reason: "malformed header line")
            }
        }
        return requestLine(first)
    }

    /// Where the head ends (just past its blank line), if it has.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index < bytes.count {
            if bytes[index] == 10 {
                // "\n\n" or "\n\r\n" ends the head.
                if index + 1 < bytes.count, bytes[index + 1] == 10 { return index + 2 }
                if index + 2 < bytes.count, bytes[index + 1] == 13, bytes[index + 2] == 10 { return index + 3 }
            }
            index += 1
        }
        return nil
    }

    private static func requestLine(_ raw: some Collection<UInt8>) -> HealthRequest {
        var line = Array(raw)
        if line.last == 13 { line.removeLast() }
        guard !line.contains(where: { $0 < 32 || $0 == 127 }) else {
            return .invalid(status: 400, reason: "control character in the request line")
        }
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            return .invalid(status: 400, reason: "malformed request line")
        }
        guard parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8) else {
            return .invalid(status: 505, reason: "only HTTP/1.0 and HTTP/1.1")
        }
        guard parts[0].allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }) else {
            return .invalid(status: 400, reason: "malformed method")
        }
        guard let method = Method(rawValue: String(decoding: parts[0], as: UTF8.self)) else {
            return .invalid(status: 405, reason: "only GET and HEAD")
        }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            return .invalid(status: 400, reason: "the request target must be a path")
        }
        let path = target.split(separator: UInt8(ascii: "?"), maxSplits: 1, omittingEmptySubsequences: false).first
        return .request(method: method, path: String(decoding: path ?? [], as: UTF8.self))
    }
}
