import AstroDomain
import Foundation
import Hummingbird
import Postgres
import StoreKitVerification

/// The dependencies of the routes: how tokens are made and checked, where state is kept, where
/// jobs are published.
public struct GatewayServices: Sendable {
    let signer: AccessTokenSigner
    let verifier: AccessTokenVerifier
    let store: GatewayStore
    let resources: ResourceStore
    let pool: PostgresPool
    /// Where jobs are published (`AMQPPublisher` in the gateway).
    let publisher: any JobPublishing
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
    ///   - publisher: A confirming publisher to the broker (`AMQPPublisher`).
    ///   - metrics: Where request and publish figures go.
    public init(
        configuration: GatewayConfiguration,
        pool: PostgresPool,
        publisher: any JobPublishing,
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

    /// The request body reader every route shares.
    var body: BodyReader { BodyReader(maxBytes: maxBodyBytes, timeout: requestTimeout, deadlines: deadlines) }

    /// The path from a request to a queued job.
    var jobs: GatewayRoutes.JobAcceptor {
        GatewayRoutes.JobAcceptor(store: store, publisher: publisher, metrics: metrics, timeout: requestTimeout)
    }

    /// The authenticated routes' middleware, with App Attest assertions when they are required.
    var authenticator: Authenticator {
        Authenticator(
            verifier: verifier,
            rateLimiter: rateLimiter,
            deletedUsers: deletedUsers,
            assertions: appAttest.flatMap { appAttest in
                appAttest.settings.requireAssertions
                    ? AssertionCheck(appAttest: appAttest, store: store, body: body) : nil
            }
        )
    }
}
