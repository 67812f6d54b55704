import AppStoreServerAPI
import AstroDomain
import Foundation
import StoreKitVerification
import WorkerRuntime
import X509

/// The billing-worker's own settings, from its environment, validated before it starts.
public struct BillingConfiguration: Sendable {
    /// Who signed transactions must come from and what they must say.
    public var policy: VerificationPolicy
    public var catalog: ProductCatalog
    /// The App Store Server API, for requests that carry only a transaction id.
    public var appStore: AppStoreServerAPIClient?
    /// Where the trusted roots came from, for the start-up log line.
    public var trustedRootsDescription: String
    /// Credit a purchase only to the user whose id is its `appAccountToken`: a transaction
    /// without one is refused (`account-token-missing`). Verify-by-id requires it always.
    public var requireAccountToken: Bool = true

    /// The variables, their defaults and meaning (README's table).
    public static let variables: [WorkerConfiguration.Variable] =
        VerificationPolicyConfiguration.variables.map {
            .init(name: $0.name, defaultValue: $0.defaultValue, meaning: $0.meaning)
        } + [
            .init(
                name: "BILLING_CATALOG_FILE",
                defaultValue: "(built-in, = config/billing-catalog.json)",
                meaning: "the product catalog (JSON)"
            ),
            .init(
                name: "BILLING_REQUIRE_ACCOUNT_TOKEN",
                defaultValue: "true",
                meaning: "refuse signed transactions without an appAccountToken (verify-by-id always requires one)"
            ),
            .init(
                name: "APPSTORE_API_KEY_ID",
                defaultValue: "(unset: verify-by-id off)",
                meaning: "In-App Purchase key id for the App Store Server API"
            ),
            .init(name: "APPSTORE_API_ISSUER_ID", defaultValue: "", meaning: "the key's issuer id"),
            .init(name: "APPSTORE_API_PRIVATE_KEY_FILE", defaultValue: "", meaning: "the key's .p8 file"),
            .init(
                name: "APPSTORE_API_BASE_URL",
                defaultValue: "by environment",
                meaning: "api.storekit.itunes.apple.com (Production) or api.storekit-sandbox… (otherwise)"
            ),
        ]

    /// Reads and validates the billing variables.
    ///
    /// - Throws: `ConfigurationError` naming the variable and what is wrong.
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(ConfigurationError) -> BillingConfiguration {
        func value(_ name: String) -> String? {
            guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
            return text
        }
        // The policy is read by the one parser the gateway uses too (it verifies notifications
        // before queuing them), so the two accept the same data.
        let verification: VerificationPolicyConfiguration
        do {
            verification = try VerificationPolicyConfiguration.fromEnvironment(environment)
        } catch {
            throw ConfigurationError(variable: error.variable ?? "BILLING_ENVIRONMENT", problem: error.message)
        }
        let policy = verification.policy
        let rootsDescription = verification.trustedRootsDescription
        let storeEnvironment = policy.environment
        let bundleID = policy.bundleID
        var catalog = ProductCatalog.defaults
        if let path = value("BILLING_CATALOG_FILE") {
            do {
                catalog = try ProductCatalog.load(from: path)
            } catch {
                throw ConfigurationError(variable: "BILLING_CATALOG_FILE", problem: error.message)
            }
        }
        var appStore: AppStoreServerAPIClient?
        if let keyID = value("APPSTORE_API_KEY_ID") {
            guard let issuerID = value("APPSTORE_API_ISSUER_ID") else {
                throw ConfigurationError(
                    variable: "APPSTORE_API_ISSUER_ID",
                    problem: "required with APPSTORE_API_KEY_ID"
                )
            }
            guard let keyFile = value("APPSTORE_API_PRIVATE_KEY_FILE") else {
                throw ConfigurationError(
                    variable: "APPSTORE_API_PRIVATE_KEY_FILE",
                    problem: "required with APPSTORE_API_KEY_ID (the .p8 file of the In-App Purchase key)"
                )
            }
            let defaultBase =
                storeEnvironment == .production
                ? AppStoreServerAPIConfiguration.production : AppStoreServerAPIConfiguration.sandbox
            let baseText = value("APPSTORE_API_BASE_URL") ?? defaultBase.absoluteString
            guard let baseURL = URL(string: baseText), baseURL.scheme == "https" || baseURL.scheme == "http" else {
                throw ConfigurationError(variable: "APPSTORE_API_BASE_URL", problem: "not an http(s) URL")
            }
            do {
                let key = try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: keyFile)
                appStore = AppStoreServerAPIClient(
                    configuration: try AppStoreServerAPIConfiguration(
                        baseURL: baseURL,
                        keyID: keyID,
                        issuerID: issuerID,
                        bundleID: bundleID,
                        signingKey: key
                    )
                )
            } catch {
                throw ConfigurationError(variable: "APPSTORE_API_PRIVATE_KEY_FILE", problem: "\(error)")
            }
        }
        var requireAccountToken = true
        if let text = value("BILLING_REQUIRE_ACCOUNT_TOKEN") {
            switch text.lowercased() {
            case "1", "true", "yes", "on": requireAccountToken = true
            case "0", "false", "no", "off": requireAccountToken = false
            default:
                throw ConfigurationError(variable: "BILLING_REQUIRE_ACCOUNT_TOKEN", problem: "expected true or false")
            }
        }
        return BillingConfiguration(
            policy: policy,
            catalog: catalog,
            appStore: appStore,
            trustedRootsDescription: rootsDescription,
            requireAccountToken: requireAccountToken
        )
    }
}
