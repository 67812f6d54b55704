import Foundation

/// HTTP header fields in the order they were given; names compare case-insensitively.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header field as written (the name keeps its original spelling).
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var fields: [Field]

    public init() { self.fields = [] }

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { Field(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of `name` (case-insensitive), or `nil`.
    public subscript(name: String) -> String? {
        fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Every value of `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// Whether a field named `name` is present (case-insensitive).
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping any existing ones of the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Replaces every field named `name` (case-insensitive) by one with `value`.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        fields.append(Field(name: name, value: value))
    }

    /// Removes every field named `name` (case-insensitive).
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
    }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }
}

/// A request as the server received it.
public struct HTTPRequest: Sendable {
    /// The method as sent, e.g. `GET`.
    public var method: String
    /// The path of the request target as sent (still percent-encoded), without the query.
    public var path: String
    /// The query of the request target (after `?`, still percent-encoded), or `nil` when there is none.
    public var query: String?
    public var headers: HTTPHeaders
    /// The body (its length was given by `Content-Length`).
    public var body: Data
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String

    public init(
        method: String,
        path: String,
        query: String? = nil,
        headers: HTTPHeaders = HTTPHeaders(),
        body: Data = Data(),
        version: String = "HTTP/1.1"
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.version = version
    }

    /// The query's name/value pairs, percent-decoded, in order.
    public var queryItems: [URLQueryItem] {
        guard let query else { return [] }
        var components = URLComponents()
        components.percentEncodedQuery = query
        return components.queryItems ?? []
    }

    /// The path split into percent-decoded segments (`/a/b%20c` → `["a", "b c"]`).
    public var pathSegments: [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map {
            String($0).removingPercentEncoding ?? String($0)
        }
    }

    /// Decodes the body as JSON.
    /// - Throws: the decoder's error when the body is not a `T`.
    public func decodeJSON<T: Decodable>(_ type: T.Type, decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(type, from: body)
    }
}

/// What the server does with a connection once the handler has answered.
public struct HTTPResponse: Sendable {
    enum Disposition: Sendable, Equatable {
        case respond
        case closeWithoutResponse
        case hangUntilStopped
    }

    public var status: Int
    /// Headers to send; the server sets `Content-Length` and `Connection` itself.
    public var headers: HTTPHeaders
    public var body: Data
    let disposition: Disposition

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
        self.disposition = .respond
    }

    private init(disposition: Disposition) {
        self.status = 0
        self.headers = HTTPHeaders()
        self.body = Data()
        self.disposition = disposition
    }

    /// Closes the connection without writing anything, as a crashed or overloaded server would.
    // swift-format-ignore: DontRepeatTypeInStaticProperties
    // (the name says what happens: the connection closes with no response at all)
    public static let closeWithoutResponse = HTTPResponse(disposition: .closeWithoutResponse)

    /// Never answers: the connection stays open and silent until the client gives up (closes it)
    /// or the server stops.
    public static let hangUntilStopped = HTTPResponse(disposition: .hangUntilStopped)

    /// Whether this is `closeWithoutResponse`.
    public var closesWithoutResponse: Bool { disposition == .closeWithoutResponse }

    /// Whether this is `hangUntilStopped`.
    public var hangsUntilStopped: Bool { disposition == .hangUntilStopped }

    /// A JSON response with `value` encoded by `encoder`; an encoding failure becomes a 500 that says so.
    public static func json<T: Encodable>(
        status: Int = 200,
        _ value: T,
        headers: HTTPHeaders = HTTPHeaders(),
        encoder: JSONEncoder = JSONEncoder()
    ) -> HTTPResponse {
        do {
            return json(status: status, data: try encoder.encode(value), headers: headers)
        } catch {
            return text(status: 500, "cannot encode the JSON response: \(error)\n")
        }
    }

    /// A response whose body is `data`, labelled `application/json` (the bytes are sent as they are,
    /// valid JSON or not).
    public static func json(status: Int = 200, data: Data, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        if !headers.contains("Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
        return HTTPResponse(status: status, headers: headers, body: data)
    }

    /// A response whose body is the JSON text `text`, sent as it is.
    public static func json(status: Int = 200, text: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        json(status: status, data: Data(text.utf8), headers: headers)
    }

    /// A `text/plain` response.
    public static func text(status: Int = 200, _ text: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        if !headers.contains("Content-Type") { headers.add(name: "Content-Type", value: "text/plain; charset=utf-8") }
        return HTTPResponse(status: status, headers: headers, body: Data(text.utf8))
    }

    /// A response with no body.
    public static func empty(status: Int, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers)
    }

    /// The standard reason phrase of `status` (`OK`, `Not Found`, …), or `Status` for unusual codes.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status"
        }
    }
}
