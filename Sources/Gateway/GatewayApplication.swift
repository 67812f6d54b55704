import AMQP
import AstroDomain
import Foundation
import Hummingbird
import Logging
import Postgres
import StoreKitVerification
import Synchronization
import WorkerRuntime

/// The dependencies of the routes: how tokens are made and checked, where state is kept, where
/// jobs are published.
public struct GatewayServices: Sendable {
    let signer: AccessTokenSigner
    let verifier: AccessTokenVerifier
    let store: GatewayStore
    let resources: ResourceStore
    let pool: PostgresPool
    let publisher: AMQPPublisher
    let metrics: GatewayMetrics
    /// The live events of this replica (`GET /v1/events`, long polls), fed by `EventSubscription`.
    let events: EventHub
    let refreshTokenLifetime: Duration
    let maxBodyBytes: Int
    let requestTimeout: Duration
    /// The one timer behind every request's body deadline and long-poll wait.
    let deadlines = Deadlines()
    /// Which connections their clients closed, for the event streams (ConnectionWatch.swift).
    let connections = ConnectionWatch()
    /// Magical Stories: the `stories` schema (read-only) and the pictures' storage root.
    let stories: StoryStore
    let illustrations: IllustrationFiles
    let rateLimiter: RateLimiter
    /// App Attest verification, when `APP_ATTEST_APP_ID` is set.
    let appAttest: AppAttestService?
    /// The users whose deletion started within the access token lifetime (DeletedUsers.swift).
    let deletedUsers: DeletedUsers
    /// Per-user daily quotas of paid work (DailyQuotas.swift).
    let quotas: DailyQuotas
    /// Chart results one user may have computed within 24 hours (ChartJobRoutes.swift).
    let chartResultQuota: ChartResultQuota
    /// Verifies App Store notifications before they are queued (the billing-worker's verifier,
    /// under the same policy); nil when not configured (development only), and then the
    /// endpoint answers 503.
    let appStoreVerifier: SignedDataVerifier?

    /// - Parameters:
    ///   - configuration: Keys, lifetimes and limits.
    ///   - pool: The database (the gateway's role).
    ///   - publisher: A confirming publisher to the broker.
    ///   - metrics: Where request and publish figures go.
    public init(
        configuration: GatewayConfiguration,
        pool: PostgresPool,
        publisher: AMQPPublisher,
        metrics: GatewayMetrics
    ) {
        signer = AccessTokenSigner(
            keyID: configuration.signingKeyID,
            key: configuration.signingKey,
            issuer: configuration.issuer,
            audience: configuration.audience,
            lifetime: configuration.accessTokenLifetime
        )
        verifier = AccessTokenVerifier(
            keys: configuration.verificationKeys,
            issuer: configuration.issuer,
            audience: configuration.audience,
            maxLifetime: configuration.accessTokenLifetime
        )
        store = GatewayStore(pool: pool)
        quotas = configuration.quotas
        resources = ResourceStore(pool: pool)
        self.pool = pool
        self.publisher = publisher
        self.metrics = metrics
        let events = EventHub(limits: configuration.eventStreams, metrics: metrics)
        self.events = events
        refreshTokenLifetime = configuration.refreshTokenLifetime
        maxBodyBytes = configuration.maxBodyBytes
        requestTimeout = configuration.requestTimeout
        stories = StoryStore(pool: pool)
        illustrations = IllustrationFiles(root: configuration.storyStorageRoot)
        rateLimiter = RateLimiter(configuration: configuration.rateLimits, metrics: metrics)
        appAttest = configuration.appAttest.map(AppAttestService.init)
        chartResultQuota = configuration.chartResultQuota
        // Five minutes beyond the token lifetime: a deletion's erasure sweeps refresh tokens in
        // its last step, and a token minted just before that lives one lifetime more.
        // Every deletion this replica learns of (its own or, within a second, another's) ends the
        // user's open event streams here.
        deletedUsers = DeletedUsers(window: configuration.accessTokenLifetime + .seconds(300)) { users in
            events.endStreams(ofDeleted: users)
        }
        appStoreVerifier = configuration.appStoreVerification.map { SignedDataVerifier(policy: $0.policy) }
    }
}

/// The gateway's routes and middleware.
public enum GatewayRoutes {
    /// Header carrying the request id, read from the client when well-formed, else made up.
    static let requestIDHeader = HTTPFields.Element.Name("X-Request-Id")!
    static let idempotencyKeyHeader = HTTPFields.Element.Name("Idempotency-Key")!

