import Hummingbird

/// The gateway's routes and middleware.
public enum GatewayRoutes {
    /// Header carrying the request id, read from the client when well-formed, else made up.
    static let requestIDHeader = HTTPFields.Element.Name("X-Request-Id")!
    static let idempotencyKeyHeader = HTTPFields.Element.Name("Idempotency-Key")!

    /// The router of every route in `GatewayAPI.routes`, each served by one resource's
    /// controller (`controllers`), behind the gateway's middleware: tracing, the request id,
    /// problems and metrics (`RequestMiddleware`), the per-address rate limits, and on the
    /// authenticated routes the `Authenticator`.
    public static func router(_ services: GatewayServices) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        // Outermost: the request's span and trace id cover everything below (RequestTracing.swift).
        router.add(middleware: TraceMiddleware())
        router.add(middleware: RequestMiddleware(metrics: services.metrics))
        // Inside RequestMiddleware, so a 429 is a logged, counted problem with the request id.
        router.add(middleware: RateLimitMiddleware(limiter: services.rateLimiter))
        let registrar = Registrar(router: router, authenticator: services.authenticator)
        for controller in controllers(services) { controller.addRoutes(to: registrar) }
        let missing = GatewayRoute.Operation.allCases.filter { registrar.access[$0] == nil }
        precondition(missing.isEmpty, "operations without a handler: \(missing)")
        return router
    }

    /// One controller per resource, each holding the dependencies its routes use.
    static func controllers(_ services: GatewayServices) -> [any GatewayController] {
        let body = services.body
        let jobs = services.jobs
        return [
            Health(pool: services.pool, publisher: services.publisher, events: services.events),
            Identity(
                store: services.store,
                signer: services.signer,
                refreshTokenLifetime: services.refreshTokenLifetime,
                deletedUsers: services.deletedUsers,
                appAttest: services.appAttest,
                body: body
            ),
            Profiles(resources: services.resources, jobs: jobs, body: body),
            ChartJobs(
                resources: services.resources,
                jobs: jobs,
                body: body,
                chartResultQuota: services.chartResultQuota,
                metrics: services.metrics
            ),
            Jobs(
                store: services.store,
                events: services.events,
                deadlines: services.deadlines,
                deletedUsers: services.deletedUsers
            ),
            Events(
                events: services.events,
                verifier: services.verifier,
                rateLimiter: services.rateLimiter,
                deletedUsers: services.deletedUsers,
                connections: services.connections,
                deadlines: services.deadlines,
                metrics: services.metrics
            ),
            Billing(resources: services.resources, jobs: jobs, body: body),
            Reports(resources: services.resources, jobs: jobs, body: body),
            Stories(
                stories: services.stories,
                illustrations: services.illustrations,
                quotas: services.quotas,
                jobs: jobs,
                body: body
            ),
            Consent(resources: services.resources, body: body),
            Me(store: services.store, deletedUsers: services.deletedUsers, jobs: jobs),
            AppStore(appStoreVerifier: services.appStoreVerifier, metrics: services.metrics, jobs: jobs, body: body),
        ]
    }

    /// What a route's handler is.
    typealias Handler = @Sendable (Request, GatewayRequestContext) async throws -> Response

    /// Where controllers register their routes, by operation: the method and path come from
    /// `GatewayAPI.routes` (the table the OpenAPI test checks), so a route's path is written once.
    final class Registrar {
        /// Who may call a route.
        enum Access: Sendable, Equatable {
            /// Anyone: probes, the document, registration, refresh, App Store notifications.
            case open
            /// A verified caller (`Authenticator`).
            case authenticated
            /// A verified caller, even one whose deletion started (`DELETE /v1/me`).
            case authenticatedAllowingDeleted
        }

        private let open: RouterGroup<GatewayRequestContext>
        private let authenticated: RouterGroup<GatewayRequestContext>
        private let allowingDeleted: RouterGroup<GatewayRequestContext>
        /// Every operation registered, and how.
        private(set) var access: [GatewayRoute.Operation: Access] = [:]

        init(router: Router<GatewayRequestContext>, authenticator: Authenticator) {
            open = router.group()
            authenticated = router.group().add(middleware: authenticator)
            allowingDeleted = router.group().add(middleware: authenticator.allowingDeleted)
        }

        func open(_ operation: GatewayRoute.Operation, use handler: @escaping Handler) {
            on(operation, .open, handler)
        }

        func authenticated(_ operation: GatewayRoute.Operation, use handler: @escaping Handler) {
            on(operation, .authenticated, handler)
        }

        func authenticatedAllowingDeleted(_ operation: GatewayRoute.Operation, use handler: @escaping Handler) {
            on(operation, .authenticatedAllowingDeleted, handler)
        }

        private func on(_ operation: GatewayRoute.Operation, _ access: Access, _ handler: @escaping Handler) {
            precondition(self.access[operation] == nil, "\(operation) registered twice")
            guard let route = GatewayAPI.routes.first(where: { $0.operation == operation }) else {
                preconditionFailure("\(operation) is not in GatewayAPI.routes")
            }
            self.access[operation] = access
            let group =
                switch access {
                case .open: open
                case .authenticated: authenticated
                case .authenticatedAllowingDeleted: allowingDeleted
                }
            group.on(RouterPath(route.path), method: route.method, use: handler)
        }
    }
}

/// A resource's routes (Hummingbird's controller pattern): it holds the dependencies its
/// handlers use and registers them with `addRoutes(to:)`.
protocol GatewayController: Sendable {
    func addRoutes(to routes: GatewayRoutes.Registrar)
}
