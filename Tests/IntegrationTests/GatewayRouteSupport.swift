import AMQP
import AstroDomain
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import Testing
import WorkerRuntime

@testable import Gateway

/// The gateway's routes in the test process (issue 31): the router the `gateway` process serves,
/// over the suite's real PostgreSQL database (the gateway's own role) and RabbitMQ vhost (the
/// gateway's own broker user), driven by HummingbirdTesting's router client. No server, no
/// process: a request is a function call, so every route's answers can be checked in
/// milliseconds. What only a process shows (sockets, the peer address, signals, the metrics
/// port) stays with the Gateway*Tests suites that start one.
///
/// The tests say what a client sees (status, `code` and `field` of a problem, bodies, headers)
/// and what the gateway left behind (its `gateway_jobs` rows, the messages it published), never
/// how a route is built, so they hold when the routes are restructured.
struct RouteGateway: Sendable {
    typealias Client = any TestClientProtocol

    /// What a route answered.
    struct Answer: Sendable, CustomStringConvertible {
        var status: Int
        var headers: HTTPFields
        var body: Data
        var json: JSONValue? { try? JSONValue.parse(body) }
        /// A problem's `code` and `field`.
        var code: String? { json?["code"]?.stringValue }
        var field: String? { json?["field"]?.stringValue }
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { HTTPFields.Element.Name(name).flatMap { headers[$0] } }
        var description: String { "\(status) \(text.prefix(600))" }
    }

    /// A registered device: its user and access token.
    struct User: Sendable {
        var id: UserID
        var token: String
        var refreshToken: String
    }

    let client: Client
    /// The schema owner's pool, for seeding what workers would have written and for checks.
    let admin: PostgresPool
    /// Every message the gateway published in this test (astro.gateway-requests).
    let published: AMQPDeliveryCollector
    /// The gateway's error log lines (a status missing from the route table is one).
    let errors: MaintenanceMetricsTests.Lines
    /// What the gateway was configured with (its signing key: tokens a test forges).
    let configuration: GatewayConfiguration
    /// Its metrics, as `/metrics` would show them.
    let metrics: GatewayMetrics

    // MARK: Running

    /// The environment the in-process gateway reads its configuration from: the gateway's broker
    /// user and database role, the tests' App Store policy (development PKI, as the process tests
    /// give it) and rate limits no test reaches; `overrides` last.
    static func environment(_ overrides: [String: String]) async throws -> [String: String] {
        [
            "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.gateway),
            "DATABASE_URL": try await GatewayHarness.gatewayDatabaseURL(),
            "BILLING_ENVIRONMENT": "Sandbox",
            "BILLING_TRUSTED_ROOTS": BillingWorkerProcessTests.pkiFolder.appendingPathComponent("root.der").path,
        ].merging(GatewayHarness.unlimited) { _, new in new }.merging(overrides) { _, new in new }
            // An empty override unsets the variable.
            .filter { !$0.value.isEmpty }
    }

    /// The gateway's application as the `gateway` process builds it, for the router client: its
    /// router (THE one place the tests build it: after a change of the router's entry point,
    /// this line is the one to change) and, when `events`, the replica's subscription to
    /// `astro.events` (`/readyz`, `GET /v1/events`, long polls need it).
    static func application(
        _ services: GatewayServices,
        amqp: AMQPConfiguration,
        events: Bool,
        logger: Logger
    ) -> some ApplicationProtocol {
        Application(
            router: GatewayRoutes.router(services),
            services: events ? [EventSubscription(hub: services.events, configuration: amqp, logger: logger)] : [],
            logger: logger
        )
    }

    /// The broker's topology, declared once per suite process as `astroctl migrate` declares it.
    private static let topology = Task { () throws -> Void in
        await (try RuntimeTestEnvironment.contractPublisher(purging: [])).close()
    }

