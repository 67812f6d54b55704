import Crypto
import Foundation
import StoreKitVerification
import Testing
import WorkerRuntime

@testable import Gateway

@Suite("Gateway configuration")
struct GatewayConfigurationTests {
    func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test func defaultsMakeAnEphemeralKeyInDevelopment() throws {
        let configuration = try GatewayConfiguration.fromEnvironment([:])
        #expect(configuration.environment == .development)
        #expect(configuration.signingKeyIsEphemeral)
        #expect(configuration.service.httpPort == 8080)
        #expect(configuration.accessTokenLifetime == .seconds(900))
        #expect(configuration.maxBodyBytes == 16_384)
        #expect(GatewayConfiguration.isValidKeyID(configuration.signingKeyID))
        #expect(configuration.verificationKeys.count == 1)
        #expect(configuration.requestTimeout == .seconds(10))
        #expect(configuration.service.database.statementTimeout == .seconds(10))
    }

    @Test func anExplicitStatementTimeoutIsKept() throws {
        let configuration = try GatewayConfiguration.fromEnvironment([
            "DB_STATEMENT_TIMEOUT_MS": "2000", "REQUEST_TIMEOUT_MS": "5000",
        ])
        #expect(configuration.service.database.statementTimeout == .seconds(2))
        #expect(configuration.requestTimeout == .seconds(5))
    }

