import AMQP
import Hummingbird
import Logging
import Postgres
import Testing

@testable import Gateway

/// The controllers against the route table: `GatewayAPI.routes` (which the OpenAPI test checks
/// against `openapi.yaml`) gives each route's method and path, and the controllers register by
/// operation, so these tests check what the table cannot say itself: that every operation has
/// one handler, and which ones sit behind the `Authenticator`.
@Suite("Route registration")
struct RouteRegistrationTests {
    /// Every controller registered on a fresh router (nothing connects: the pool and the
    /// publisher connect on first use).
    static func registrar() async throws -> GatewayRoutes.Registrar {
        let configuration = try GatewayConfiguration.fromEnvironment([:])
        let logger = Logger(label: "route-registration-test")
        let pool = PostgresPool(configuration: configuration.service.database, logger: logger)
        let publisher = AMQPPublisher(configuration: configuration.service.amqp, logger: logger)
        let services = GatewayServices(
            configuration: configuration,
            pool: pool,
            publisher: publisher,
            metrics: GatewayMetrics()
        )
        let registrar = GatewayRoutes.Registrar(
            router: Router(context: GatewayRequestContext.self),
            authenticator: services.authenticator
        )
        for controller in GatewayRoutes.controllers(services) { controller.addRoutes(to: registrar) }
        await publisher.close()
        await pool.close()
        return registrar
    }

    @Test("every operation of the route table has a handler")
    func everyOperationRegistered() async throws {
        let access = try await Self.registrar().access
        let missing = GatewayRoute.Operation.allCases.filter { access[$0] == nil }
        #expect(missing.isEmpty, "operations no controller registers: \(missing)")
    }

    @Test("the routes documenting a bearer token's 401 (but token refresh) are behind the Authenticator, no other")
    func authenticatedRoutes() async throws {
        let access = try await Self.registrar().access
        for route in GatewayAPI.routes {
            let documentsToken = route.statuses.contains(401) && route.operation != .refreshToken
            #expect(
                (access[route.operation] != .open) == documentsToken,
                "\(route.method) \(route.path): \(String(describing: access[route.operation]))"
            )
        }
    }

    @Test("only DELETE /v1/me and GET /v1/jobs/{id} (its Location, which checks the job) let a deleted user through")
    func allowingDeleted() async throws {
        let access = try await Self.registrar().access
        #expect(
            Set(access.filter { $0.value == .authenticatedAllowingDeleted }.map(\.key)) == [
                .deleteCurrentUser, .getJob,
            ]
        )
    }
}