    /// Runs `test` against a gateway built in this process from `environment` (over
    /// `RouteGateway.environment`'s defaults), with a collector of what it publishes; fails the
    /// test when the gateway logged a status its route table does not list.
    static func run(
        environment overrides: [String: String] = [:],
        events: Bool = false,
        _ test: @Sendable (RouteGateway) async throws -> Void
    ) async throws {
        try await topology.value
        let configuration = try GatewayConfiguration.fromEnvironment(try await environment(overrides))
        let lines = MaintenanceMetricsTests.Lines()
        var logger = Logger(label: "gateway-routes") { _ in MaintenanceMetricsTests.Capture(sink: lines) }
        logger.logLevel = .error
        let pool = PostgresPool(
            configuration: configuration.service.database,
            options: .init(maxConnections: 4, acquireTimeout: .seconds(5)),
            logger: logger
        )
        let publisher = AMQPPublisher(configuration: configuration.service.amqp, logger: logger)
        let admin = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
        // A queue of this test's own bound to everything the gateway publishes.
        let queue = amqpUniqueName("gateway-routes")
        let observer = AMQPPublisher(configuration: try RuntimeTestEnvironment.amqpConfiguration(), logger: logger)
        let consumer = amqpConsumer(
            try RuntimeTestEnvironment.amqpConfiguration(),
            queue: queue,
            prefetch: 100,
            name: "gateway-routes"
        )
        do {
            try await observer.connect()
            try await observer.declare(
                Topology(
                    queues: [QueueSpec(name: queue, durable: false, arguments: ["x-expires": .int(60_000)])],
                    bindings: [
                        BindingSpec(queue: queue, exchange: BrokerNames.gatewayRequestsExchange, routingKey: "#")
                    ]
                )
            )
            try await consumer.start()
            try await publisher.connect()
            let collector = AMQPDeliveryCollector(consumer)
            let metrics = GatewayMetrics()
            let services = GatewayServices(
                configuration: configuration,
                pool: pool,
                publisher: publisher,
                metrics: metrics
            )
            let app = application(services, amqp: configuration.service.amqp, events: events, logger: logger)
            try await app.test(.router) { client in
                try await test(
                    RouteGateway(
                        client: client,
                        admin: admin,
                        published: collector,
                        errors: lines,
                        configuration: configuration,
                        metrics: metrics
                    )
                )
            }
        } catch {
            await Self.close(consumer, observer, queue, publisher, pool, admin)
            throw error
        }
        await Self.close(consumer, observer, queue, publisher, pool, admin)
        let unlisted = lines.all.filter { $0.message == "status not in the route table" }
        #expect(unlisted.isEmpty, "statuses the route table lacks: \(unlisted.map(\.metadata))")
    }

    private static func close(
        _ consumer: AMQPConsumer,
        _ observer: AMQPPublisher,
        _ queue: String,
        _ publisher: AMQPPublisher,
        _ pool: PostgresPool,
        _ admin: PostgresPool
    ) async {
        await consumer.close()
        _ = try? await observer.deleteQueue(queue)
        await observer.close()
        await publisher.close()
        await pool.close()
        await admin.close()
    }

    // MARK: Requests

    /// Sends a request: `json` as the body (or `raw` bytes), `token` as the bearer token.
    func call(
        _ method: HTTPRequest.Method,
        _ uri: String,
        token: String? = nil,
        json: JSONValue? = nil,
        raw: String? = nil,
        headers: [String: String] = [:]
    ) async throws -> Answer {
        var fields = HTTPFields()
        if let token { fields[.authorization] = "Bearer \(token)" }
        let body = json.map { $0.jsonData() } ?? raw.map { Data($0.utf8) }
        if body != nil { fields[.contentType] = "application/json" }
        for (name, value) in headers { fields[HTTPFields.Element.Name(name)!] = value }
        let response = try await client.execute(
            uri: uri,
            method: method,
            headers: fields,
            body: body.map { ByteBuffer(bytes: $0) }
        )
        return Answer(
            status: Int(response.status.code),
            headers: response.headers,
            body: Data(response.body.readableBytesView)
        )
    }

