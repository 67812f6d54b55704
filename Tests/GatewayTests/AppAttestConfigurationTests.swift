import AppAttest
import Crypto
import Foundation
import Testing
import WorkerRuntime

@testable import Gateway

@Suite("Gateway App Attest configuration")
struct AppAttestConfigurationTests {
    static let appID = "ABCDE12345.com.astrosvitla.app"

    func rootFile() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("app-attest-root-\(UUID()).pem")
        try DevAppAttest().rootPEM().write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    func failure(_ environment: [String: String]) -> String? {
        do {
            _ = try GatewayConfiguration.fromEnvironment(environment)
            return nil
        } catch {
            return error.variable
        }
    }

    @Test func offWithoutAnAppID() throws {
        #expect(try GatewayConfiguration.fromEnvironment([:]).appAttest == nil)
    }

    @Test func readsTheSettings() throws {
        let root = try rootFile()
        defer { try? FileManager.default.removeItem(at: root) }
        let settings = try #require(
            try GatewayConfiguration.fromEnvironment([
                "APP_ATTEST_APP_ID": Self.appID, "APP_ATTEST_ENVIRONMENT": "development",
                "APP_ATTEST_ROOT_CA_FILE": root.path, "APP_ATTEST_REQUIRE_ASSERTIONS": "true",
                "APP_ATTEST_CHALLENGE_TTL_SECONDS": "60",
            ]).appAttest
        )
        #expect(settings.appID == Self.appID)
        #expect(settings.environment == .development)
        #expect(settings.requireAssertions)
        #expect(settings.challengeLifetime == .seconds(60))
        #expect(settings.rootPEM != nil)
        let defaults = try #require(
            try GatewayConfiguration.fromEnvironment(["APP_ATTEST_APP_ID": Self.appID]).appAttest
        )
        #expect(defaults.environment == .production)
        #expect(!defaults.requireAssertions)
        #expect(defaults.rootPEM == nil)
    }

    /// Trusting another root would let anyone attest: production trusts Apple's only.
    @Test func productionRefusesAnotherRoot() throws {
        let root = try rootFile()
        defer { try? FileManager.default.removeItem(at: root) }
        let key = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-key-\(UUID()).pem")
        defer { try? FileManager.default.removeItem(at: key) }
        try P256.Signing.PrivateKey().pemRepresentation.write(to: key, atomically: true, encoding: .utf8)
        let production = [
            "GATEWAY_ENV": "production", "GATEWAY_SIGNING_KEY_FILE": key.path, "BILLING_ENVIRONMENT": "Sandbox",
        ]
        #expect(failure(production.merging(["APP_ATTEST_APP_ID": Self.appID]) { $1 }) == nil)
        #expect(
            failure(production.merging(["APP_ATTEST_APP_ID": Self.appID, "APP_ATTEST_ROOT_CA_FILE": root.path]) { $1 })
                == "APP_ATTEST_ROOT_CA_FILE"
        )
    }

    @Test func refusesBadValues() {
        #expect(failure(["APP_ATTEST_APP_ID": "com.astrosvitla.app"]) == "APP_ATTEST_APP_ID")
        #expect(failure(["APP_ATTEST_APP_ID": "abcde12345.com.app"]) == "APP_ATTEST_APP_ID")
        #expect(failure(["APP_ATTEST_REQUIRE_ASSERTIONS": "true"]) == "APP_ATTEST_REQUIRE_ASSERTIONS")
        #expect(
            failure(["APP_ATTEST_APP_ID": Self.appID, "APP_ATTEST_ENVIRONMENT": "staging"]) == "APP_ATTEST_ENVIRONMENT"
        )
        #expect(
            failure(["APP_ATTEST_APP_ID": Self.appID, "APP_ATTEST_ROOT_CA_FILE": "/nonexistent"])
                == "APP_ATTEST_ROOT_CA_FILE"
        )
        #expect(
            failure(["APP_ATTEST_APP_ID": Self.appID, "APP_ATTEST_CHALLENGE_TTL_SECONDS": "5"])
                == "APP_ATTEST_CHALLENGE_TTL_SECONDS"
        )
    }

    /// The documented client data: "<METHOD> <path>\n<hex SHA-256 of the body>".
    @Test func theAssertionClientDataIsTheDocumentedString() {
        let body = Data("{\"a\":1}".utf8)
        let bodyHash = SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined()
        let expected = Data(SHA256.hash(data: Data("POST /v1/profiles\n\(bodyHash)".utf8)))
        #expect(GatewayRoutes.assertionClientDataHash(method: .post, path: "/v1/profiles", body: body) == expected)
    }
}