    @Test func productionRefusesToStartWithoutAKey() {
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.fromEnvironment(["GATEWAY_ENV": "production"])
        }
        do {
            _ = try GatewayConfiguration.fromEnvironment(["GATEWAY_ENV": "production"])
        } catch {
            #expect(error.variable == "GATEWAY_SIGNING_KEY_FILE")
        }
    }

    @Test func productionExitsWithStatus2WithoutAKey() async {
        #expect(await GatewayMain.run(environment: ["GATEWAY_ENV": "production"]) == 2)
    }

    /// Issue 29, F5: production without App Attest refuses to start, naming the variable,
    /// unless `APP_ATTEST_ALLOW_UNATTESTED=true` says so explicitly.
    @Test func productionRequiresAppAttestUnlessExplicitlyAllowed() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("signing.pem")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let production = [
            "GATEWAY_ENV": "production", "GATEWAY_SIGNING_KEY_FILE": keyFile.path, "BILLING_ENVIRONMENT": "Sandbox",
        ]
        do {
            _ = try GatewayConfiguration.fromEnvironment(production)
            Issue.record("production started without App Attest")
        } catch {
            #expect(error.variable == "APP_ATTEST_APP_ID")
            #expect(error.problem.contains("APP_ATTEST_ALLOW_UNATTESTED=true"))
        }
        let allowed = try GatewayConfiguration.fromEnvironment(
            production.merging(["APP_ATTEST_ALLOW_UNATTESTED": "true"]) { $1 }
        )
        #expect(allowed.unattestedDevicesAllowed)
        #expect(allowed.appAttest == nil)
        let attested = try GatewayConfiguration.fromEnvironment(
            production.merging(["APP_ATTEST_APP_ID": "ABCDE12345.com.astrosvitla.app"]) { $1 }
        )
        #expect(attested.appAttest?.appID == "ABCDE12345.com.astrosvitla.app")
        // Development needs neither.
        #expect(try GatewayConfiguration.fromEnvironment([:]).appAttest == nil)
        do {
            _ = try GatewayConfiguration.fromEnvironment(["APP_ATTEST_ALLOW_UNATTESTED": "yes please"])
            Issue.record("a malformed APP_ATTEST_ALLOW_UNATTESTED was accepted")
        } catch {
            #expect(error.variable == "APP_ATTEST_ALLOW_UNATTESTED")
        }
    }

    @Test func readsTheSigningKeyAndRotationKeys() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let key = P256.Signing.PrivateKey()
        let old = P256.Signing.PrivateKey()
        let keyFile = folder.appendingPathComponent("signing.pem")
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let verify = folder.appendingPathComponent("verify")
        try FileManager.default.createDirectory(at: verify, withIntermediateDirectories: true)
        try old.publicKey.pemRepresentation.write(
            to: verify.appendingPathComponent("2026-01.pem"),
            atomically: true,
            encoding: .utf8
        )
        let configuration = try GatewayConfiguration.fromEnvironment([
            "GATEWAY_ENV": "production",
            "GATEWAY_SIGNING_KEY_FILE": keyFile.path,
            "GATEWAY_SIGNING_KEY_ID": "2026-02",
            "GATEWAY_VERIFY_KEYS_DIR": verify.path,
            "HTTP_PORT": "9090",
            "ACCESS_TOKEN_TTL_SECONDS": "300",
            "APP_ATTEST_ALLOW_UNATTESTED": "true",
            "BILLING_ENVIRONMENT": "Sandbox",
        ])
        #expect(!configuration.signingKeyIsEphemeral)
        #expect(configuration.signingKeyID == "2026-02")
        #expect(configuration.signingKey.publicKey.rawRepresentation == key.publicKey.rawRepresentation)
        #expect(configuration.verificationKeys.keys.sorted() == ["2026-01", "2026-02"])
        #expect(configuration.service.httpPort == 9090)
        #expect(configuration.accessTokenLifetime == .seconds(300))
    }

    @Test func malformedSettingsNameTheirVariable() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let junk = folder.appendingPathComponent("junk.pem")
        try "not a key".write(to: junk, atomically: true, encoding: .utf8)
        let cases: [([String: String], String)] = [
            (["GATEWAY_ENV": "staging"], "GATEWAY_ENV"),
            (["GATEWAY_SIGNING_KEY_FILE": junk.path], "GATEWAY_SIGNING_KEY_FILE"),
            (["GATEWAY_SIGNING_KEY_FILE": folder.appendingPathComponent("none").path], "GATEWAY_SIGNING_KEY_FILE"),
            (["GATEWAY_SIGNING_KEY_ID": "a b"], "GATEWAY_SIGNING_KEY_ID"),
            (["GATEWAY_SIGNING_KEY_ID": String(repeating: "k", count: 65)], "GATEWAY_SIGNING_KEY_ID"),
            (["GATEWAY_VERIFY_KEYS_DIR": folder.path], "GATEWAY_VERIFY_KEYS_DIR"),
            (["ACCESS_TOKEN_TTL_SECONDS": "5"], "ACCESS_TOKEN_TTL_SECONDS"),
            (["MAX_BODY_BYTES": "lots"], "MAX_BODY_BYTES"),
            (["REQUEST_TIMEOUT_MS": "0"], "REQUEST_TIMEOUT_MS"),
            (["HTTP_PORT": "70000"], "HTTP_PORT"),
        ]
        for (environment, variable) in cases {
            do {
                _ = try GatewayConfiguration.fromEnvironment(environment)
                Issue.record("accepted \(environment)")
            } catch {
                #expect(error.variable == variable, "\(environment)")
            }
        }
    }

    @Test func problemsHaveTheRFC9457Shape() {
        let problem = Problem(.invalidJSON, "the body is not a JSON object")
        #expect(problem.json["status"] == 400)
        #expect(problem.json["code"] == "invalid-json")
        #expect(problem.json["type"] == "https://astrosvitla.app/problems/invalid-json")
        #expect(problem.json["title"] == "Invalid request" && problem.json["detail"] != nil)
        // Status, title and type come from the code's catalogue entry, whichever route answers.
        let noChart = Problem(.chartNotFound, "no chart yet", field: "profileId")
        #expect(noChart.status == 409 && noChart.title == "Conflict" && noChart.json["field"] == "profileId")
        #expect(Problem.notFound().json["title"] == "Not found")
        let framework = Problem(.http(status: 415), "Unsupported Media Type")
        #expect(framework.status == 415 && framework.json["code"] == "http-415")
        #expect(framework.title == "Invalid request")
    }

    @Test func refreshTokensAreRandomAndHashed() {
        let one = RefreshToken.make()
        #expect(RefreshToken.isWellFormed(one))
        #expect(one != RefreshToken.make())
        #expect(RefreshToken.hash(one).count == 64)
        #expect(!RefreshToken.isWellFormed(one + "A"))
    }

    @Test func requestIDsAreTheClientsOnlyWhenSafe() {
        #expect(RequestMiddleware.requestID("abc-123") == "abc-123")
        #expect(RequestMiddleware.requestID("bad id\n") != "bad id\n")
        #expect(RequestMiddleware.requestID(String(repeating: "a", count: 65)).count == 36)
        #expect(RequestMiddleware.requestID(nil).count == 36)
    }
}

