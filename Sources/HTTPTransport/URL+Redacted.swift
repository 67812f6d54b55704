import Foundation

extension URL {
    /// The URL for an error message or a log line: scheme, host, port and path only. A user,
    /// password, query or fragment can carry a key (`?api-key=…`) and is left out.
    public var redactedForMessages: String {
        var components = URLComponents()
        components.scheme = scheme
        components.host = host
        components.port = port
        components.path = path
        let text = components.string ?? ""
        return text.isEmpty ? "(a URL)" : text
    }
}
