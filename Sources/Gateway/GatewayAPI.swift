import Foundation
import Hummingbird

/// One route of the gateway: the router is built from `GatewayAPI.routes`, and a unit test checks
/// the same table against `openapi.yaml` (paths, methods, operation ids, status codes).
public struct GatewayRoute: Sendable, Hashable {
    /// What a route does; the raw value is the document's `operationId`.
    public enum Operation: String, Sendable, CaseIterable {
        case healthz
        case readyz
        case openAPI = "getOpenAPIDocument"
        case registerDevice
        case refreshToken
        case createProfile
        case getJob
        case listChildren
        case listChildAchievements
        case createStory
        case listStories
        case getStory
        case illustrateStory
        case recordStoryRead
        case getStoryPageImage
        case receiveAppStoreNotification
        case streamEvents
        case listProfiles
        case getProfile
        case updateProfile
        case deleteProfile
        case getProfileChart
        case createPurchase
        case getCredits
        case listLedger
        case requestReport
        case getReport
        case listReports
        case createDeviceChallenge
        case putConsent
        case getConsent
        case deleteCurrentUser
        case exportCurrentUser
        case getExport
        case getProfileChartSVG
        case requestSynastry
        case requestTransits
        case requestReturn
        case requestWheel
        case getChartResult
    }

    /// `GET`, `POST`, `PUT` or `DELETE`.
    public var method: HTTPRequest.Method
    /// The path in the router's syntax, which is also OpenAPI's: `/v1/jobs/{id}`.
    public var path: String
    /// The handler.
    public var operation: Operation
    /// Every status the handler (with `RequestMiddleware`, which turns its errors into problems)
    /// can answer.
    public var statuses: Set<Int>

