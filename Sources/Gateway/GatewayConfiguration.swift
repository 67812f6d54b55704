import AMQP
import AstroDomain
import Crypto
import Foundation
import Logging
import Postgres
import StoreKitVerification
import WorkerRuntime

/// Everything the gateway reads from its environment (`allVariables`).
///
/// The broker, database, HTTP and logging settings are the ones every service reads
/// (`ServiceConfiguration`, read by the workers' reader, so the same variables mean the same
/// things); the rest are the gateway's own (`variables`). The settings only a worker reads
/// (prefetch, retries, group commit, the outbox) are neither read nor checked here.
public struct GatewayConfiguration: Sendable {
    /// `development` (an ephemeral signing key is allowed) or `production` (`GATEWAY_ENV`).
    public enum Environment: String, Sendable, CaseIterable {
        case development, production
    }

    /// Broker, database, HTTP address, logging and pool settings, read as the workers read them.
    public var service: ServiceConfiguration
    /// `GATEWAY_ENV`.
    public var environment: Environment = .development
    /// The key access tokens are signed with (raw bytes: swift-crypto's key types are not
    /// `Sendable` on Linux), and its id.
    public var signingKeyBytes: Data
    public var signingKeyID: String
    /// True when no key was configured and `signingKey` was generated at start-up.
    public var signingKeyIsEphemeral: Bool
    /// Verification-only keys (a previous signing key during a rotation), by key id, as X9.63 bytes.
    public var extraVerificationKeyBytes: [String: Data] = [:]
    /// `iss` and `aud` of access tokens (`GATEWAY_TOKEN_ISSUER`, `GATEWAY_TOKEN_AUDIENCE`).
    public var issuer = "astrosvitla-gateway"
    public var audience = "astrosvitla-app"
    /// Access token lifetime (`ACCESS_TOKEN_TTL_SECONDS`).
    public var accessTokenLifetime: Duration = .seconds(900)
    /// Refresh token lifetime (`REFRESH_TOKEN_TTL_DAYS`).
    public var refreshTokenLifetime: Duration = .seconds(90 * 86_400)
    /// Largest request body read (`MAX_BODY_BYTES`).
    public var maxBodyBytes = 16_384
    /// Longest a request may wait for a database connection, a statement (unless
    /// `DB_STATEMENT_TIMEOUT_MS` says otherwise) or the broker's confirm, and longest a connection
    /// may stay idle (`REQUEST_TIMEOUT_MS`).
    public var requestTimeout: Duration = .seconds(10)
    /// Where the story-worker stores page pictures (`STORY_STORAGE_ROOT`, the worker's default
    /// when unset); the gateway only reads it.
    public var storyStorageRoot = "story-illustrations"
    /// The port `/metrics` is served on, apart from the API (`GATEWAY_METRICS_PORT`, on
    /// `HTTP_HOST`): the Service the Ingress routes to does not expose it, so the metrics are
    /// never public (issue 29). 0: a free port, logged at start-up.
    public var metricsPort = 9464
    /// The most connections open at once (`GATEWAY_MAX_CONNECTIONS`); one more is closed unread.
    public var maxConnections = 4096
    /// Rate limits and trusted proxies (`RATE_LIMIT_*`, `TRUSTED_PROXIES`; their variables are
    /// `RateLimitConfiguration.variables`).
    public var rateLimits = RateLimitConfiguration()
    /// App Attest (`APP_ATTEST_*`); nil when `APP_ATTEST_APP_ID` is not set.
    public var appAttest: AppAttestSettings?
    /// Per-user daily quotas of paid work (`DailyQuotas.variables`).
    public var quotas = DailyQuotas()
    /// The bounds of the live event streams (`EVENT_STREAMS_PER_ADDRESS`; the rest are fixed).
    public var eventStreams = EventStreamLimits()
    /// Chart results one user may have computed within 24 hours (`CHART_RESULT_DAILY_QUOTA`).
    public var chartResultQuota = ChartResultQuota()
    /// What an App Store notification must satisfy before it is queued (`BILLING_ENVIRONMENT`,
    /// `BILLING_BUNDLE_ID`, `BILLING_APP_APPLE_ID`, `BILLING_TRUSTED_ROOTS`, read by the
    /// billing-worker's parser); nil in development when none is set, and then the endpoint
    /// answers 503.
    public var appStoreVerification: VerificationPolicyConfiguration?
    /// `APP_ATTEST_ALLOW_UNATTESTED`: production without App Attest, said out loud. Without it a
    /// production gateway refuses to start unattested (devices and so identities would be free
    /// to make); with it, it starts and warns.
    public var unattestedDevicesAllowed = false

