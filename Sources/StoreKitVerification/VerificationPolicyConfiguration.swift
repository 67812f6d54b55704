import Foundation
import X509

/// The verification policy of App Store signed data as a process reads it from its environment
/// (`BILLING_ENVIRONMENT`, `BILLING_BUNDLE_ID`, `BILLING_APP_APPLE_ID`, `BILLING_TRUSTED_ROOTS`).
///
/// One parser for the billing-worker, which verifies purchases and notifications before they
/// change the ledger, and the gateway, which verifies App Store notifications before it queues
/// them (issue 29): both read the same variables the same way, so what one accepts the other
/// does too.
public struct VerificationPolicyConfiguration: Sendable {
    /// Who signed data must come from and what it must say.
    public var policy: VerificationPolicy
    /// Where the trusted roots came from, for the start-up log line.
    public var trustedRootsDescription: String

    /// The iOS app's bundle id: the only one whose purchases and notifications count.
    public static let defaultBundleID = "com.astrosvitla.astroinsight"

    /// The variables, their defaults and meaning (README's tables).
    public static let variables: [(name: String, defaultValue: String, meaning: String)] = [
        (
            "BILLING_ENVIRONMENT", "(required)",
            "Production, Sandbox, Xcode or LocalTesting: transactions from any other are refused"
        ),
        ("BILLING_BUNDLE_ID", defaultBundleID, "the app whose purchases count"),
        ("BILLING_APP_APPLE_ID", "(required for Production)", "the app's Apple ID, checked in notifications"),
        (
            "BILLING_TRUSTED_ROOTS", "Apple Root CA - G3 (shipped)",
            "comma-separated DER/PEM files of the roots transactions must chain to"
        ),
    ]

    /// Whether `environment` sets any of the policy's variables (the gateway's notification
    /// endpoint is off in development when it sets none).
    public static func isConfigured(in environment: [String: String]) -> Bool {
        variables.contains { value($0.name, environment) != nil }
    }

    /// Reads and validates the policy.
    /// - Parameter environment: the process's variables.
    /// - Returns: the policy and where its roots came from.
    /// - Throws: `VerificationSetupError` whose `variable` names the variable at fault: no or an
    ///   unknown `BILLING_ENVIRONMENT` (there is no default, so that a production process never
    ///   accepts sandbox data by accident), a malformed `BILLING_APP_APPLE_ID` (or none in
    ///   Production), an unreadable `BILLING_TRUSTED_ROOTS` file.
    public static func fromEnvironment(
        _ environment: [String: String]
    ) throws(VerificationSetupError) -> VerificationPolicyConfiguration {
        guard let environmentName = value("BILLING_ENVIRONMENT", environment) else {
            throw VerificationSetupError(
                message: "required (Production, Sandbox, Xcode or LocalTesting); there is no default so that a "
                    + "production process never accepts sandbox purchases by accident",
                variable: "BILLING_ENVIRONMENT"
            )
        }
        guard let storeEnvironment = StoreEnvironment(rawValue: environmentName) else {
            throw VerificationSetupError(
                message: "expected Production, Sandbox, Xcode or LocalTesting, got \(environmentName.quotedForDetail)",
                variable: "BILLING_ENVIRONMENT"
            )
        }
        var appAppleID: Int64?
        if let text = value("BILLING_APP_APPLE_ID", environment) {
            guard let id = Int64(text), id > 0 else {
                throw VerificationSetupError(
                    message: "expected a number, got \(text.quotedForDetail)",
                    variable: "BILLING_APP_APPLE_ID"
                )
            }
            appAppleID = id
        }
        var roots: [Certificate] = [VerificationPolicy.appleRootCAG3]
        var rootsDescription = "Apple Root CA - G3"
        if let list = value("BILLING_TRUSTED_ROOTS", environment) {
            let paths = list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            roots = []
            for path in paths {
                do {
                    roots += try VerificationPolicy.loadCertificates(fromFile: path)
                } catch {
                    throw VerificationSetupError(
                        message: "\(path): \(error.message)",
                        variable: "BILLING_TRUSTED_ROOTS"
                    )
                }
            }
            rootsDescription = paths.joined(separator: ",")
        }
        let bundleID = value("BILLING_BUNDLE_ID", environment) ?? defaultBundleID
        do {
            let policy = try VerificationPolicy(
                trustedRoots: roots,
                bundleID: bundleID,
                environment: storeEnvironment,
                appAppleID: appAppleID
            )
            return VerificationPolicyConfiguration(policy: policy, trustedRootsDescription: rootsDescription)
        } catch {
            let variable =
                storeEnvironment == .production && appAppleID == nil ? "BILLING_APP_APPLE_ID" : "BILLING_ENVIRONMENT"
            throw VerificationSetupError(message: error.message, variable: variable)
        }
    }

    private static func value(_ name: String, _ environment: [String: String]) -> String? {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        return text
    }
}