    /// A route. Every `/v1/` route also answers 429 (the rate limits: `RateLimitMiddleware`, and
    /// the per-user limit in `GatewayRoutes.authenticate`), added here so that no entry forgets it.
    public init(method: HTTPRequest.Method, path: String, operation: Operation, statuses: Set<Int>) {
        self.method = method
        self.path = path
        self.operation = operation
        self.statuses = path.hasPrefix("/v1/") ? statuses.union([429]) : statuses
    }
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
            statuses: [202, 400, 401, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/jobs/{id}",
            operation: .getJob,
            statuses: [200, 400, 401, 404, 500, 503]
        ),
        GatewayRoute(method: .get, path: "/v1/events", operation: .streamEvents, statuses: [200, 401, 429, 503]),
        // Profiles, their charts, purchases, credits, the ledger and reports (GatewayResources.swift).
        GatewayRoute(
            method: .get,
            path: "/v1/profiles",
            operation: .listProfiles,
            statuses: [200, 400, 401, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/profiles/{id}",
            operation: .getProfile,
            statuses: [200, 401, 404, 500, 503]
        ),
        GatewayRoute(
            method: .put,
            path: "/v1/profiles/{id}",
            operation: .updateProfile,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .delete,
            path: "/v1/profiles/{id}",
            operation: .deleteProfile,
            statuses: [204, 401, 404, 409, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/profiles/{id}/chart",
            operation: .getProfileChart,
            statuses: [200, 401, 404, 409, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/purchases",
            operation: .createPurchase,
            statuses: [202, 400, 401, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(method: .get, path: "/v1/credits", operation: .getCredits, statuses: [200, 401, 500, 503]),
        GatewayRoute(method: .get, path: "/v1/ledger", operation: .listLedger, statuses: [200, 400, 401, 500, 503]),
        GatewayRoute(
            method: .post,
            path: "/v1/reports",
            operation: .requestReport,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/reports",
            operation: .listReports,
            statuses: [200, 400, 401, 404, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/reports/{id}",
            operation: .getReport,
            statuses: [200, 401, 404, 500, 503]
        ),
        // Magical Stories (StoryRoutes.swift).
        GatewayRoute(
            method: .get,
            path: "/v1/children",
            operation: .listChildren,
            statuses: [200, 400, 401, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/children/{id}/achievements",
            operation: .listChildAchievements,
            statuses: [200, 401, 404, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/stories",
            operation: .createStory,
            statuses: [202, 400, 401, 404, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/stories",
            operation: .listStories,
            statuses: [200, 400, 401, 404, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/stories/{id}",
            operation: .getStory,
            statuses: [200, 401, 404, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/stories/{id}/illustrations",
            operation: .illustrateStory,
            statuses: [202, 400, 401, 404, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/stories/{id}/reads",
            operation: .recordStoryRead,
            statuses: [202, 400, 401, 404, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/stories/{id}/pages/{n}/image",
            operation: .getStoryPageImage,
            statuses: [200, 304, 401, 404, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/appstore/notifications",
            operation: .receiveAppStoreNotification,
            statuses: [200, 400, 403, 408, 413, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/devices/challenge",
            operation: .createDeviceChallenge,
            statuses: [201, 404, 500, 503]
        ),
        // Consent to share consumption data with Apple (ConsentRoutes.swift).
        GatewayRoute(
            method: .put,
            path: "/v1/consent",
            operation: .putConsent,
            statuses: [200, 400, 401, 408, 413, 422, 500, 503]
        ),
        GatewayRoute(method: .get, path: "/v1/consent", operation: .getConsent, statuses: [200, 401, 404, 500, 503]),
        // Account deletion (UserDeletionRoutes.swift).
        GatewayRoute(
            method: .delete,
            path: "/v1/me",
            operation: .deleteCurrentUser,
            statuses: [202, 400, 401, 422, 500, 503]
        ),
        // Export of the user's data (UserExportRoutes.swift).
        GatewayRoute(
            method: .post,
            path: "/v1/me/export",
            operation: .exportCurrentUser,
            statuses: [202, 400, 401, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/me/exports/{id}",
            operation: .getExport,
            statuses: [200, 401, 404, 409, 410, 500, 503]
        ),
        // Natal wheels as SVG (ChartWheelRoutes.swift).
        GatewayRoute(
            method: .get,
            path: "/v1/profiles/{id}/chart.svg",
            operation: .getProfileChartSVG,
            statuses: [200, 304, 400, 401, 404, 409, 422, 500, 503]
        ),
        // Chart jobs beyond the natal chart and their stored results (ChartJobRoutes.swift).
        GatewayRoute(
            method: .post,
            path: "/v1/profiles/{id}/synastry",
            operation: .requestSynastry,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/profiles/{id}/transits",
            operation: .requestTransits,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/profiles/{id}/returns",
            operation: .requestReturn,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .post,
            path: "/v1/profiles/{id}/wheels",
            operation: .requestWheel,
            statuses: [202, 400, 401, 404, 408, 409, 413, 422, 500, 503]
        ),
        GatewayRoute(
            method: .get,
            path: "/v1/chart-results/{id}",
            operation: .getChartResult,
            statuses: [200, 304, 400, 401, 404, 500, 503]
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

    /// The methods the table has for a concrete request path (`/v1/jobs/0f…`), for a 405 answer
    /// with `Allow` when a known path is asked with another method; empty for an unknown path.
    static func methods(forPath path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return routes.filter { route in
            let pattern = route.path.split(separator: "/", omittingEmptySubsequences: false)
            guard pattern.count == segments.count else { return false }
            return zip(pattern, segments).allSatisfy { template, actual in
                template.hasPrefix("{") ? !actual.isEmpty : template == actual
            }
        }.map(\.method)
    }

    /// The OpenAPI 3.1 document (`openapi.yaml` at the repository root, a link to this target's
    /// resource), read once; nil when the resource bundle is missing (an incomplete install).
    public static let document: String? = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else { return nil }
        return try? String(contentsOf: url, encoding: .utf8)
    }()
}
