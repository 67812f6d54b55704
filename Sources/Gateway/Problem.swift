import AstroDomain
import Foundation

/// An error answer in the RFC 9457 shape (`application/problem+json`): `type`, `title`,
/// `status`, `detail`, plus a stable `code` (the events' codes where one applies, e.g.
/// `latitude-out-of-range`) and, for an invalid field, `field`.
public struct Problem: Error, Sendable, Hashable {
    /// The HTTP status.
    public var status: Int
    /// Stable machine-readable code; clients switch on it.
    public var code: String
    /// Short, human-readable summary of the kind of problem.
    public var title: String
    /// What went wrong with this request.
    public var detail: String
    /// The offending field of the body, when one is at fault.
    public var field: String?
    /// Seconds after which a retry may succeed (`Retry-After`), for 503.
    public var retryAfter: Int?

    /// A problem as given; `type` is derived from `code`.
    public init(status: Int, code: String, title: String, detail: String, field: String? = nil, retryAfter: Int? = nil)
    {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.field = field
        self.retryAfter = retryAfter
    }

    /// The `type` URI: a stable name under the API's documentation.
    public var type: String { "https://astrosvitla.app/problems/\(code)" }

    /// The body.
    public var json: JSONValue {
        var object: [String: JSONValue] = [
            "type": .string(type),
            "title": .string(title),
            "status": .number(Double(status)),
            "detail": .string(detail),
            "code": .string(code),
        ]
        if let field { object["field"] = .string(field) }
        return .object(object)
    }

    /// 400 for a body or field that is not what the API expects.
    public static func invalid(_ code: String, _ detail: String, field: String? = nil) -> Problem {
        Problem(status: 400, code: code, title: "Invalid request", detail: detail, field: field)
    }

    /// 401 for a missing or refused access token.
    public static func unauthorized(_ code: String, _ detail: String) -> Problem {
        Problem(status: 401, code: code, title: "Unauthorized", detail: detail)
    }

    /// 404: no such resource for this caller (another user's ids answer this too).
    public static func notFound(_ detail: String = "no such resource") -> Problem {
        Problem(status: 404, code: "not-found", title: "Not found", detail: detail)
    }

    /// 503 when the database or the broker cannot do its part now; the client may retry.
    public static func unavailable(_ code: String, _ detail: String) -> Problem {
        Problem(status: 503, code: code, title: "Service unavailable", detail: detail, retryAfter: 2)
    }

    /// The problem for a chart input error.
    public static func chartInput(_ error: ChartInputError) -> Problem {
        Problem(
            status: 422,
            code: error.code.rawValue,
            title: "Invalid birth data",
            detail: error.message,
            field: error.field.isEmpty ? nil : error.field
        )
    }
}