/// Issue 29: the gateway reads the App Store verification policy with the billing-worker's parser,
/// serves `/metrics` on its own port and bounds its connections.
@Suite struct GatewayEdgeConfigurationTests {
    @Test func productionNeedsTheAppStorePolicyAndDevelopmentMayGoWithout() throws {
        #expect(try GatewayConfiguration.fromEnvironment([:]).appStoreVerification == nil)
        let sandbox = try GatewayConfiguration.fromEnvironment(["BILLING_ENVIRONMENT": "Sandbox"])
        #expect(sandbox.appStoreVerification?.policy.environment == .sandbox)
        #expect(sandbox.appStoreVerification?.policy.bundleID == VerificationPolicyConfiguration.defaultBundleID)
        // Any one of the variables turns the policy on, and then it must be whole.
        for (environment, variable) in [
            (["BILLING_TRUSTED_ROOTS": "/nonexistent.der"], "BILLING_ENVIRONMENT"),
            (["BILLING_ENVIRONMENT": "Sandbox", "BILLING_TRUSTED_ROOTS": "/nonexistent.der"], "BILLING_TRUSTED_ROOTS"),
            (["BILLING_ENVIRONMENT": "Production"], "BILLING_APP_APPLE_ID"),
            (["BILLING_ENVIRONMENT": "Staging"], "BILLING_ENVIRONMENT"),
        ] {
            do {
                _ = try GatewayConfiguration.fromEnvironment(environment)
                Issue.record("accepted \(environment)")
            } catch {
                #expect(error.variable == variable, "\(environment): \(error)")
            }
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-edge-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let keyFile = folder.appendingPathComponent("signing.pem")
        try P256.Signing.PrivateKey().pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        do {
            _ = try GatewayConfiguration.fromEnvironment([
                "GATEWAY_ENV": "production", "GATEWAY_SIGNING_KEY_FILE": keyFile.path,
                "APP_ATTEST_ALLOW_UNATTESTED": "true",
            ])
            Issue.record("production started without an App Store policy")
        } catch {
            #expect(error.variable == "BILLING_ENVIRONMENT")
        }
    }

    @Test func metricsHaveTheirOwnPortAndConnectionsABound() throws {
        let defaults = try GatewayConfiguration.fromEnvironment([:])
        #expect(defaults.metricsPort == 9464 && defaults.metricsPort != defaults.service.httpPort)
        #expect(defaults.maxConnections == 4096)
        let set = try GatewayConfiguration.fromEnvironment([
            "GATEWAY_METRICS_PORT": "0", "GATEWAY_MAX_CONNECTIONS": "64",
        ])
        #expect(set.metricsPort == 0 && set.maxConnections == 64)
        for (environment, variable) in [
            (["HTTP_PORT": "9000", "GATEWAY_METRICS_PORT": "9000"], "GATEWAY_METRICS_PORT"),
            (["GATEWAY_MAX_CONNECTIONS": "10"], "GATEWAY_MAX_CONNECTIONS"),
        ] {
            do {
                _ = try GatewayConfiguration.fromEnvironment(environment)
                Issue.record("accepted \(environment)")
            } catch {
                #expect(error.variable == variable)
            }
        }
        // The API's route table has no /metrics.
        #expect(!GatewayAPI.routes.contains { $0.path == "/metrics" })
    }

    @Test func theConnectionLimitHoldsAndGivesPlacesBack() {
        let limit = ConnectionLimit(limit: 2, metrics: GatewayMetrics())
        #expect(limit.acquire() && limit.acquire())
        #expect(!limit.acquire())
        limit.release()
        #expect(limit.current == 1)
        #expect(limit.acquire())
        #expect(!limit.acquire())
        // The peak since the last look, which the memory trimmer compares with what is open now.
        #expect(limit.takePeak() == 2)
        limit.release()
        limit.release()
        #expect(limit.takePeak() == 2)
        #expect(limit.takePeak() == 0)
    }
}
