/// A stable machine-readable error code: the `code` of a job error (`JobError`, a dead letter's
/// `x-astro-reason-code`) and of the gateway's problem documents. Clients switch on it.
///
/// Every fixed code is a static member, defined once with its meaning (ErrorCode+Catalogue.swift)
/// and listed in `catalogue` with the one HTTP status the gateway answers it with. Codes built
/// from another system's kind belong to a `Family` (`appstore-<kind>`, `llm-<kind>`,
/// `image-<kind>`, `database-error-<SQLSTATE>`). The type has no string-literal initializer on
/// purpose: a code is named from the catalogue or made by a family, never spelled at its site.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The code as it goes on the wire.
    public let rawValue: String

    /// A code read from the wire (a stored job error, a dead letter's header); it need not be
    /// one of the catalogue's.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// A catalogue member (only the catalogue defines fixed codes).
    init(fixed rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// One fixed code of the catalogue and the HTTP status the gateway answers it with.
    public struct Definition: Sendable, Hashable {
        public var code: ErrorCode
        /// The status of a problem document with this code (a job-only code has the status the
        /// gateway would give the same refusal).
        public var httpStatus: Int

        init(_ code: ErrorCode, httpStatus: Int) {
            self.code = code
            self.httpStatus = httpStatus
        }
    }

    /// Codes made from another system's kind: `<prefix>-<kind>`.
    public enum Family: String, Sendable, Hashable, CaseIterable {
        /// An App Store Server API failure, by `AppStoreAPIError`'s kind (`appstore-unauthorized`).
        case appStore = "appstore"
        /// An LLM failure no retry mends, by `LLMError`'s kind (`llm-unauthorized`, `llm-bad-request`).
        case llm
        /// An image API failure no retry mends (`image-unauthorized`, `image-content-policy`).
        case image
        /// A database failure no retry mends, by its SQLSTATE (`database-error-22P02`).
        case databaseError = "database-error"
        /// The gateway's answer to an HTTP error of the server framework without a code of its
        /// own, by status (`http-400`).
        case http

        /// The family's pattern as CONTRACT.md writes it, e.g. `appstore-<kind>`.
        public var pattern: String {
            switch self {
            case .databaseError: rawValue + "-<SQLSTATE>"
            case .http: rawValue + "-<status>"
            default: rawValue + "-<kind>"
            }
        }

        /// The HTTP status of the family's codes (an `http-<status>` code has its own).
        public var httpStatus: Int {
            switch self {
            case .appStore, .llm, .image: 502
            case .databaseError, .http: 500
            }
        }

        /// The family's code for `kind`.
        public func code(_ kind: String) -> ErrorCode { ErrorCode(rawValue: rawValue + "-" + kind) }
    }

    /// `appstore-<kind>`: an App Store Server API failure.
    public static func appStore(_ kind: String) -> ErrorCode { Family.appStore.code(kind) }
    /// `llm-<kind>`: an LLM failure no retry mends.
    public static func llm(_ kind: String) -> ErrorCode { Family.llm.code(kind) }
    /// `image-<kind>`: an image API failure no retry mends.
    public static func image(_ kind: String) -> ErrorCode { Family.image.code(kind) }
    /// `database-error-<SQLSTATE>`: a database failure no retry mends.
    public static func databaseError(sqlState: String) -> ErrorCode { Family.databaseError.code(sqlState) }
    /// `http-<status>`: the gateway's answer to a framework HTTP error without a code of its own.
    public static func http(status: Int) -> ErrorCode { Family.http.code(String(status)) }

    /// The catalogue's definitions by code.
    static let definitions: [ErrorCode: Definition] = Dictionary(
        catalogue.map { ($0.code, $0) },
        uniquingKeysWith: { first, _ in first }
    )

    /// The catalogue's definition of this code; `nil` for a family's code or an unknown one.
    public var definition: Definition? { Self.definitions[self] }

    /// The family a code not in the catalogue belongs to (the longest matching prefix).
    public var family: Family? {
        guard definition == nil else { return nil }
        return Family.allCases.sorted { $0.rawValue.count > $1.rawValue.count }
            .first { rawValue.hasPrefix($0.rawValue + "-") && rawValue.count > $0.rawValue.count + 1 }
    }

    /// Whether the code is the catalogue's or a family's.
    public var isKnown: Bool { definition != nil || family != nil }

    /// The one HTTP status a problem document with this code has: the catalogue's, the family's,
    /// or 500 for a code this build does not know.
    public var httpStatus: Int {
        if let definition { return definition.httpStatus }
        if family == .http, let status = Int(rawValue.dropFirst(Family.http.rawValue.count + 1)),
            (400...599).contains(status)
        {
            return status
        }
        return family?.httpStatus ?? 500
    }

    /// Codes that say a job's message itself is broken (a body that does not decode, an id
    /// that is missing, malformed or reused, a message too large): the gateway never publishes
    /// such a message, so its producer is at fault, not the user.
    static let brokenMessageCodes: Set<ErrorCode> = [
        .invalidJSON, .missingField, .invalidFieldType, .invalidID, .invalidPayload, .unexpectedField,
        .conflictingFields, .missingJobID, .invalidJobID, .jobIDReused, .messageTooLarge,
    ]

    /// Whether a job refused with this code was refused for what the user asked (a duplicate
    /// profile name, a birth time in a DST gap, a story that is not theirs): a 4xx code that
    /// does not say the message is broken. Such a job ends `failed`, with nothing for an
    /// operator to replay; any other refusal is dead-lettered and ends `dead`.
    public var refusesTheUsersRequest: Bool {
        (400..<500).contains(httpStatus) && !Self.brokenMessageCodes.contains(self)
    }

    /// The problem document's `type` URI: a stable name under the API's documentation.
    public var problemType: String { "https://astrosvitla.app/problems/" + rawValue }

    /// The problem document's `title`: one title per status, so the same status is never
    /// titled two ways ("Not found", not also "Not Found").
    public var problemTitle: String { Self.title(forStatus: httpStatus) }

    /// The title of a problem document of `status`.
    public static func title(forStatus status: Int) -> String {
        switch status {
        case 400: "Invalid request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not found"
        case 405: "Method not allowed"
        case 408: "Request timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Request body too large"
        case 422: "Invalid request"
        case 429: "Too many requests"
        case 502: "Upstream failure"
        case 503: "Service unavailable"
        case 504: "Upstream timeout"
        // A framework's refusal without a title of its own (`http-415`): a client error is the
        // request's, anything else the server's.
        case 400..<500: "Invalid request"
        default: "Internal error"
        }
    }
}

extension JobError {
    /// A job error with a catalogued (or family) code; `code` stays the wire string.
    public init(code: ErrorCode, message: String) {
        self.init(code: code.rawValue, message: message)
    }

    /// The code as a typed value.
    public var errorCode: ErrorCode { ErrorCode(rawValue: code) }
}
