import Foundation
import Hummingbird

/// One route of the gateway: the router is built from `GatewayAPI.routes`, and a unit test checks
/// the same table against `openapi.yaml` (paths, methods, operation ids, status codes).
public struct GatewayRoute: Sendable, Hashable {
    /// What a route does; the raw value is the document's `operationId`.
    public enum Operation: String, Sendable, CaseIterable {
        case healthz
        case readyz
        case metrics
        case openAPI = "getOpenAPIDocument"
        case registerDevice
        case refreshToken
        case createProfile
        case getJob
        case createDeviceChallenge
    }

    /// `GET` or `POST`.
    public var method: HTTPRequest.Method
    /// The path in the router's syntax, which is also OpenAPI's: `/v1/jobs/{id}`.
    public var path: String
    /// The handler.
    public var operation: Operation
    /// Every status the handler (with `RequestMiddleware`, which turns its errors into problems)
    /// can answer.
    public var statuses: Set<Int>
}

/// The public API's description in code, and its OpenAPI document.
public enum GatewayAPI {
    /// The routes, in the order the router registers them.
    ///
    /// Statuses: 408 and 413 come from reading a body, 503 from the database or the broker, 500
    /// from an unexpected error in a handler that does I/O.
    public static let routes: [GatewayRoute] = [
        GatewayRoute(method: .get, path: "/healthz", operation: .healthz, statuses: [200]),
        GatewayRoute(method: .get, path: "/readyz", operation: .readyz, statuses: [200, 503]),
        GatewayRoute(method: .get, path: "/metrics", operation: .metrics, statuses: [200]),
        GatewayRoute(method: .get, path: "/openapi.yaml", operation: .openAPI, statuses: [200, 500]),
        GatewayRoute(
            method: .post,
            path: "/v1/devices",
            operation: .registerDevice,
            statuses: [201, 400, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/token",
            operation: .refreshToken,
            statuses: [200, 400, 401, 408, 413, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/profiles",
            operation: .createProfile,
            statuses: [202, 400, 401, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(method: .get, path: "/v1/jobs/{id}", operation: .getJob, statuses: [200, 401, 404, 500, 503]),
        GatewayRoute(
            method: .post,
            path: "/v1/devices/challenge",
            operation: .createDeviceChallenge,
            statuses: [201, 404, 500, 503]
        ),
    ]

    /// The documented statuses of each route, by `"<METHOD> <path>"`, for `RequestMiddleware`'s check.
    static let statusesByRoute: [String: Set<Int>] = Dictionary(
        uniqueKeysWithValues: routes.map { ("\($0.method.rawValue) \($0.path)", $0.statuses) }
    )

    /// Whether `status` is one the table (and so the document) lists for the route; true for a
    /// request no route matched.
    static func isDocumented(status: Int, method: HTTPRequest.Method, route: String?) -> Bool {
        guard let route, let statuses = statusesByRoute["\(method.rawValue) \(route)"] else { return true }
        return statuses.contains(status)
    }

    /// The OpenAPI 3.1 document (`openapi.yaml` at the repository root, a link to this target's
    /// resource), read once; nil when the resource bundle is missing (an incomplete install).
    public static let document: String? = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else { return nil }
        return try? String(contentsOf: url, encoding: .utf8)
    }()
}
