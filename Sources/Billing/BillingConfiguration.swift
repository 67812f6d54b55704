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
    public static let variables: [WorkerConfiguration.Variable] = [
        .init(
            name: "BILLING_ENVIRONMENT",
            defaultValue: "(required)",
            meaning: "Production, Sandbox, Xcode or LocalTesting: transactions from any other are refused"
        ),
        .init(
            name: "BILLING_BUNDLE_ID",
            defaultValue: BillingDefaults.bundleID,
            meaning: "the app whose purchases count"
        ),
        .init(
            name: "BILLING_APP_APPLE_ID",
            defaultValue: "(required for Production)",
            meaning: "the app's Apple ID, checked in notifications"
        ),
        .init(
            name: "BILLING_TRUSTED_ROOTS",
            defaultValue: "Apple Root CA - G3 (shipped)",
            meaning: "comma-separated DER/PEM files of the roots transactions must chain to"
        ),
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
        guard let environmentName = value("BILLING_ENVIRONMENT") else {
            throw ConfigurationError(
                variable: "BILLING_ENVIRONMENT",
                problem: "required (Production, Sandbox, Xcode or LocalTesting); there is no default so that a "
                    + "production worker never accepts sandbox purchases by accident"
            )
        }
        guard let storeEnvironment = StoreEnvironment(rawValue: environmentName) else {
            throw ConfigurationError(
                variable: "BILLING_ENVIRONMENT",
                problem: "expected Production, Sandbox, Xcode or LocalTesting, got \(InputQuote.short(environmentName))"
            )
        }
        var appAppleID: Int64?
        if let text = value("BILLING_APP_APPLE_ID") {
            guard let id = Int64(text), id > 0 else {
                throw ConfigurationError(
                    variable: "BILLING_APP_APPLE_ID",
                    problem: "expected a number, got \(InputQuote.short(text))"
                )
            }
            appAppleID = id
        }
        var roots: [Certificate] = [VerificationPolicy.appleRootCAG3]
        var rootsDescription = "Apple Root CA - G3"
        if let list = value("BILLING_TRUSTED_ROOTS") {
            let paths = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            roots = []
            for path in paths {
                do {
                    roots += try VerificationPolicy.loadCertificates(fromFile: path)
                } catch {
                    throw ConfigurationError(variable: "BILLING_TRUSTED_ROOTS", problem: "\(path): \(error.message)")
                }
            }
            rootsDescription = paths.joined(separator: ",")
        }
        let bundleID = value("BILLING_BUNDLE_ID") ?? BillingDefaults.bundleID
        let policy: VerificationPolicy
        do {
            policy = try VerificationPolicy(
                trustedRoots: roots,
                bundleID: bundleID,
                environment: storeEnvironment,
                appAppleID: appAppleID
            )
        } catch {
            let variable =
                storeEnvironment == .production && appAppleID == nil ? "BILLING_APP_APPLE_ID" : "BILLING_ENVIRONMENT"
            throw ConfigurationError(variable: variable, problem: error.message)
        }
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