    /// The gateway's own settings, with their defaults (the README's table mirrors them).
    public static let variables: [ConfigurationVariable] = [
        .init(name: "GATEWAY_ENV", defaultValue: "development", meaning: "development or production"),
        .init(
            name: "GATEWAY_SIGNING_KEY_FILE",
            defaultValue: "none: an ephemeral key (refused in production)",
            meaning: "PEM P-256 private key that signs access tokens"
        ),
        .init(
            name: "GATEWAY_SIGNING_KEY_ID",
            defaultValue: "derived from the public key",
            meaning: "kid of the signing key (1–64 of A-Z a-z 0-9 . _ -)"
        ),
        .init(
            name: "GATEWAY_VERIFY_KEYS_DIR",
            defaultValue: "none",
            meaning: "folder of <kid>.pem P-256 public keys still accepted (rotation)"
        ),
        .init(name: "GATEWAY_TOKEN_ISSUER", defaultValue: "astrosvitla-gateway", meaning: "iss of access tokens"),
        .init(name: "GATEWAY_TOKEN_AUDIENCE", defaultValue: "astrosvitla-app", meaning: "aud of access tokens"),
        .init(name: "ACCESS_TOKEN_TTL_SECONDS", defaultValue: "900", meaning: "access token lifetime (60…3600)"),
        .init(name: "REFRESH_TOKEN_TTL_DAYS", defaultValue: "90", meaning: "refresh token lifetime (1…365)"),
        .init(name: "MAX_BODY_BYTES", defaultValue: "16384", meaning: "largest request body (1024…1048576)"),
        .init(
            name: "REQUEST_TIMEOUT_MS",
            defaultValue: "10000",
            meaning: "longest wait for a connection, a statement or the broker's confirm; idle connections closed"
        ),
        .init(
            name: "GATEWAY_METRICS_PORT",
            defaultValue: "9464",
            meaning:
                "port of GET /metrics (on HTTP_HOST), apart from the API so no ingress exposes it; 0: any free port"
        ),
        .init(
            name: "GATEWAY_MAX_CONNECTIONS",
            defaultValue: "4096",
            meaning: "connections open at once (64…100000); more are closed unread (gateway_connections_refused_total)"
        ),
        .init(
            name: "STORY_STORAGE_ROOT",
            defaultValue: "story-illustrations",
            meaning: "the story-worker's picture folder, read-only (the same volume)"
        ),
        .init(
            name: "APP_ATTEST_APP_ID",
            defaultValue: "none: App Attest off",
            meaning: "TEAMID.bundle.id; when set, registering a device requires an App Attest attestation"
        ),
        .init(
            name: "APP_ATTEST_ALLOW_UNATTESTED",
            defaultValue: "false",
            meaning:
                "true: GATEWAY_ENV=production may run without APP_ATTEST_APP_ID (warns at start-up); otherwise it refuses to start"
        ),
        .init(
            name: "APP_ATTEST_ENVIRONMENT",
            defaultValue: "production",
            meaning: "production or development: whose App Attest keys (aaguid) are accepted"
        ),
        .init(
            name: "APP_ATTEST_ROOT_CA_FILE",
            defaultValue: "none: Apple App Attestation Root CA",
            meaning: "PEM roots trusted instead of Apple's (tests); refused when GATEWAY_ENV=production"
        ),
        .init(
            name: "APP_ATTEST_REQUIRE_ASSERTIONS",
            defaultValue: "false",
            meaning: "true: authenticated POST/PUT/PATCH/DELETE requests must carry X-App-Attest-Assertion"
        ),
        .init(
            name: ChartResultQuota.variable,
            defaultValue: "\(ChartResultQuota.defaultLimit)",
            meaning: "chart results computed (not cached) per user per 24 hours (1…100000, or off); more: 429"
        ),
        .init(
            name: "EVENT_STREAMS_PER_ADDRESS",
            defaultValue: "64",
            meaning: "open GET /v1/events streams per client address (IPv6: per /64) on a replica (1…100000)"
        ),
        .init(
            name: "APP_ATTEST_CHALLENGE_TTL_SECONDS",
            defaultValue: "300",
            meaning: "lifetime of a registration challenge (30…3600)"
        ),
    ]

