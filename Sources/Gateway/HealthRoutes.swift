import Hummingbird
import Postgres

extension GatewayRoutes {
    /// The probes and the OpenAPI document; no rate limit, no token.
    struct Health: GatewayController {
        let pool: PostgresPool
        let publisher: any JobPublishing
        let events: EventHub

        func addRoutes(to routes: Registrar) {
            routes.open(.healthz, use: healthz)
            routes.open(.readyz, use: readyz)
            routes.open(.openAPI, use: openAPI)
        }

        func healthz(_ request: Request, context: GatewayRequestContext) -> Response {
            text("ok\n")
        }

        /// 200 when the database answers, the broker takes publishes and the events are subscribed.
        /// - Throws: `Problem` 503 `not-ready` saying which is not.
        func readyz(_ request: Request, context: GatewayRequestContext) async throws -> Response {
            let database = await pool.ping()
            let broker = publisher.canPublish
            let events = events.isSubscribed
            guard database, broker, events else {
                throw Problem.unavailable(
                    .notReady,
                    "database \(database ? "reachable" : "unreachable"), broker \(broker ? "connected" : "not connected"), "
                        + "events \(events ? "subscribed" : "not subscribed")"
                )
            }
            return text("ready\n")
        }

        /// `openapi.yaml`, as built into the gateway.
        /// - Throws: `Problem` 500 when the build lacks it.
        func openAPI(_ request: Request, context: GatewayRequestContext) throws -> Response {
            guard let document = GatewayAPI.document else {
                throw Problem(
                    .internalError,
                    "the OpenAPI document is missing from this build"
                )
            }
            return text(document, contentType: "application/yaml")
        }
    }
}
