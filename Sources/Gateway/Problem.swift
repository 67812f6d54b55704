import AstroDomain
import Foundation

/// An error answer in the RFC 9457 shape (`application/problem+json`): `type`, `title`,
/// `status`, `detail`, plus a stable `code` (the catalogue's, `ErrorCode`: the same code a job
/// refusing the same thing gives) and, for an invalid field, `field`.
///
/// The status, title and `type` come from the code's catalogue entry, never from the route: a
/// code is answered with one status and one title wherever it is refused.
public struct Problem: Error, Sendable, Hashable, Encodable {
    /// Stable machine-readable code; clients switch on it.
    public var code: ErrorCode
    /// What went wrong with this request.
    public var detail: String
    /// The offending field of the body, when one is at fault.
    public var field: String?
    /// Seconds after which a retry may succeed (`Retry-After`), for 429 and 503.
    public var retryAfter: Int?

    /// A problem with `code`'s status, title and type.
    public init(_ code: ErrorCode, _ detail: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.detail = detail
        self.field = field
        self.retryAfter = retryAfter
    }

    /// The HTTP status: the catalogue's for the code.
    public var status: Int { code.httpStatus }

    /// Short, human-readable summary of the kind of problem: one per status.
    public var title: String { code.problemTitle }

    /// The `type` URI: a stable name under the API's documentation.
    public var type: String { code.problemType }

    /// The members of the body, shared with `JobProblemAnswer`, which adds one.
    enum CodingKeys: String, CodingKey {
        case type, title, status, detail, code, field, message
    }

    /// Writes the body: `type`, `title`, `status`, `detail`, `code` and, when set, `field`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try encodeMembers(into: &container)
    }

    func encodeMembers(into container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(type, forKey: .type)
        try container.encode(title, forKey: .title)
        try container.encode(status, forKey: .status)
        try container.encode(detail, forKey: .detail)
        try container.encode(code.rawValue, forKey: .code)
        try container.encodeIfPresent(field, forKey: .field)
    }

    /// 404 `not-found`: no such resource for this caller (another user's ids answer this too).
    public static func notFound(_ detail: String = "no such resource") -> Problem {
        Problem(.notFound, detail)
    }

    /// A refusal the client may retry shortly (the database or the broker cannot do its part
    /// now): `Retry-After: 2`.
    public static func unavailable(_ code: ErrorCode, _ detail: String) -> Problem {
        Problem(code, detail, retryAfter: 2)
    }

    /// The problem for a chart input error: its code (422), message and field.
    public static func chartInput(_ error: ChartInputError) -> Problem {
        Problem(error.code, error.message, field: error.field.isEmpty ? nil : error.field)
    }

    /// The problem for a refusal of `ProfileChartRule`: its code (404, 409 or 422), message and
    /// field.
    public static func profileChart(_ refusal: ProfileChartRefusal) -> Problem {
        Problem(refusal.code, refusal.message, field: refusal.field)
    }
}
