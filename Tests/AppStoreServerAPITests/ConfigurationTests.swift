import Crypto
import Foundation
import Testing

@testable import AppStoreServerAPI

@Suite("AppStoreServerAPIConfiguration, backoff and errors")
struct ConfigurationTests {
    private func make(
        baseURL: URL = AppStoreServerAPIConfiguration.sandbox,
        keyID: String = "2X9R4HXF34",
        issuerID: String = "57246542-96fe-1a63-e053-0824d011072a",
        bundleID: String = "com.astrosvitla.app",
        requestTimeout: Duration = .seconds(10),
        retryPolicy: AppStoreServerAPIConfiguration.RetryPolicy = .init()
    ) throws(AppStoreServerAPIConfigurationError) -> AppStoreServerAPIConfiguration {
        try AppStoreServerAPIConfiguration(
            baseURL: baseURL,
            keyID: keyID,
            issuerID: issuerID,
            bundleID: bundleID,
            signingKey: P256.Signing.PrivateKey(),
            requestTimeout: requestTimeout,
            retryPolicy: retryPolicy
        )
    }

    @Test("defaults and Apple's base URLs")
    func defaults() throws {
        let configuration = try make()
        #expect(AppStoreServerAPIConfiguration.production.absoluteString == "https://api.storekit.itunes.apple.com")
        #expect(
            AppStoreServerAPIConfiguration.sandbox.absoluteString == "https://api.storekit-sandbox.itunes.apple.com"
        )
        #expect(configuration.requestTimeout == .seconds(10))
        #expect(configuration.retryPolicy.maxAttempts == 4)
        #expect(configuration.retryPolicy.baseDelay == .milliseconds(500))
        #expect(configuration.retryPolicy.maxDelay == .seconds(8))
        #expect(configuration.retryPolicy.deadline == .seconds(30))
        let trailing = try make(baseURL: URL(string: "http://127.0.0.1:8080/")!)
        #expect(trailing.baseURL.absoluteString == "http://127.0.0.1:8080")
    }

    /// The refusal's description, or "" when the settings were accepted.
    private func refusal(
        baseURL: URL = AppStoreServerAPIConfiguration.sandbox,
        keyID: String = "2X9R4HXF34",
        issuerID: String = "57246542-96fe-1a63-e053-0824d011072a",
        bundleID: String = "com.astrosvitla.app",
        requestTimeout: Duration = .seconds(10),
        retryPolicy: AppStoreServerAPIConfiguration.RetryPolicy = .init()
    ) -> String {
        do {
            _ = try make(
                baseURL: baseURL,
                keyID: keyID,
                issuerID: issuerID,
                bundleID: bundleID,
                requestTimeout: requestTimeout,
                retryPolicy: retryPolicy
            )
            return ""
        } catch {
            return error.description
        }
    }

    @Test("invalid settings are refused with a message naming them")
    func validation() {
        #expect(refusal() == "")
        #expect(refusal(keyID: "").contains("keyID is empty"))
        #expect(refusal(issuerID: "a b").contains("issuerID"))
        #expect(refusal(bundleID: "").contains("bundleID is empty"))
        #expect(refusal(baseURL: URL(string: "http://api.example.com")!).contains("must be https"))
        #expect(refusal(baseURL: URL(string: "http://localhost:9000")!) == "")
        #expect(refusal(requestTimeout: .zero).contains("requestTimeout"))
        #expect(refusal(retryPolicy: .init(maxAttempts: 0)).contains("maxAttempts"))
        #expect(refusal(retryPolicy: .init(baseDelay: .seconds(10), maxDelay: .seconds(1))).contains("baseDelay"))
        #expect(refusal(retryPolicy: .init(deadline: .zero)).contains("deadline"))
    }

    @Test("loads a .p8 (PKCS#8 PEM) key; a missing or invalid file is named in the error")
    func loadsKeyFile() throws {
        let key = P256.Signing.PrivateKey()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("asapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("AuthKey_2X9R4HXF34.p8")
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        try key.pemRepresentation.write(to: good, atomically: true, encoding: .utf8)
        let loaded = try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: good.path)
        #expect(loaded.rawRepresentation == key.rawRepresentation)

        let missing = directory.appendingPathComponent("missing.p8").path
        #expect(throws: AppStoreServerAPIConfigurationError.self) {
            try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: missing)
        }
        do {
            _ = try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: missing)
        } catch {
            #expect(error.description.contains(missing))
            #expect(error.description.contains("no such file"))
        }
        let garbage = directory.appendingPathComponent("garbage.p8")
        try "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n".write(
            to: garbage,
            atomically: true,
            encoding: .utf8
        )
        do {
            _ = try AppStoreServerAPIConfiguration.loadSigningKey(fromFile: garbage.path)
            Issue.record("a garbage key loaded")
        } catch {
            #expect(error.description.contains(garbage.path))
            #expect(!error.description.contains("not a key"))
        }
    }

    @Test("the configuration never prints its key")
    func redactsKey() throws {
        let key = P256.Signing.PrivateKey()
        let configuration = try AppStoreServerAPIConfiguration(
            baseURL: AppStoreServerAPIConfiguration.production,
            keyID: "K",
            issuerID: "I",
            bundleID: "B",
            signingKey: key
        )
        let pemBody = key.pemRepresentation.split(separator: "\n")[1]
        let rawHex = key.rawRepresentation.map { String(format: "%02x", $0) }.joined()
        for text in [configuration.description, String(reflecting: configuration), "\(configuration)"] {
            #expect(text.contains("<redacted>"))
            #expect(!text.contains(pemBody))
            #expect(!text.contains(rawHex))
        }
        var dumped = ""
        dump(configuration, to: &dumped)
        #expect(!dumped.contains(rawHex))
        #expect(configuration.signingKey.rawRepresentation == key.rawRepresentation)
    }

    @Test("full-jitter backoff doubles from the base delay up to the cap")
    func backoff() throws {
        let configuration = try make(
            retryPolicy: .init(maxAttempts: 8, baseDelay: .milliseconds(500), maxDelay: .seconds(8))
        )
        let top = AppStoreServerAPIClient(
            configuration: configuration,
            timing: .init(wallClock: { Date() }, now: { .now }, sleep: { _ in }, random: { 1 })
        )
        #expect((1...7).map { top.backoff(afterAttempt: $0) } == [0.5, 1, 2, 4, 8, 8, 8].map { Duration.seconds($0) })
        let bottom = AppStoreServerAPIClient(
            configuration: configuration,
            timing: .init(wallClock: { Date() }, now: { .now }, sleep: { _ in }, random: { 0 })
        )
        #expect(bottom.backoff(afterAttempt: 3) == .zero)
        let system = AppStoreServerAPIClient(configuration: configuration)
        for attempt in 1...6 {
            let delay = system.backoff(afterAttempt: attempt)
            #expect(delay >= .zero && delay <= .seconds(8))
        }
    }

    @Test("Retry-After in seconds; other forms ignored")
    func retryAfter() {
        #expect(AppStoreServerAPIClient.parseRetryAfter("1") == .seconds(1))
        #expect(AppStoreServerAPIClient.parseRetryAfter(" 30 ") == .seconds(30))
        #expect(AppStoreServerAPIClient.parseRetryAfter("-1") == nil)
        #expect(AppStoreServerAPIClient.parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT") == nil)
    }

    @Test("the error's description is one line with the facts, and the codes are stable")
    func errorDescription() {
        let error = AppStoreAPIError(
            kind: .transactionNotFound,
            reason: "the App Store has no transaction with this id",
            httpStatus: 404,
            errorCode: 4_040_010,
            errorMessage: "Transaction id not found.",
            attempts: 1
        )
        #expect(
            error.description
                == "App Store Server API: the App Store has no transaction with this id "
                + "(HTTP 404, Apple error 4040010 \"Transaction id not found.\", 1 attempt)"
        )
        #expect(!error.description.contains("\n"))
        #expect(error.debugDescription.hasPrefix("transaction-not-found: "))
        #expect(
            AppStoreAPIError.Kind.allCases.map(\.rawValue) == [
                "transaction-not-found", "invalid-transaction-id", "unauthorized", "rate-limited", "server-error",
                "timeout", "network", "malformed-response", "deadline-exceeded", "cancelled", "not-found",
                "invalid-request",
            ]
        )
        #expect(
            AppStoreAPIError.Kind.allCases.filter(\.isTransient).map(\.rawValue) == [
                "rate-limited", "server-error", "timeout", "network", "deadline-exceeded", "cancelled",
            ]
        )
    }

    @Test("a JWT verifies with the public key and has the raw r‖s signature")
    func jwtSignature() throws {
        let key = P256.Signing.PrivateKey()
        let configuration = try AppStoreServerAPIConfiguration(
            baseURL: AppStoreServerAPIConfiguration.sandbox,
            keyID: "KID",
            issuerID: "ISS",
            bundleID: "com.example",
            signingKey: key
        )
        let token = try BearerTokenProvider.sign(configuration: configuration, issuedAt: 1_700_000_000)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func decode(_ part: String) -> Data? {
            var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            return Data(base64Encoded: text)
        }
        let header = try #require(decode(parts[0]))
        let claims = try #require(decode(parts[1]))
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"KID","typ":"JWT"}"#)
        #expect(
            String(decoding: claims, as: UTF8.self)
                == #"{"aud":"appstoreconnect-v1","bid":"com.example","exp":1700000300,"iat":1700000000,"iss":"ISS"}"#
        )
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: try #require(decode(parts[2])))
        #expect(key.publicKey.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8)))
    }
}
