import Crypto
import Foundation
import StoreKitVerification
import Testing

@Suite struct VerificationPolicyTests {
    @Test func appleRootCAG3IsTheGenuineOne() {
        #expect(
            VerificationPolicy.sha256Fingerprint(of: VerificationPolicy.appleRootCAG3)
                == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79"
        )
        #expect("\(VerificationPolicy.appleRootCAG3.subject)".contains("Apple Root CA - G3"))
    }

    @Test func devDataDoesNotVerifyAgainstApplesRoot() async throws {
        let fixture = try DevFixture()
        let apple = SignedDataVerifier(
            policy: try VerificationPolicy(
                trustedRoots: [VerificationPolicy.appleRootCAG3],
                bundleID: Fixtures.bundleID,
                environment: .sandbox
            )
        )
        await expectFailure(.untrustedCertificateChain) {
            _ = try await apple.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction()))
        }
    }

    @Test func rejectsUnusableConfigurations() throws {
        let root = VerificationPolicy.appleRootCAG3
        #expect(throws: VerificationSetupError.self) {
            try VerificationPolicy(trustedRoots: [], bundleID: Fixtures.bundleID, environment: .sandbox)
        }
        #expect(throws: VerificationSetupError.self) {
            try VerificationPolicy(trustedRoots: [root], bundleID: " ", environment: .sandbox)
        }
        do {
            _ = try VerificationPolicy(trustedRoots: [root], bundleID: Fixtures.bundleID, environment: .production)
            Issue.record("Production without appAppleID was accepted")
        } catch {
            #expect(error.message.contains("Apple ID"))
        }
        let production = try VerificationPolicy(
            trustedRoots: [root],
            bundleID: Fixtures.bundleID,
            environment: .production,
            appAppleID: 1
        )
        #expect(production.appAppleID == 1)
        for environment in [StoreEnvironment.sandbox, .xcode, .localTesting] {
            #expect(throws: Never.self) {
                try VerificationPolicy(trustedRoots: [root], bundleID: Fixtures.bundleID, environment: environment)
            }
        }
    }

    @Test func environmentNamesAreApples() {
        #expect(StoreEnvironment.allCases.map(\.rawValue) == ["Production", "Sandbox", "Xcode", "LocalTesting"])
        #expect(StoreEnvironment.allCases.filter(\.isLocallySigned) == [.xcode, .localTesting])
    }

    @Test func loadsDERAndPEMFiles() throws {
        let der = try VerificationPolicy.loadCertificates(fromFile: Fixtures.url("test-root", "der").path)
        #expect(der.count == 1)
        #expect("\(der[0].subject)".contains("Test Root CA - G3"))

        let directory = try TemporaryDirectory()
        let fixture = try DevFixture()
        try fixture.pki.write(to: directory.url)
        let pem = try String(contentsOf: directory.url.appendingPathComponent("root.pem"), encoding: .utf8)
        let intermediate = try String(
            contentsOf: directory.url.appendingPathComponent("intermediate.pem"),
            encoding: .utf8
        )
        let bundle = directory.url.appendingPathComponent("bundle.pem")
        try Data(("# two roots\n" + pem + intermediate + leafKeyPEM(directory)).utf8).write(to: bundle)
        let loaded = try VerificationPolicy.loadCertificates(fromFile: bundle.path)
        #expect(loaded == [fixture.pki.root, fixture.pki.intermediate])
        #expect(
            try VerificationPolicy.loadCertificates(fromFile: directory.url.appendingPathComponent("root.der").path)
                == [fixture.pki.root]
        )
    }

    func leafKeyPEM(_ directory: TemporaryDirectory) throws -> String {
        try String(contentsOf: directory.url.appendingPathComponent("leaf-key.pem"), encoding: .utf8)
    }

    @Test func reportsUnreadableCertificateFiles() throws {
        let directory = try TemporaryDirectory()
        let garbage = directory.url.appendingPathComponent("garbage.der")
        try Data("not a certificate".utf8).write(to: garbage)
        let keyOnly = directory.url.appendingPathComponent("key.pem")
        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: keyOnly)
        let broken = directory.url.appendingPathComponent("broken.pem")
        try Data("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8).write(to: broken)
        for path in [garbage.path, keyOnly.path, broken.path, directory.url.appendingPathComponent("missing").path] {
            do {
                _ = try VerificationPolicy.loadCertificates(fromFile: path)
                Issue.record("\(path) loaded")
            } catch {
                #expect(!error.message.isEmpty && !error.description.contains("\n"))
            }
        }
    }
}