    /// Builds the router from `GatewayAPI.routes`: `/healthz`, `/readyz`, `/openapi.yaml`, `POST /v1/devices`, `POST /v1/token`, `POST /v1/profiles`,
    /// `GET /v1/jobs/{id}`.
    public static func router(_ services: GatewayServices) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        // Outermost: the request's span and trace id cover everything below (RequestTracing.swift).
        router.add(middleware: TraceMiddleware())
        router.add(middleware: RequestMiddleware(metrics: services.metrics))
        // Inside RequestMiddleware, so a 429 is a logged, counted problem with the request id.
        router.add(middleware: RateLimitMiddleware(limiter: services.rateLimiter))
        // Before App Attest: a deleted user's device key is gone, and the answer should say why.
        if services.appAttest?.settings.requireAssertions == true {
            router.add(middleware: AppAttestAssertionMiddleware(services: services))
        }
        for route in GatewayAPI.routes {
            let operation = route.operation
            router.on(RouterPath(route.path), method: route.method) { request, context in
                try await handle(operation, request, context: context, services)
            }
        }
        return router
    }

    /// The handler of each operation.
    static func handle(
        _ operation: GatewayRoute.Operation,
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws -> Response {
        switch operation {
        case .healthz:
            return text("ok\n")
        case .readyz:
            let database = await services.pool.ping()
            let broker = services.publisher.isConnected && !services.publisher.isBlocked
            let events = services.events.isSubscribed
            guard database, broker, events else {
                throw Problem.unavailable(
                    "not-ready",
                    "database \(database ? "reachable" : "unreachable"), broker \(broker ? "connected" : "not connected"), "
                        + "events \(events ? "subscribed" : "not subscribed")"
                )
            }
            return text("ready\n")
        case .openAPI:
            guard let document = GatewayAPI.document else {
                throw Problem(
                    status: 500,
                    code: "internal-error",
                    title: "Internal error",
                    detail: "the OpenAPI document is missing from this build"
                )
            }
            return text(document, contentType: "application/yaml")
        case .registerDevice:
            return try await registerDevice(request, context: context, services)
        case .refreshToken:
            return try await refresh(request, context: context, services)
        case .createProfile:
            return try await createProfile(request, context: context, services)
        case .getJob:
            return try await jobWithWait(request, context: context, services)
        case .streamEvents:
            return try await events(request, context: context, services)
        case .listChildren:
            return try await listChildren(request, context: context, services)
        case .listChildAchievements:
            return try await childAchievements(request, context: context, services)
        case .createStory:
            return try await createStory(request, context: context, services)
        case .listStories:
            return try await listStories(request, context: context, services)
        case .getStory:
            return try await getStory(request, context: context, services)
        case .illustrateStory:
            return try await illustrateStory(request, context: context, services)
        case .recordStoryRead:
            return try await recordRead(request, context: context, services)
        case .getStoryPageImage:
            return try await pageImage(request, context: context, services)
        case .receiveAppStoreNotification:
            return try await appStoreNotification(request, context: context, services)
        case .listProfiles:
            return try await listProfiles(request, context: context, services)
        case .getProfile:
            return try await getProfile(request, context: context, services)
        case .updateProfile:
            return try await updateProfile(request, context: context, services)
        case .deleteProfile:
            return try await deleteProfile(request, context: context, services)
        case .getProfileChart:
            return try await getProfileChart(request, context: context, services)
        case .createPurchase:
            return try await createPurchase(request, context: context, services)
        case .getCredits:
            return try await getCredits(request, context: context, services)
        case .listLedger:
            return try await listLedger(request, context: context, services)
        case .requestReport:
            return try await requestReport(request, context: context, services)
        case .getReport:
            return try await getReport(request, context: context, services)
        case .listReports:
            return try await listReports(request, context: context, services)
        case .createDeviceChallenge:
            return try await createDeviceChallenge(request, context: context, services)
        case .putConsent:
            return try await putConsent(request, context: context, services)
        case .getConsent:
            return try await getConsent(request, context: context, services)
        case .deleteCurrentUser:
            return try await deleteCurrentUser(request, context: context, services)
        case .exportCurrentUser:
            return try await exportCurrentUser(request, context: context, services)
        case .getExport:
            return try await getExport(request, context: context, services)
        case .getProfileChartSVG:
            return try await getProfileChartSVG(request, context: context, services)
        case .requestSynastry:
            return try await requestSynastry(request, context: context, services)
        case .requestTransits:
            return try await requestTransits(request, context: context, services)
        case .requestReturn:
            return try await requestReturn(request, context: context, services)
        case .requestWheel:
            return try await requestWheel(request, context: context, services)
        case .getChartResult:
            return try await getChartResult(request, context: context, services)
        }
    }

    // MARK: Identity

    static func registerDevice(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws -> Response {
        if services.appAttest != nil {
            return try await registerAttestedDevice(request, context: context, services)
        }
        // Without App Attest no member is read, but a body that is not an object, or App Attest
        // members not shaped as the document says, is a client bug to report, not to ignore.
        let data = try await body(request, services)
        if !data.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            let object = try jsonObject(data)
            for (name, code, maxBytes) in [
                ("keyId", "invalid-key-id", Int.max), ("attestation", "invalid-attestation", Int.max),
                ("challenge", "invalid-challenge", 128),
            ] {
                guard let member = object[name] else { continue }
                guard case .string(let text) = member, text.utf8.count <= maxBytes else {
                    throw Problem.invalid(code, "\(name): not shaped as documented", field: name)
                }
            }
        }
        let refreshToken = RefreshToken.make()
        let user = try await database(context) {
            try await services.store.createUser(
                refreshTokenHash: RefreshToken.hash(refreshToken),
                lifetime: services.refreshTokenLifetime
            )
        }
        context.logger.info("device registered", metadata: ["user.id": "\(user)"])
        return try tokens(user: user, refreshToken: refreshToken, status: .created, services)
    }

    static func refresh(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws
        -> Response
    {
        let json = try jsonObject(try await body(request, services))
        guard case .string(let presented)? = json["refreshToken"], RefreshToken.isWellFormed(presented) else {
            throw Problem.invalid(
                "invalid-refresh-token",
                "refreshToken: expected the refresh token",
                field: "refreshToken"
            )
        }
        let next = RefreshToken.make()
        let rotation = try await database(context) {
            try await services.store.rotate(
                refreshTokenHash: RefreshToken.hash(presented),
                newHash: RefreshToken.hash(next),
                lifetime: services.refreshTokenLifetime
            )
        }
        let user: UserID
        switch rotation {
        case .rotated(let owner):
            user = owner
        case .reused(let owner):
            // A used token came back: a copy exists, so the family (the live token too) is gone.
            context.logger.notice("refresh token reused; its family revoked", metadata: ["user.id": "\(owner)"])
            throw Problem.unauthorized("invalid-refresh-token", "the refresh token is unknown, used or expired")
        case .refused:
            throw Problem.unauthorized("invalid-refresh-token", "the refresh token is unknown, used or expired")
        }
        // A refresh is rare enough to ask the database: no new access token once a deletion
        // started, even one this replica has not read yet (the erasure sweeps the rotated token).
        if services.deletedUsers.contains(user) { throw userDeleted }
        if try await database(context, { try await services.store.deletionJob(user: user) }) != nil {
            throw userDeleted
        }
        return try tokens(user: user, refreshToken: next, status: .ok, services)
    }

    static func tokens(
        user: UserID,
        refreshToken: String,
        status: HTTPResponse.Status,
        _ services: GatewayServices
    )
        throws -> Response
    {
        let access = try services.signer.sign(user: user)
        return json(
            [
                "userId": .string(user.description),
                "accessToken": .string(access),
                "tokenType": "Bearer",
                "expiresIn": .number(Double(services.signer.lifetime.components.seconds)),
                "refreshToken": .string(refreshToken),
            ],
            status: status
        )
    }

    /// The caller, from `Authorization: Bearer <access token>`.
    /// - Parameter chargeRateLimit: Whether this call spends one of the user's requests; false
    ///   for a check that precedes the handler's own (the App Attest middleware), so that a
    ///   request is counted once.
    /// - Throws: `Problem` 401 when the header is missing or the token is refused, 429 when the
    ///   user is over the per-user rate limit.
    static func authenticate(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices,
        chargeRateLimit: Bool = true,
        allowDeleted: Bool = false
    ) throws
        -> UserID
    {
        try authenticatedClaims(
            request,
            context: context,
            services,
            chargeRateLimit: chargeRateLimit,
            allowDeleted: allowDeleted
        ).subject
    }

    /// The caller's verified token claims (who, and until when), checked as `authenticate` checks.
    /// - Throws: as `authenticate`.
    static func authenticatedClaims(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices,
        chargeRateLimit: Bool = true,
        allowDeleted: Bool = false
    ) throws
        -> AccessTokenClaims
    {
        guard let header = request.headers[.authorization] else {
            throw Problem.unauthorized("missing-token", "an Authorization: Bearer access token is required")
        }
        guard header.utf8.count <= AccessTokenVerifier.maxTokenBytes + 7, header.hasPrefix("Bearer ") else {
            throw Problem.unauthorized("invalid-token", "expected Authorization: Bearer <access token>")
        }
        let claims: AccessTokenClaims
        do {
            claims = try services.verifier.verify(String(header.dropFirst(7)))
        } catch {
            context.logger.notice("access token refused", metadata: ["token.error": "\(error.code)"])
            throw Problem.unauthorized(error.code, error.description)
        }
        // The per-user limit is spent here, once the token is verified: a forged token cannot
        // spend another user's requests, and the token is verified once per request.
        if chargeRateLimit { try services.rateLimiter.check(user: claims.subject) }
        // A deleted user's token is refused on every route but `DELETE /v1/me` (DeletedUsers.swift).
        if !allowDeleted, services.deletedUsers.contains(claims.subject) { throw userDeleted }
        return claims
    }

    // MARK: Jobs

    static func createProfile(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    )
        async throws -> Response
    {
        let user = try authenticate(request, context: context, services)
        let idempotencyKey = try idempotencyKey(request)
        let data = try await body(request, services)
        guard case .object(var members) = try jsonObject(data) else { throw Problem.invalid("invalid-json", "") }
        // This route creates a profile: an id to update (someone else's, perhaps) is refused here
        // rather than left to the worker.
        if let id = members["profile"]?["id"], id != .null {
            throw Problem.invalid(
                "unexpected-field",
                "profile.id: a new profile gets its id from the server",
                field: "profile.id"
            )
        }
        // The user comes from the token only; a job id from the body is not the client's to pick
        // (this one only validates; `accept` gives the job its id).
        members["userId"] = .string(user.description)
        members["jobId"] = .string(JobID.random().description)
        let validated: ChartCalculateRequest
        do {
            validated = try ChartCalculateRequest(json: .object(members))
        } catch {
            throw Problem.chartInput(error)
        }
        return try await accept(
            .chartCalculate,
            user: user,
            idempotencyKey: idempotencyKey,
            requestHash: requestHash(.chartCalculate, path: "POST /v1/profiles", data),
            context: context,
            services
        ) { jobID in
            var job = validated
            job.jobID = jobID
            return (try job.jsonData(), [:])
        }
    }

    /// Records that the broker confirmed `jobID`. The job is queued whatever happens here, so a
    /// failure is logged and the answer is still 202: a 503 would invite a retry without
    /// `Idempotency-Key` that makes a second job. A retry with the key publishes the same job id
    /// again, which the worker runs once.
    static func markPublished(_ jobID: JobID, context: BasicRequestContext, _ services: GatewayServices) async {
        do {
            try await services.store.markPublished(jobID)
        } catch {
            context.logger.error(
                "job queued, but its confirm was not recorded",
                metadata: ["job.id": "\(jobID)", "db.error": "\(error)"]
            )
        }
    }

    /// Takes back the published mark of a job without a key that the broker did not confirm. A
    /// failure is logged: the answer is the 503 of the failed publish either way, and the row
    /// (whose id no one was told) then shows a job as queued that never was.
    static func unmarkPublished(_ jobID: JobID, context: BasicRequestContext, _ services: GatewayServices) async {
        do {
            try await services.store.unmarkPublished(jobID)
        } catch {
            context.logger.error(
                "job not queued, but its published mark was not taken back",
                metadata: ["job.id": "\(jobID)", "db.error": "\(error)"]
            )
        }
    }

    /// Publishes a job to `astro.gateway-requests` (the gateway's own request exchange) and returns
    /// once the broker confirmed it.
    /// - Throws: `Problem` 503 when the broker refuses it or does not confirm in time.
    static func publish(
        _ type: JobType,
        jobID: JobID,
        body: Data,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws {
        var properties = MessageProperties(contentType: "application/json")
        properties.persistent = true
        properties.messageID = jobID.description
        properties.type = type.rawValue
        properties.timestamp = Date()
        properties.appID = "gateway"
        properties.headers = GatewayTrace.messageHeaders()
        let message = OutgoingMessage(
            exchange: BrokerNames.gatewayRequestsExchange,
            routingKey: type.rawValue,
            body: body,
            properties: properties,
            mandatory: true
        )
        do {
            try await services.publisher.publish(message, timeout: services.requestTimeout)
            services.metrics.recordPublish(outcome: "confirmed")
        } catch {
            services.metrics.recordPublish(outcome: "failed")
            context.logger.error(
                "publish not confirmed",
                metadata: ["job.id": "\(jobID)", "amqp.error": "\(error)"]
            )
            throw Problem.unavailable("broker-unavailable", "the job could not be queued; try again")
        }
    }

    /// `GET /v1/jobs/{id}`; `user` is the caller when a long poll already authenticated it (a
    /// token that expired during the wait still gets its answer, and the request counts once).
    static func job(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices,
        user authenticated: UserID? = nil
    ) async throws
        -> Response
    {
        let user = try authenticated ?? authenticate(request, context: context, services)
        guard let text = context.parameters.get("id"), text.utf8.count <= 36, let jobID = JobID(text) else {
            throw Problem.notFound()
        }
        guard let view = try await database(context, { try await services.store.job(jobID, user: user) }) else {
            throw Problem.notFound()
        }
        var object: [String: JSONValue] = [
            "jobId": .string(jobID.description),
            "type": .string(view.kind),
            "status": .string(view.status),
            "attempts": .number(Double(view.attempts)),
            "createdAt": .string(ISO8601.string(from: view.createdAt)),
        ]
        if let finished = view.finishedAt { object["finishedAt"] = .string(ISO8601.string(from: finished)) }
        if let error = view.error, let value = try? JSONValue.parse(Data(error.utf8)) { object["error"] = value }
        if let result = view.result, let value = try? JSONValue.parse(Data(result.utf8)) { object["result"] = value }
        return json(object, status: .ok)
    }

    // MARK: Helpers

    /// The `Idempotency-Key`: 1–255 visible ASCII characters, or absent.
    static func idempotencyKey(_ request: Request) throws -> String? {
        guard let key = request.headers[idempotencyKeyHeader] else { return nil }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw Problem.invalid("invalid-idempotency-key", "Idempotency-Key: 1–255 visible ASCII characters")
        }
        return key
    }

    /// The request body, at most `maxBodyBytes`, read within `requestTimeout` (a client that
    /// trickles its body in keeps the connection from idling out, not the request from ending).
    /// - Throws: `Problem` 413 when the body is too large, 408 when it is not all there in time.
    static func body(_ request: Request, _ services: GatewayServices, limit: Int? = nil) async throws -> Data {
        let limit = limit ?? services.maxBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw tooLarge(limit)
        }
        enum Read: Sendable {
            case body(ByteBuffer)
            case failed
            case timedOut
        }
        let timeout = services.requestTimeout
        // The read runs in a task of its own so that the shared timer can cancel it at the
        // deadline (see `Deadlines` for why not a racing sleep).
        let reader = Task { () -> ByteBuffer? in
            var request = request
            return try? await request.collectBody(upTo: limit)
        }
        let timedOut = Atomic<Bool>(false)
        let token = services.deadlines.schedule(after: timeout) {
            timedOut.store(true, ordering: .relaxed)
            reader.cancel()
        }
        let buffer = await withTaskCancellationHandler {
            await reader.value
        } onCancel: {
            reader.cancel()
        }
        services.deadlines.cancel(token)
        let read: Read
        if timedOut.load(ordering: .relaxed) {
            read = .timedOut
        } else if let buffer {
            read = .body(buffer)
        } else {
            read = .failed
        }
        switch read {
        case .body(let buffer): return Data(buffer.readableBytesView)
        case .failed: throw tooLarge(limit)
        case .timedOut:
            throw Problem(
                status: 408,
                code: "request-timeout",
                title: "Request timeout",
                detail: "the body did not arrive within \(timeout.milliseconds) ms"
            )
        }
    }

    static func tooLarge(_ services: GatewayServices) -> Problem { tooLarge(services.maxBodyBytes) }

    static func tooLarge(_ limit: Int) -> Problem {
        Problem(
            status: 413,
            code: "body-too-large",
            title: "Request body too large",
            detail: "the body is over \(limit) bytes"
        )
    }

    /// The body as a JSON object.
    /// - Throws: `Problem` 400 `invalid-json` for anything else.
    static func jsonObject(_ data: Data) throws -> JSONValue {
        guard let value = try? JSONValue.parse(data), case .object = value else {
            throw Problem.invalid("invalid-json", "the body is not a JSON object")
        }
        return value
    }

    /// Runs a database call; a pool or connection failure answers 503, not 500.
    static func database<T: Sendable>(
        _ context: BasicRequestContext,
        _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError where error.kind != .server && error.kind != .decoding {
            context.logger.error("database unavailable", metadata: ["db.error": "\(error)"])
            throw Problem.unavailable("database-unavailable", "the database is not reachable; try again")
        }
    }

    static func json(_ object: [String: JSONValue], status: HTTPResponse.Status) -> Response {
        Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: JSONValue.object(object).jsonData()))
        )
    }

    static func text(_ text: String, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Gives every request an id (the client's `X-Request-Id` when it is 1–64 safe characters),
/// puts it on every log line and on the response, turns every error into a problem+json answer,
/// logs and counts the request.
struct RequestMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    let metrics: GatewayMetrics

    func handle(
        _ request: Request,
        context: BasicRequestContext,
        next: (Request, BasicRequestContext) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        var context = context
        let requestID = Self.requestID(request.headers[GatewayRoutes.requestIDHeader])
        // One id per request on every log line: ours (the client's when well-formed) replaces
        // the one Hummingbird made up, under its key (`context.id` reads it).
        context.logger[metadataKey: "hb.request.id"] = "\(requestID)"
        var response: Response
        do {
            response = try await next(request, context)
        } catch let problem as Problem {
            response = Self.response(problem)
        } catch let error as HTTPResponseError
            where error.status == .notFound
            && !GatewayAPI.methods(forPath: request.uri.path).isEmpty
            && !GatewayAPI.methods(forPath: request.uri.path).contains(request.method)
        {
            // A known path asked with a method it does not have: 405 with the methods it has
            // (RFC 9110 §15.5.6), not 404.
            let allowed = GatewayAPI.methods(forPath: request.uri.path)
            response = Self.response(
                Problem(
                    status: 405,
                    code: "method-not-allowed",
                    title: "Method not allowed",
                    detail:
                        "\(request.method.rawValue) is not allowed here; allowed: \(allowed.map(\.rawValue).joined(separator: ", "))"
                )
            )
            response.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ")
        } catch let error as HTTPResponseError {
            let status = error.status
            response = Self.response(
                Problem(
                    status: status.code,
                    code: status == .notFound ? "not-found" : "http-\(status.code)",
                    title: status.reasonPhrase,
                    detail: status == .notFound ? "no such resource" : status.reasonPhrase
                )
            )
        } catch {
            // An unexpected error's description may quote the request: its detail at debug only.
            FailureLogging.log(
                "request failed",
                level: .error,
                code: "internal-error",
                publicReason: FailureLogging.publicReason(of: error) ?? "\(type(of: error))",
                detail: String(reflecting: error),
                logger: context.logger
            )
            response = Self.response(
                Problem(status: 500, code: "internal-error", title: "Internal error", detail: "the request failed")
            )
        }
        response.headers[GatewayRoutes.requestIDHeader] = requestID
        if !GatewayAPI.isDocumented(
            status: response.status.code,
            method: request.method,
            route: context.endpointPath
        ) {
            // The route table, and so openapi.yaml, is missing this answer.
            context.logger.error(
                "status not in the route table",
                metadata: ["http.route": "\(context.endpointPath ?? "")", "http.status": "\(response.status.code)"]
            )
        }
        let elapsed = ContinuousClock.now - started
        metrics.recordRequest(
            route: context.endpointPath ?? "unmatched",
            status: response.status.code,
            duration: elapsed
        )
        context.logger.info(
            "request",
            metadata: [
                "http.method": "\(request.method.rawValue)",
                "http.route": "\(context.endpointPath ?? "unmatched")",
                "http.status": "\(response.status.code)",
                "http.duration_ms":
                    "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
            ]
        )
        return response
    }

    static func requestID(_ header: String?) -> String {
        if let header, (1...64).contains(header.utf8.count),
            header.utf8.allSatisfy({ byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
                    true
                default: false
                }
            })
        {
            return header
        }
        return UUID().uuidString.lowercased()
    }

    static func response(_ problem: Problem) -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfter = problem.retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        if problem.status == 401 { headers[.wwwAuthenticate] = "Bearer" }
        return Response(
            status: HTTPResponse.Status(code: problem.status),
            headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: problem.json.jsonData()))
        )
    }
}
