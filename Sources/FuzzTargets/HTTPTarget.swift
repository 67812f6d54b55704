import Foundation
import WorkerRuntime

/// `http`: the request head of the health endpoint (`HealthRequest.parse`), raw bytes off the socket.
///
/// The server parses what it has received after every read, so the input is parsed whole and at every
/// prefix (every prefix up to 1 KiB, beyond that at each line end). Invariants:
/// - statuses are only 400, 405, 431 and 505, and a parsed path starts with `/` and has no `?`;
/// - more bytes never undo a verdict: once a prefix is invalid, the whole input is invalid; once a prefix
///   is a complete request, the whole input is that same request.
enum HTTPTarget {
    static let target = FuzzTarget(
        name: "http",
        summary: "HealthRequest.parse, whole and at every prefix",
        run: run
    )

    private static let statuses: Set<Int> = [400, 405, 431, 505]

    static func run(_ data: Data) {
        let bytes = [UInt8](data)
        let whole = checked(bytes[...])
        for end in 0..<bytes.count where end <= 1024 || bytes[end - 1] == 0x0A {
            let prefix = checked(bytes[..<end])
            switch prefix {
            case .incomplete:
                break
            case .invalid:
                guard case .invalid = whole else {
                    fatalError(
                        "HealthRequest: the first \(end) bytes are \(prefix) but all \(bytes.count) are \(whole): "
                            + quoted(String(decoding: bytes, as: UTF8.self))
                    )
                }
            case .request:
                invariant(
                    whole == prefix,
                    "HealthRequest: the first \(end) bytes are \(prefix) but all \(bytes.count) are \(whole): "
                        + quoted(String(decoding: bytes, as: UTF8.self))
                )
            }
        }
    }

    private static func checked(_ bytes: ArraySlice<UInt8>) -> HealthRequest {
        let result = HealthRequest.parse(bytes)
        switch result {
        case .incomplete:
            break
        case .invalid(let status, let reason):
            invariant(statuses.contains(status), "HealthRequest: status \(status) (\(reason))")
        case .request(_, let path):
            invariant(path.hasPrefix("/") && !path.contains("?"), "HealthRequest: path \(quoted(path))")
        }
        return result
    }
}