@Suite struct DevPKITests {
    @Test func writeThenLoadThenSignVerifies() async throws {
        let directory = try TemporaryDirectory()
        let fixture = try DevFixture()
        try fixture.pki.write(to: directory.url)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.url.path).sorted()
        #expect(names == ["intermediate.pem", "leaf-key.pem", "leaf.pem", "root.der", "root.pem"])
        let attributes = try FileManager.default.attributesOfItem(
            atPath: directory.url.appendingPathComponent("leaf-key.pem").path
        )
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let keyPEM = try String(contentsOf: directory.url.appendingPathComponent("leaf-key.pem"), encoding: .utf8)
        #expect(keyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))

        let loaded = try DevPKI.load(from: directory.url)
        #expect(loaded.root == fixture.pki.root)
        #expect(loaded.intermediate == fixture.pki.intermediate)
        #expect(loaded.leaf == fixture.pki.leaf)
        #expect(loaded.leafKey.rawRepresentation == fixture.pki.leafKey.rawRepresentation)

        // A verifier configured from the written root.der accepts what the loaded PKI signs.
        let roots = try VerificationPolicy.loadCertificates(
            fromFile: directory.url.appendingPathComponent("root.der").path
        )
        let verifier = SignedDataVerifier(
            policy: try VerificationPolicy(trustedRoots: roots, bundleID: Fixtures.bundleID, environment: .sandbox)
        )
        let verified = try await verifier.verifyTransaction(try loaded.signer.sign(DevFixture.transaction(id: "77")))
        #expect(verified.transactionID == "77")
    }

    @Test func loadRejectsIncompleteOrMismatchedFolders() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: DevSigningError.self) { try DevPKI.load(from: directory.url) }

        try DevFixture().pki.write(to: directory.url)
        let other = try TemporaryDirectory()
        try DevFixture().pki.write(to: other.url)
        // The leaf key of another PKI does not belong to this leaf.
        try FileManager.default.removeItem(at: directory.url.appendingPathComponent("leaf-key.pem"))
        try FileManager.default.copyItem(
            at: other.url.appendingPathComponent("leaf-key.pem"),
            to: directory.url.appendingPathComponent("leaf-key.pem")
        )
        #expect(throws: DevSigningError.self) { try DevPKI.load(from: directory.url) }
    }

    @Test func generateValidatesItsArguments() {
        let now = Date()
        #expect(throws: DevSigningError.self) {
            try DevPKI.generate(notValidBefore: now, notValidAfter: now)
        }
        #expect(throws: DevSigningError.self) {
            try DevPKI.generate(commonNamePrefix: "", notValidBefore: now, notValidAfter: now.addingTimeInterval(60))
        }
    }

    @Test func certificatesLookLikeApples() throws {
        let fixture = try DevFixture(prefix: "Unit")
        let pki = fixture.pki
        #expect(pki.leaf.issuer == pki.intermediate.subject)
        #expect(pki.intermediate.issuer == pki.root.subject)
        #expect(pki.root.issuer == pki.root.subject)
        #expect("\(pki.leaf.subject)".contains("Unit"))
        #expect(pki.leaf.extensions[oid: AppStoreCertificateMarkers.leaf] != nil)
        #expect(pki.intermediate.extensions[oid: AppStoreCertificateMarkers.intermediate] != nil)
        #expect(pki.leaf.notValidAfter == fixture.notValidAfter)
        let unmarked = try DevFixture(options: .init(leafMarkerExtension: false, intermediateMarkerExtension: false))
            .pki
        #expect(unmarked.leaf.extensions[oid: AppStoreCertificateMarkers.leaf] == nil)
        #expect(unmarked.intermediate.extensions[oid: AppStoreCertificateMarkers.intermediate] == nil)
    }
}

@Suite struct JWSSignerTests {
    @Test func writesTheAppStoreFormat() throws {
        let pki = try DevFixture().pki
        let token = try pki.signer.sign(DevFixture.transaction())
        #expect(!token.contains("="))
        let parts = TokenParts(token)
        let header = parts.headerObject
        #expect(Set(header.keys) == ["alg", "x5c"])
        #expect(header["alg"] as? String == "ES256")
        let x5c = parts.x5c
        #expect(x5c.count == 3)
        // Standard base64 DER: decodes as such, and the root is the PKI's.
        let roots = try x5c.map { try #require(Data(base64Encoded: $0)) }
        #expect(roots.allSatisfy { $0.first == 0x30 })
        let signature = B64.urlDecode(parts.signature)
        #expect(signature.count == 64)
        let key = pki.leafKey.publicKey
        #expect(
            key.isValidSignature(
                try P256.Signing.ECDSASignature(rawRepresentation: signature),
                for: Data("\(parts.header).\(parts.payload)".utf8)
            )
        )
    }

    @Test func encodesDatesAsIntegerMilliseconds() throws {
        struct Payload: Encodable {
            var signedDate: Date
        }
        let token = try DevFixture().pki.signer.sign(
            Payload(signedDate: Date(timeIntervalSince1970: 1_768_398_027.634))
        )
        #expect(String(decoding: TokenParts(token).payloadData, as: UTF8.self) == #"{"signedDate":1768398027634}"#)
    }

