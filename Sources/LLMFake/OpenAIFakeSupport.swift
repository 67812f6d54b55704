import Foundation
import LoopbackHTTP

/// OpenAI's error answers, as the chat and images fakes send them.
enum OpenAIErrorResponse {
    /// OpenAI's error body: `{"error": {"message", "type", "param": null, "code"}}`.
    static func make(status: Int, message: String, type: String, code: String?) -> HTTPResponse {
        struct Body: Encodable {
            struct Detail: Encodable {
                var message: String
                var type: String
                var param: String?
                var code: String?

                // Written by hand so `param` and `code` are sent as null rather than left out.
                func encode(to encoder: any Encoder) throws {
                    var container = encoder.container(keyedBy: CodingKeys.self)
                    try container.encode(message, forKey: .message)
                    try container.encode(type, forKey: .type)
                    try container.encode(param, forKey: .param)
                    try container.encode(code, forKey: .code)
                }

                enum CodingKeys: String, CodingKey {
                    case message
                    case type
                    case param
                    case code
                }
            }

            var error: Detail
        }
        return .json(status: status, Body(error: .init(message: message, type: type, param: nil, code: code)))
    }

    /// 401 for a missing or wrong key.
    static let invalidAPIKey = make(
        status: 401,
        message: "Incorrect API key provided",
        type: "invalid_request_error",
        code: "invalid_api_key"
    )

    /// 400 `invalid_request_error` with `message`.
    static func invalidRequest(_ message: String, code: String? = nil) -> HTTPResponse {
        make(status: 400, message: message, type: "invalid_request_error", code: code)
    }

    /// 404 for a path or method the API does not have.
    static func invalidURL(_ request: HTTPRequest) -> HTTPResponse {
        make(
            status: 404,
            message: "Invalid URL (\(request.method) \(request.path))",
            type: "invalid_request_error",
            code: nil
        )
    }

    /// 429 `rate_limit_exceeded`, with `Retry-After` when given.
    static func rateLimited(model: String, retryAfter: Int?) -> HTTPResponse {
        var response = make(
            status: 429,
            message: "Rate limit reached for \(model) on requests per min (RPM): Limit 3, Used 3, "
                + "Requested 1. Please try again in \(retryAfter ?? 20)s.",
            type: "requests",
            code: "rate_limit_exceeded"
        )
        if let retryAfter { response.headers.add(name: "Retry-After", value: String(retryAfter)) }
        return response
    }

    /// `status` with OpenAI's `server_error` body.
    static func serverError(status: Int) -> HTTPResponse {
        make(
            status: status,
            message: "The server had an error while processing your request. Sorry about that!",
            type: "server_error",
            code: nil
        )
    }

    /// What OpenAI says about a body that is not JSON.
    static let unparsableJSON =
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
        + "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not "
        + "valid JSON.)"
}

/// What every fake counts about the requests it receives, kept in its state under its lock.
struct TrafficCounters: Sendable {
    var requestCount = 0
    /// Requests refused with 401 because of the key.
    var unauthorizedCount = 0
    var inFlight = 0
    var maxInFlight = 0
    var lastBody: Data?
    var lastAuthorization: String?

    /// Counts `request` in (the caller counts it out with `end()` once answered).
    /// - Returns: whether it carried `Authorization: Bearer <apiKey>`.
    mutating func begin(_ request: HTTPRequest, apiKey: String) -> Bool {
        let authorization = request.headers["Authorization"]
        let authorized = authorization == "Bearer \(apiKey)"
        requestCount += 1
        inFlight += 1
        maxInFlight = max(maxInFlight, inFlight)
        lastBody = request.body
        lastAuthorization = authorization
        if !authorized { unauthorizedCount += 1 }
        return authorized
    }

    mutating func end() { inFlight -= 1 }
}