    /// The App Store verification variables, shared with the billing-worker
    /// (`VerificationPolicyConfiguration.variables`); required when `GATEWAY_ENV=production`.
    public static let appStoreVariables: [ConfigurationVariable] =
        VerificationPolicyConfiguration.variables.map {
            .init(name: $0.name, defaultValue: $0.defaultValue, meaning: $0.meaning)
        }

    /// The settings every service reads, as the gateway reads them (`ServiceConfiguration.variables`
    /// with the gateway's defaults and meanings where they differ from a worker's).
    public static let serviceVariables: [ConfigurationVariable] = ServiceConfiguration.variables.map { variable in
        var variable = variable
        switch variable.name {
        case "HTTP_HOST":
            variable.meaning = "address of the API, /healthz, /readyz and (on GATEWAY_METRICS_PORT) /metrics"
        case "HTTP_PORT":
            variable.defaultValue = "8080"
            variable.meaning = "port of the API, /healthz and /readyz (0: any free port, logged)"
        case "DB_ACQUIRE_TIMEOUT_MS":
            variable.meaning = "wait for a free database connection (at most REQUEST_TIMEOUT_MS)"
        case "DB_STATEMENT_TIMEOUT_MS":
            variable.defaultValue = "REQUEST_TIMEOUT_MS (30000 when DB_RESPONSE_TIMEOUT_MS is set)"
        default: break
        }
        return variable
    }

    /// Every variable the gateway reads besides the tracing ones (`OTEL_*`, read by
    /// `TracingSetup`): the shared settings, its own, the rate limits, the daily quotas and the
    /// App Store policy. The README's Gateway table lists exactly these.
    public static var allVariables: [ConfigurationVariable] {
        serviceVariables + variables + RateLimitConfiguration.variables + DailyQuotas.variables + appStoreVariables
    }

    /// Reads the configuration.
    /// - Parameter environment: the variables (the process environment by default).
    /// - Throws: `ConfigurationError` naming the variable at fault; in production, a missing
    ///   `GATEWAY_SIGNING_KEY_FILE`, App Attest (unless allowed) or `BILLING_ENVIRONMENT`.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> GatewayConfiguration {
        let reader = EnvironmentReader(environment)
        let service = try ServiceConfiguration.read(reader, defaultHTTPPort: 8080)
        func value(_ name: String) -> String? { reader.value(name) }
        func int(_ name: String, _ defaultValue: Int, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
            guard let raw = value(name) else { return defaultValue }
            guard let number = Int(raw), range.contains(number) else {
                throw ConfigurationError(
                    variable: name,
                    problem:
                        "expected a whole number in \(range.lowerBound)…\(range.upperBound), got \(raw.debugDescription)"
                )
            }
            return number
        }

        let mode: Environment
        switch value("GATEWAY_ENV")?.lowercased() {
        case nil, "development": mode = .development
        case "production": mode = .production
        case let other?:
            throw ConfigurationError(
                variable: "GATEWAY_ENV",
                problem: "expected development or production, got \(other.debugDescription)"
            )
        }