    @Test func signsPayloadBytesVerbatim() throws {
        let bytes = Data(#"{"b":1,  "a":"x/y"}"#.utf8)
        let token = try DevFixture().pki.signer.sign(payload: bytes)
        #expect(TokenParts(token).payloadData == bytes)
    }
}

@Suite struct PayloadCodingTests {
    @Test func transactionDatesAreIntegerMillisecondsAndNilsAreLeftOut() throws {
        let payload = TransactionPayload(
            transactionId: "1",
            purchaseDate: Date(timeIntervalSince1970: 1_768_398_024),
            signedDate: Date(timeIntervalSince1970: 1_768_398_027.634),
            price: 4990
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let json = String(decoding: try encoder.encode(payload), as: UTF8.self)
        #expect(json == #"{"price":4990,"purchaseDate":1768398024000,"signedDate":1768398027634,"transactionId":"1"}"#)
        #expect(try JSONDecoder().decode(TransactionPayload.self, from: Data(json.utf8)) == payload)
    }

    @Test func decodesApplesTransactionFields() throws {
        let json = #"""
            {"transactionId":"2000000957300740","originalTransactionId":"2000000957300740","webOrderLineItemId":"9",
             "bundleId":"com.astrosvitla.astroinsight","productId":"p","subscriptionGroupIdentifier":"g",
             "purchaseDate":1768398024000,"originalPurchaseDate":1768398024000.0,"expiresDate":1.7e12,"quantity":2,
             "type":"Consumable","appAccountToken":"u","inAppOwnershipType":"PURCHASED","signedDate":1768398027634,
             "revocationReason":0,"revocationDate":1768398030000,"revocationType":"REFUND_FULL","isUpgraded":false,
             "offerType":1,"offerIdentifier":"o","offerDiscountType":"FREE_TRIAL","offerPeriod":"P1W",
             "environment":"Sandbox","storefront":"UKR","storefrontId":"143492","transactionReason":"PURCHASE",
             "currency":"UAH","price":199000,"appTransactionId":"704512873391042876","deviceVerification":"ignored",
             "expiresDateNull":null}
            """#
        let payload = try JSONDecoder().decode(TransactionPayload.self, from: Data(json.utf8))
        #expect(payload.quantity == 2)
        #expect(payload.revocationReason == 0)
        #expect(payload.revocationType == "REFUND_FULL")
        #expect(payload.isUpgraded == false)
        #expect(payload.price == 199_000)
        #expect(payload.expiresDate == Date(timeIntervalSince1970: 1.7e9))
        #expect(payload.originalPurchaseDate == Date(timeIntervalSince1970: 1_768_398_024))
        #expect(payload.signedDate.map { ($0.timeIntervalSince1970 * 1000).rounded() } == 1_768_398_027_634)
        #expect(payload.appTransactionId == "704512873391042876")
        // Round trip through encoding keeps every named field.
        #expect(try JSONDecoder().decode(TransactionPayload.self, from: JSONEncoder().encode(payload)) == payload)
    }

    @Test func notificationRoundTrips() throws {
        let payload = NotificationPayload(
            notificationType: "REFUND",
            subtype: nil,
            notificationUUID: "u",
            version: "2.0",
            signedDate: Date(timeIntervalSince1970: 1_768_398_027.634),
            data: NotificationData(appAppleId: 6_479_214_350, bundleId: "b", environment: "Sandbox", status: 1),
            externalPurchaseToken: ExternalPurchaseToken(
                externalPurchaseId: "SANDBOX_1",
                tokenCreationDate: Date(timeIntervalSince1970: 1)
            )
        )
        let json = String(decoding: try JSONEncoder().encode(payload), as: UTF8.self)
        #expect(json.contains(#""signedDate":1768398027634"#))
        #expect(json.contains(#""tokenCreationDate":1000"#))
        #expect(!json.contains("subtype") && !json.contains("null"))
        #expect(try JSONDecoder().decode(NotificationPayload.self, from: Data(json.utf8)) == payload)
        #expect(payload.externalPurchaseToken?.environment == .sandbox)
        #expect(ExternalPurchaseToken(externalPurchaseId: "X").environment == .production)
    }

    @Test func failureDescriptionNamesTheReason() {
        let failure = VerificationFailure(.invalidSignature, "the ES256 signature does not match")
        #expect(failure.description == "invalid-signature: the ES256 signature does not match")
        #expect(VerificationFailureReason.allCases.count == 17)
        #expect(Set(VerificationFailureReason.allCases.map(\.rawValue)).count == 17)
    }
}

/// A folder under the temporary directory, removed when the value goes away.
final class TemporaryDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("skv-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }
}