    /// A new device (`POST /v1/devices`), which must answer 201.
    func register(sourceLocation: SourceLocation = #_sourceLocation) async throws -> User {
        let answer = try await call(.post, "/v1/devices")
        try #require(answer.status == 201, "POST /v1/devices: \(answer)", sourceLocation: sourceLocation)
        return User(
            id: try #require(answer.json?["userId"]?.stringValue.flatMap(UserID.init), sourceLocation: sourceLocation),
            token: try #require(answer.json?["accessToken"]?.stringValue, sourceLocation: sourceLocation),
            refreshToken: try #require(answer.json?["refreshToken"]?.stringValue, sourceLocation: sourceLocation)
        )
    }

    // MARK: Expectations

    /// Expects a problem answer: `status`, `code` and, when given, `field`, as
    /// `application/problem+json`.
    func expectProblem(
        _ answer: Answer,
        _ status: Int,
        _ code: String,
        field: String? = nil,
        _ what: @autoclosure () -> String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            answer.status == status && answer.code == code && (field == nil || answer.field == field)
                && answer.header("Content-Type") == "application/problem+json",
            "\(what()): expected \(status) \(code)\(field.map { " field \($0)" } ?? ""), got \(answer)",
            sourceLocation: sourceLocation
        )
    }

    /// Expects a 202 that accepted a job: `jobId` in the body, `Location` naming it, the job
    /// recorded for `user` as `kind` and published (confirmed) to astro.gateway-requests under
    /// its type with its id; returns the job id and the published body.
    @discardableResult
    func expectAccepted(
        _ answer: Answer,
        _ kind: JobType,
        user: User,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (jobID: JobID, body: JSONValue) {
        try #require(
            answer.status == 202,
            "expected 202 for \(kind.rawValue), got \(answer)",
            sourceLocation: sourceLocation
        )
        let jobID = try #require(
            answer.json?["jobId"]?.stringValue.flatMap(JobID.init),
            "no jobId in \(answer)",
            sourceLocation: sourceLocation
        )
        #expect(answer.header("Location") == "/v1/jobs/\(jobID)", sourceLocation: sourceLocation)
        let row = try await admin.withConnection { database in
            try database.query(
                "SELECT kind, user_id, published_at IS NOT NULL AS published FROM gateway_jobs WHERE job_id = $1",
                [jobID.uuid]
            ).first.map {
                (
                    try $0.decode(String.self, "kind"), try $0.decode(UUID.self, "user_id"),
                    try $0.decode(Bool.self, "published")
                )
            }
        }
        let recorded = try #require(row, "no gateway_jobs row for \(jobID)", sourceLocation: sourceLocation)
        #expect(
            recorded.0 == kind.rawValue && recorded.1 == user.id.uuid && recorded.2,
            "gateway_jobs row of \(jobID): \(recorded)",
            sourceLocation: sourceLocation
        )
        let message = try await publishedMessage(jobID, sourceLocation: sourceLocation)
        #expect(message.routingKey == kind.rawValue, sourceLocation: sourceLocation)
        #expect(message.properties.type == kind.rawValue, sourceLocation: sourceLocation)
        let body = try JSONValue.parse(message.body)
        #expect(body["jobId"] == .string(jobID.description), "published body \(body)", sourceLocation: sourceLocation)
        return (jobID, body)
    }

    /// The message the gateway published with `jobID` as its message id.
    /// - Throws: `TestFailure` when none arrives within 10 s.
    func publishedMessage(_ jobID: JobID, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Delivery {
        let found = try await RuntimeTestEnvironment.eventually(
            "the gateway's message of job \(jobID) reaches the test's queue (message ids so far)",
            timeout: .seconds(10),
            observe: { published.all.map { $0.properties.messageID ?? "-" } },
            until: { $0.contains(jobID.description) }
        )
        _ = found
        return try #require(published.all.first { $0.properties.messageID == jobID.description })
    }

    /// The jobs the gateway recorded for `user` (`gateway_jobs`), of `kind` when given.
    func recordedJobs(_ user: User, kind: JobType? = nil) async throws -> Int {
        try await admin.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n FROM gateway_jobs WHERE user_id = $1 AND ($2::text IS NULL OR kind = $2)",
                [user.id.uuid, kind?.rawValue]
            ).first?.decode(Int.self, "n") ?? -1
        }
    }

    /// Another request than the one an idempotency key was first used with.
    struct OtherRequest: Sendable {
        var method: HTTPRequest.Method
        var uri: String
        var body: JSONValue?
    }

    /// Checks an `Idempotency-Key` route: the same key and body answer the first job (and record
    /// no second one), the key with `other` (when given) is 422 `idempotency-key-reused`, and a
    /// malformed key 400 `invalid-idempotency-key`.
    func expectIdempotent(
        _ method: HTTPRequest.Method,
        _ uri: String,
        user: User,
        kind: JobType,
        body: JSONValue?,
        other: OtherRequest?,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let key = ["Idempotency-Key": "key-\(UUID())"]
        let before = try await recordedJobs(user, kind: kind)
        let first = try await call(method, uri, token: user.token, json: body, headers: key)
        let (jobID, _) = try await expectAccepted(first, kind, user: user, sourceLocation: sourceLocation)
        let again = try await call(method, uri, token: user.token, json: body, headers: key)
        #expect(
            again.status == 202 && again.json?["jobId"] == .string(jobID.description),
            "a replay answers the first job \(jobID): \(again)",
            sourceLocation: sourceLocation
        )
        #expect(try await recordedJobs(user, kind: kind) == before + 1, sourceLocation: sourceLocation)
        if let other {
            let reused = try await call(other.method, other.uri, token: user.token, json: other.body, headers: key)
            expectProblem(
                reused,
                422,
                "idempotency-key-reused",
                "the key with \(other.method) \(other.uri)",
                sourceLocation: sourceLocation
            )
        }
        let malformed = try await call(
            method,
            uri,
            token: user.token,
            json: body,
            headers: ["Idempotency-Key": String(repeating: "k", count: 256)]
        )
        expectProblem(malformed, 400, "invalid-idempotency-key", "a 256-byte key", sourceLocation: sourceLocation)
    }

    // MARK: Seeds (what the workers would have written)

    /// A profile of `user` as the chart-worker stores it, with `chart` as its stored chart
    /// (none: a profile whose chart is not calculated yet).
    func seedProfile(_ user: User, name: String, chart: String? = RouteGateway.natalChart) async throws -> ProfileID {
        let profile = ProfileID.random()
        try await admin.withTransaction { database in
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [profile.uuid, user.id.uuid, name]
            )
            if let chart {
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, $3::jsonb, 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid, chart]
                )
            }
        }
        return profile
    }

    /// A real natal chart document (Kyiv, 1990-10-07 15:00), as the chart-worker stores it.
    static let natalChart = ReportJourneyTests.chartJSON
}

/// Every operation in the route table with a request that reaches its handler for `user`
/// (valid ids of nobody's, bodies that parse): the table the tests that concern every route walk.
enum RouteCatalogue {
    /// The operations that need no access token.
    static let anonymous: Set<GatewayRoute.Operation> = [
        .healthz, .readyz, .openAPI, .registerDevice, .refreshToken, .receiveAppStoreNotification,
        .createDeviceChallenge,
    ]

    /// The path of `route` with every `{parameter}` replaced by a fresh UUID (`{n}` by 1).
    static func concretePath(_ route: GatewayRoute) -> String {
        route.path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            guard segment.hasPrefix("{") else { return String(segment) }
            return segment == "{n}" ? "1" : UUID().uuidString.lowercased()
        }.joined(separator: "/")
    }
}
