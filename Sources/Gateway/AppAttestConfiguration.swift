import AppAttest
import Foundation
import WorkerRuntime

/// App Attest settings (`APP_ATTEST_*`); App Attest is on when `APP_ATTEST_APP_ID` is set.
public struct AppAttestSettings: Sendable {
    /// `TEAMID.bundle.id` (`APP_ATTEST_APP_ID`).
    public var appID: String
    /// Whose keys are accepted (`APP_ATTEST_ENVIRONMENT`): production (`appattest`) or
    /// development (`appattestdevelop`).
    public var environment: AppAttestEnvironment = .production
    /// The PEM of the roots trusted instead of Apple's (`APP_ATTEST_ROOT_CA_FILE`), development
    /// only; nil: Apple App Attestation Root CA, shipped with the gateway.
    public var rootPEM: String?
    /// Whether authenticated POST, PUT, PATCH and DELETE requests must carry an assertion
    /// (`APP_ATTEST_REQUIRE_ASSERTIONS`).
    public var requireAssertions = false
    /// How long a registration challenge may be used (`APP_ATTEST_CHALLENGE_TTL_SECONDS`).
    public var challengeLifetime: Duration = .seconds(300)

    /// Reads the settings; nil when `APP_ATTEST_APP_ID` is not set.
    /// - Throws: `ConfigurationError` naming the variable at fault; a root file in production;
    ///   assertions required without an app id.
    static func fromEnvironment(
        _ environment: [String: String],
        mode: GatewayConfiguration.Environment
    ) throws(ConfigurationError) -> AppAttestSettings? {
        let reader = EnvironmentReader(environment)
        func value(_ name: String) -> String? { reader.value(name) }
        let requireAssertions = try reader.bool("APP_ATTEST_REQUIRE_ASSERTIONS", default: false)
        guard let appID = value("APP_ATTEST_APP_ID") else {
            if requireAssertions {
                throw ConfigurationError(
                    variable: "APP_ATTEST_REQUIRE_ASSERTIONS",
                    problem: "assertions need App Attest: set APP_ATTEST_APP_ID too"
                )
            }
            return nil
        }
        guard isValidAppID(appID) else {
            throw ConfigurationError(
                variable: "APP_ATTEST_APP_ID",
                problem:
                    "expected TEAMID.bundle.id (a 10-character team id, a dot, a bundle id), got \(appID.debugDescription)"
            )
        }
        var settings = AppAttestSettings(appID: appID)
        settings.requireAssertions = requireAssertions
        switch value("APP_ATTEST_ENVIRONMENT")?.lowercased() {
        case nil, "production": settings.environment = .production
        case "development": settings.environment = .development
        case let other?:
            throw ConfigurationError(
                variable: "APP_ATTEST_ENVIRONMENT",
                problem: "expected production or development, got \(other.debugDescription)"
            )
        }
        if let path = value("APP_ATTEST_ROOT_CA_FILE") {
            // Trusting another root would let anyone attest: only outside production.
            guard mode != .production else {
                throw ConfigurationError(
                    variable: "APP_ATTEST_ROOT_CA_FILE",
                    problem: "refused when GATEWAY_ENV=production: production trusts Apple's App Attestation root only"
                )
            }
            guard let data = FileManager.default.contents(atPath: path), data.count <= 65_536,
                let pem = String(data: data, encoding: .utf8)
            else {
                throw ConfigurationError(
                    variable: "APP_ATTEST_ROOT_CA_FILE",
                    problem: "cannot read \(path) (a PEM file of at most 64 KiB)"
                )
            }
            do {
                _ = try AttestationVerifier.roots(pem: pem)
            } catch {
                throw ConfigurationError(variable: "APP_ATTEST_ROOT_CA_FILE", problem: "\(path): \(error.detail)")
            }
            settings.rootPEM = pem
        }
        if let raw = value("APP_ATTEST_CHALLENGE_TTL_SECONDS") {
            guard let seconds = Int(raw), (30...3600).contains(seconds) else {
                throw ConfigurationError(
                    variable: "APP_ATTEST_CHALLENGE_TTL_SECONDS",
                    problem: "expected a whole number in 30…3600, got \(raw.debugDescription)"
                )
            }
            settings.challengeLifetime = .seconds(seconds)
        }
        return settings
    }

    init(appID: String) {
        self.appID = appID
    }

    /// A team id (10 of A-Z 0-9), a dot, and a bundle id (A-Z a-z 0-9 . -), at most 155 bytes.
    static func isValidAppID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count >= 12, bytes.count <= 155, bytes[10] == UInt8(ascii: ".") else { return false }
        let team = bytes[0..<10].allSatisfy {
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
        }
        let bundle = bytes[11...].allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
                true
            default: false
            }
        }
        return team && bundle
    }
}

/// The verifiers built from the settings, held by `GatewayServices`.
struct AppAttestService: Sendable {
    let settings: AppAttestSettings
    let attestations: AttestationVerifier
    let assertions: AssertionVerifier

    init(_ settings: AppAttestSettings) {
        self.settings = settings
        // The file was read and parsed when the configuration was.
        let roots =
            settings.rootPEM.flatMap { try? AttestationVerifier.roots(pem: $0) } ?? [AttestationVerifier.appleRoot]
        attestations = AttestationVerifier(appID: settings.appID, environment: settings.environment, roots: roots)
        assertions = AssertionVerifier(appID: settings.appID)
    }
}