        let key: P256.Signing.PrivateKey
        let ephemeral: Bool
        if let path = value("GATEWAY_SIGNING_KEY_FILE") {
            let pem = try readSmallFile(path, variable: "GATEWAY_SIGNING_KEY_FILE")
            do {
                key = try P256.Signing.PrivateKey(pemRepresentation: pem)
            } catch {
                throw ConfigurationError(
                    variable: "GATEWAY_SIGNING_KEY_FILE",
                    problem: "\(path) is not a PEM P-256 private key"
                )
            }
            ephemeral = false
        } else if mode == .production {
            throw ConfigurationError(
                variable: "GATEWAY_SIGNING_KEY_FILE",
                problem: "required when GATEWAY_ENV=production (a PEM P-256 private key that signs access tokens)"
            )
        } else {
            key = P256.Signing.PrivateKey()
            ephemeral = true
        }
        let keyID = value("GATEWAY_SIGNING_KEY_ID") ?? derivedKeyID(key.publicKey)
        guard isValidKeyID(keyID) else {
            throw ConfigurationError(
                variable: "GATEWAY_SIGNING_KEY_ID",
                problem: "expected 1–64 of A-Z a-z 0-9 . _ -, got \(keyID.debugDescription)"
            )
        }

        var configuration = GatewayConfiguration(
            service: service,
            environment: mode,
            signingKey: key,
            signingKeyID: keyID,
            signingKeyIsEphemeral: ephemeral
        )
        if let folder = value("GATEWAY_VERIFY_KEYS_DIR") {
            configuration.extraVerificationKeyBytes = try readVerificationKeys(folder).mapValues(\.x963Representation)
            if configuration.extraVerificationKeyBytes[keyID] != nil {
                throw ConfigurationError(
                    variable: "GATEWAY_VERIFY_KEYS_DIR",
                    problem: "\(keyID).pem has the signing key's id"
                )
            }
        }
        configuration.issuer = value("GATEWAY_TOKEN_ISSUER") ?? configuration.issuer
        configuration.audience = value("GATEWAY_TOKEN_AUDIENCE") ?? configuration.audience
        for (name, text) in [
            ("GATEWAY_TOKEN_ISSUER", configuration.issuer), ("GATEWAY_TOKEN_AUDIENCE", configuration.audience),
        ]
        where text.utf8.count > 200 {
            throw ConfigurationError(variable: name, problem: "longer than 200 bytes")
        }
        configuration.accessTokenLifetime = .seconds(try int("ACCESS_TOKEN_TTL_SECONDS", 900, 60...3600))
        configuration.refreshTokenLifetime = .seconds(try int("REFRESH_TOKEN_TTL_DAYS", 90, 1...365) * 86_400)
        configuration.maxBodyBytes = try int("MAX_BODY_BYTES", 16_384, 1024...1_048_576)
        configuration.requestTimeout = .milliseconds(try int("REQUEST_TIMEOUT_MS", 10_000, 100...120_000))
        configuration.metricsPort = try int("GATEWAY_METRICS_PORT", 9464, 0...65535)
        if configuration.metricsPort != 0, configuration.metricsPort == service.httpPort {
            throw ConfigurationError(
                variable: "GATEWAY_METRICS_PORT",
                problem: "must differ from HTTP_PORT (\(service.httpPort)): /metrics is kept off the API's port"
            )
        }
        configuration.maxConnections = try int("GATEWAY_MAX_CONNECTIONS", 4096, 64...100_000)
        if let root = value("STORY_STORAGE_ROOT") {
            guard root.utf8.count <= 1024, !root.utf8.contains(0) else {
                throw ConfigurationError(variable: "STORY_STORAGE_ROOT", problem: "expected a folder path")
            }
            configuration.storyStorageRoot = root
        }
        configuration.rateLimits = try RateLimitConfiguration.fromEnvironment(environment)
        configuration.eventStreams.streamsPerAddress = try int("EVENT_STREAMS_PER_ADDRESS", 64, 1...100_000)
        do {
            configuration.chartResultQuota = try ChartResultQuota(setting: value(ChartResultQuota.variable))
        } catch {
            throw ConfigurationError(variable: ChartResultQuota.variable, problem: error.problem)
        }
        configuration.appAttest = try AppAttestSettings.fromEnvironment(environment, mode: mode)
        configuration.quotas = try DailyQuotas.fromEnvironment(environment)
        switch value("APP_ATTEST_ALLOW_UNATTESTED")?.lowercased() {
        case nil, "false": configuration.unattestedDevicesAllowed = false
        case "true": configuration.unattestedDevicesAllowed = true
        case let other?:
            throw ConfigurationError(
                variable: "APP_ATTEST_ALLOW_UNATTESTED",
                problem: "expected true or false, got \(other.debugDescription)"
            )
        }
        // Without App Attest a device registration is free, and with it an identity: every
        // per-user limit and quota is then only as strong as the per-address ones (issue 29).
        if mode == .production, configuration.appAttest == nil, !configuration.unattestedDevicesAllowed {
            throw ConfigurationError(
                variable: "APP_ATTEST_APP_ID",
                problem: "required when GATEWAY_ENV=production (TEAMID.bundle.id: devices register with an App "
                    + "Attest attestation); to run production without it, set APP_ATTEST_ALLOW_UNATTESTED=true"
            )
        }
        // Production always verifies Apple's notifications; development only when configured.
        if mode == .production || VerificationPolicyConfiguration.isConfigured(in: environment) {
            do {
                configuration.appStoreVerification = try VerificationPolicyConfiguration.fromEnvironment(environment)
            } catch {
                throw ConfigurationError(variable: error.variable ?? "BILLING_ENVIRONMENT", problem: error.message)
            }
        }
        // A request's statements get its time, not the workers' 30 s, unless set explicitly.
        if value("DB_STATEMENT_TIMEOUT_MS") == nil, configuration.service.database.responseTimeout == nil {
            configuration.service.database.statementTimeout = configuration.requestTimeout
        }
        return configuration
    }

    init(
        service: ServiceConfiguration,
        environment: Environment,
        signingKey: P256.Signing.PrivateKey,
        signingKeyID: String,
        signingKeyIsEphemeral: Bool
    ) {
        self.service = service
        self.environment = environment
        self.signingKeyBytes = signingKey.rawRepresentation
        self.signingKeyID = signingKeyID
        self.signingKeyIsEphemeral = signingKeyIsEphemeral
    }

    /// The key access tokens are signed with.
    public var signingKey: P256.Signing.PrivateKey {
        // The bytes came from a valid key.
        try! P256.Signing.PrivateKey(rawRepresentation: signingKeyBytes)
    }

    /// All keys tokens are verified with: the signing key's public half and the extra ones.
    public var verificationKeys: [String: P256.Signing.PublicKey] {
        var keys = extraVerificationKeyBytes.compactMapValues { try? P256.Signing.PublicKey(x963Representation: $0) }
        keys[signingKeyID] = signingKey.publicKey
        return keys
    }

    /// A key id from the public key: the first 16 hex digits of the SHA-256 of its DER form.
    public static func derivedKeyID(_ key: P256.Signing.PublicKey) -> String {
        SHA256.hash(data: key.derRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `text` may be a `kid`: 1–64 of A-Z a-z 0-9 . _ -.
    public static func isValidKeyID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= AccessTokenVerifier.maxKeyIDBytes
            && text.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }

    private static func readSmallFile(_ path: String, variable: String) throws(ConfigurationError) -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(variable: variable, problem: "cannot read \(path)")
        }
        guard data.count <= 16_384, let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(variable: variable, problem: "\(path) is not a PEM text file of at most 16 KiB")
        }
        return text
    }

    /// `<kid>.pem` public keys of a folder.
    private static func readVerificationKeys(
        _ folder: String
    ) throws(ConfigurationError) -> [String: P256.Signing.PublicKey] {
        let variable = "GATEWAY_VERIFY_KEYS_DIR"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
            throw ConfigurationError(variable: variable, problem: "cannot list \(folder)")
        }
        var keys: [String: P256.Signing.PublicKey] = [:]
        for name in names.sorted() where name.hasSuffix(".pem") {
            let keyID = String(name.dropLast(4))
            guard isValidKeyID(keyID) else {
                throw ConfigurationError(variable: variable, problem: "\(name): the file name is not a valid key id")
            }
            let pem = try readSmallFile(folder + "/" + name, variable: variable)
            guard let key = try? P256.Signing.PublicKey(pemRepresentation: pem) else {
                throw ConfigurationError(variable: variable, problem: "\(name) is not a PEM P-256 public key")
            }
            keys[keyID] = key
        }
        guard keys.count <= 16 else {
            throw ConfigurationError(variable: variable, problem: "more than 16 keys")
        }
        return keys
    }
}
