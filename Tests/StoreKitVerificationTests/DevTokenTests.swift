import Crypto
import Foundation
import StoreKitVerification
import Testing

/// Tokens of every kind made with a development PKI, each failing for exactly one reason.
@Suite struct DevTokenTests {
    let fixture: DevFixture
    let verifier: SignedDataVerifier

    init() throws {
        fixture = try DevFixture()
        verifier = try fixture.verifier()
    }

    var pki: DevPKI { fixture.pki }

    func signed(_ payload: TransactionPayload = DevFixture.transaction()) throws -> String {
        try pki.signer.sign(payload)
    }

    // MARK: - Valid

    @Test func validTransactionVerifies() async throws {
        let payload = DevFixture.transaction(id: "2000000000000042")
        let token = try signed(payload)
        let verified = try await verifier.verifyTransaction(token)
        #expect(verified.transactionID == "2000000000000042")
        #expect(verified.payload == payload)
        #expect(verified.rawPayload == TokenParts(token).payloadData)
        let signedDate = try #require(payload.signedDate)
        #expect(abs(verified.signedDate.timeIntervalSince(signedDate)) < 0.001)
    }

    @Test func transactionWithoutSignedDateIsCheckedNow() async throws {
        let before = Date()
        let verified = try await verifier.verifyTransaction(try signed(DevFixture.transaction(signedDate: nil)))
        #expect(verified.payload.signedDate == nil)
        #expect(verified.signedDate >= before.addingTimeInterval(-1) && verified.signedDate <= Date())
    }

    @Test func validNotificationVerifiesWithItsTransaction() async throws {
        let inner = try signed(DevFixture.transaction(id: "2000000000000077"))
        let notification = DevFixture.notification(signedTransaction: inner, type: "CONSUMPTION_REQUEST")
        let verified = try await verifier.verifyNotification(try pki.signer.sign(notification))
        #expect(verified.payload == notification)
        #expect(verified.transaction?.transactionID == "2000000000000077")
        #expect(verified.transaction?.rawPayload == TokenParts(inner).payloadData)
    }

    @Test func notificationWithoutTransactionVerifies() async throws {
        let verified = try await verifier.verifyNotification(
            try pki.signer.sign(DevFixture.notification(signedTransaction: nil, type: "TEST"))
        )
        #expect(verified.payload.notificationType == "TEST")
        #expect(verified.transaction == nil)
    }

    // MARK: - Signature

    @Test func tamperedPayloadFails() async throws {
        var parts = TokenParts(try signed(DevFixture.transaction(id: "2000000000000001")))
        let other = TokenParts(try signed(DevFixture.transaction(id: "2000000000000002")))
        parts.payload = other.payload
        await expectFailure(.invalidSignature) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test func signatureByAnotherKeyFails() async throws {
        let forger = JWSSigner(key: P256.Signing.PrivateKey(), chain: [pki.leaf, pki.intermediate, pki.root])
        await expectFailure(.invalidSignature) {
            _ = try await verifier.verifyTransaction(try forger.sign(DevFixture.transaction()))
        }
    }

    @Test func truncatedSignatureFails() async throws {
        var parts = TokenParts(try signed())
        let signature = B64.urlDecode(parts.signature)
        parts.signature = B64.url(signature.dropLast())
        await expectFailure(.invalidSignature) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test func derEncodedSignatureFails() async throws {
        var parts = TokenParts(try signed())
        let raw = B64.urlDecode(parts.signature)
        parts.signature = B64.url(try P256.Signing.ECDSASignature(rawRepresentation: raw).derRepresentation)
        await expectFailure(.invalidSignature) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    // MARK: - Chain

    @Test func foreignRootFails() async throws {
        let foreign = try DevFixture(prefix: "Test")  // same names, other keys
        await expectFailure(.untrustedCertificateChain) {
            _ = try await verifier.verifyTransaction(try foreign.pki.signer.sign(DevFixture.transaction()))
        }
    }

    @Test func foreignChainEndingInTheTrustedRootFails() async throws {
        let foreign = try DevFixture()
        let signer = JWSSigner(key: foreign.pki.leafKey, chain: [foreign.pki.leaf, foreign.pki.intermediate, pki.root])
        await expectFailure(.untrustedCertificateChain) {
            _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        }
    }

    @Test func x5c2IsNeverRead() async throws {
        let foreign = try DevFixture()
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.leaf, pki.intermediate, foreign.pki.root])
        let verified = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        #expect(verified.transactionID == "2000000000000001")
    }

    @Test func leafWithoutMarkerFails() async throws {
        let unmarked = try DevFixture(options: .init(leafMarkerExtension: false))
        let failure = await expectFailure(.missingMarkerExtension) {
            _ = try await unmarked.verifier().verifyTransaction(try unmarked.pki.signer.sign(DevFixture.transaction()))
        }
        #expect(failure?.detail.contains("leaf") == true)
    }

    @Test func intermediateWithoutMarkerFails() async throws {
        let unmarked = try DevFixture(options: .init(intermediateMarkerExtension: false))
        let failure = await expectFailure(.missingMarkerExtension) {
            _ = try await unmarked.verifier().verifyTransaction(try unmarked.pki.signer.sign(DevFixture.transaction()))
        }
        #expect(failure?.detail.contains("intermediate") == true)
    }

    @Test func wrongOrderFails() async throws {
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.intermediate, pki.leaf, pki.root])
        await expectFailure(.untrustedCertificateChain) {
            _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        }
    }

    @Test func twoCertificatesFail() async throws {
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.leaf, pki.intermediate])
        await expectFailure(.invalidChainLength) {
            _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        }
    }

    @Test func fourCertificatesFail() async throws {
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.leaf, pki.intermediate, pki.root, pki.root])
        await expectFailure(.invalidChainLength) {
            _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        }
    }

    @Test func leafAloneFails() async throws {
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.leaf])
        await expectFailure(.invalidChainLength) {
            _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        }
    }

    @Test func expiredAtSignedDateFails() async throws {
        let late = fixture.notValidAfter.addingTimeInterval(86_400)
        let failure = await expectFailure(.certificateNotValidAtSignedDate) {
            _ = try await verifier.verifyTransaction(try signed(DevFixture.transaction(signedDate: late)))
        }
        #expect(failure?.detail.contains("expired") == true)
    }

    @Test func notYetValidAtSignedDateFails() async throws {
        let early = fixture.notValidBefore.addingTimeInterval(-86_400)
        let failure = await expectFailure(.certificateNotValidAtSignedDate) {
            _ = try await verifier.verifyTransaction(try signed(DevFixture.transaction(signedDate: early)))
        }
        #expect(failure?.detail.contains("not valid until") == true)
    }

    @Test func validityBoundariesAreInclusive() async throws {
        let first = try await verifier.verifyTransaction(
            try signed(DevFixture.transaction(signedDate: fixture.notValidBefore))
        )
        let last = try await verifier.verifyTransaction(
            try signed(DevFixture.transaction(signedDate: fixture.notValidAfter))
        )
        #expect(first.signedDate < last.signedDate)
        await expectFailure(.certificateNotValidAtSignedDate) {
            _ = try await verifier.verifyTransaction(
                try! signed(DevFixture.transaction(signedDate: fixture.notValidAfter.addingTimeInterval(1)))
            )
        }
    }

    @Test(arguments: ["3e14", "1e300", "-1e300", "-62135596801000", "253402300800000"])
    func signedDateNoCertificateCanExpressFailsWithoutCrashing(_ millis: String) async throws {
        let json =
            #"{"transactionId":"1","bundleId":"com.astrosvitla.astroinsight","environment":"Sandbox","signedDate":"#
            + millis + "}"
        await expectFailure(.malformedPayload) {
            _ = try await verifier.verifyTransaction(try pki.signer.sign(payload: Data(json.utf8)))
        }
    }

    @Test func lastSecondOfYear9999IsCheckedLikeAnyOther() async throws {
        let json =
            #"{"transactionId":"1","bundleId":"com.astrosvitla.astroinsight","environment":"Sandbox","signedDate":"#
            + "253402300799000}"
        await expectFailure(.certificateNotValidAtSignedDate) {
            _ = try await verifier.verifyTransaction(try pki.signer.sign(payload: Data(json.utf8)))
        }
    }

    // MARK: - Header

    func resigned(header: [String: Any], payload: Data? = nil) throws -> String {
        TokenParts.sign(
            header: header,
            payload: try payload ?? JSONEncoder().encode(DevFixture.transaction()),
            key: pki.leafKey
        )
    }

    var genuineX5C: [String] {
        get throws { TokenParts(try signed()).x5c }
    }

    @Test func algNoneFails() async throws {
        let payload = B64.url(try JSONEncoder().encode(DevFixture.transaction()))
        let unsigned = "\(B64.url(#"{"alg":"none"}"#)).\(payload)."
        await expectFailure(.unsupportedAlgorithm) { _ = try await verifier.verifyTransaction(unsigned) }
        let withChain = try resigned(header: ["alg": "none", "x5c": try genuineX5C])
        await expectFailure(.unsupportedAlgorithm) { _ = try await verifier.verifyTransaction(withChain) }
    }

    @Test func hs256Fails() async throws {
        let header = B64.url(
            try JSONSerialization.data(withJSONObject: ["alg": "HS256", "x5c": try genuineX5C], options: [.sortedKeys])
        )
        let payload = B64.url(try JSONEncoder().encode(DevFixture.transaction()))
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data("\(header).\(payload)".utf8),
            using: SymmetricKey(size: .bits256)
        )
        let token = "\(header).\(payload).\(B64.url(Data(mac)))"
        await expectFailure(.unsupportedAlgorithm) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test(arguments: ["es256", "ES384", "RS256", ""])
    func otherAlgorithmsFail(_ alg: String) async throws {
        let token = try resigned(header: ["alg": alg, "x5c": try genuineX5C])
        await expectFailure(.unsupportedAlgorithm) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test func algOfWrongTypeOrMissingFails() async throws {
        for header: [String: Any] in [["alg": 1, "x5c": try genuineX5C], ["x5c": try genuineX5C]] {
            let token = try resigned(header: header)
            await expectFailure(.unsupportedAlgorithm) { _ = try await verifier.verifyTransaction(token) }
        }
    }

    @Test func missingX5CFails() async throws {
        let token = try resigned(header: ["alg": "ES256"])
        await expectFailure(.missingCertificateChain) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test func x5cThatIsNotAnArrayOfStringsFails() async throws {
        let x5c = try genuineX5C
        let shapes: [Any] = [[String](), x5c[0], [1, 2, 3], NSNull(), ["a": x5c[0]]]
        for shape in shapes {
            let token = try resigned(header: ["alg": "ES256", "x5c": shape])
            await expectFailure(.missingCertificateChain) { _ = try await verifier.verifyTransaction(token) }
        }
    }

    @Test func headerThatIsNotAnObjectFails() async throws {
        let payload = B64.url(try JSONEncoder().encode(DevFixture.transaction()))
        for header in [#"["ES256"]"#, #""ES256""#, "{", ""] {
            let token = TokenParts.sign(headerSegment: B64.url(header), payloadSegment: payload, key: pki.leafKey)
            await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(token) }
        }
    }

    // MARK: - Encoding

    @Test func badBase64InHeaderFails() async throws {
        var parts = TokenParts(try signed())
        parts.header = "*" + parts.header.dropFirst()
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test func badBase64InPayloadFails() async throws {
        var parts = TokenParts(try signed())
        parts.payload.insert("!", at: parts.payload.index(parts.payload.startIndex, offsetBy: 10))
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test func badBase64InSignatureFails() async throws {
        var parts = TokenParts(try signed())
        parts.signature = String(parts.signature.dropLast(2)) + "+/"
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test func paddedSegmentsFail() async throws {
        var parts = TokenParts(try signed())
        parts.signature += "=="
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(parts.token) }
    }

    @Test(arguments: ["a.b", "a.b.c.d", "abc", "..", "a..b.c"])
    func wrongSegmentCountFails(_ token: String) async {
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test func whitespaceAroundTokenFails() async throws {
        let token = try signed()
        await expectFailure(.malformedJWS) { _ = try await verifier.verifyTransaction(" " + token + "\n") }
    }

    @Test func badBase64InX5CFails() async throws {
        var x5c = try genuineX5C
        x5c[0] = "%%%" + x5c[0]
        await expectFailure(.malformedCertificate) {
            _ = try await verifier.verifyTransaction(try resigned(header: ["alg": "ES256", "x5c": x5c]))
        }
        x5c = try genuineX5C
        x5c[1] = x5c[1].replacingOccurrences(of: "=", with: "")
        if x5c[1] != (try genuineX5C)[1] {
            await expectFailure(.malformedCertificate) {
                _ = try await verifier.verifyTransaction(try resigned(header: ["alg": "ES256", "x5c": x5c]))
            }
        }
    }

    @Test func base64URLAlphabetInX5CFails() async throws {
        // Certificates in x5c are standard base64; base64url's '-' and '_' are not accepted.
        let x5c = try genuineX5C
        let converted = x5c.map {
            $0.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        // Random DER of this size all but surely has a '+' or '/' in the leaf or intermediate.
        try #require(converted[0] != x5c[0] || converted[1] != x5c[1])
        await expectFailure(.malformedCertificate) {
            _ = try await verifier.verifyTransaction(try resigned(header: ["alg": "ES256", "x5c": converted]))
        }
    }

    @Test func x5cThatIsNotDERFails() async throws {
        var x5c = try genuineX5C
        x5c[0] = Data("not a certificate".utf8).base64EncodedString()
        await expectFailure(.malformedCertificate) {
            _ = try await verifier.verifyTransaction(try resigned(header: ["alg": "ES256", "x5c": x5c]))
        }
        x5c = try genuineX5C
        x5c[1] = Data([0x30, 0x03, 0x02, 0x01, 0x01]).base64EncodedString()
        await expectFailure(.malformedCertificate) {
            _ = try await verifier.verifyTransaction(try resigned(header: ["alg": "ES256", "x5c": x5c]))
        }
    }

    // MARK: - Size

    @Test func emptyTokenFails() async {
        for token in ["", " ", "\n\t  "] {
            await expectFailure(.emptyToken) { _ = try await verifier.verifyTransaction(token) }
            await expectFailure(.emptyToken) { _ = try await verifier.verifyNotification(token) }
        }
    }

    @Test func oneMebibyteFails() async throws {
        await expectFailure(.tokenTooLarge) {
            _ = try await verifier.verifyTransaction(String(repeating: "A", count: 1 << 20))
        }
        let junk = Data(String(repeating: "x", count: 1 << 20).utf8)
        let signedJunk = try pki.signer.sign(payload: junk)
        await expectFailure(.tokenTooLarge) { _ = try await verifier.verifyTransaction(signedJunk) }
        await expectFailure(.tokenTooLarge) { _ = try await verifier.verifyNotification(signedJunk) }
    }

    @Test func sizeLimitIsExact() async {
        let limit = SignedDataVerifier.maximumTokenLength
        #expect(limit == 128 * 1024)
        await expectFailure(.malformedJWS) {
            _ = try await verifier.verifyTransaction(String(repeating: "A", count: limit))
        }
        await expectFailure(.tokenTooLarge) {
            _ = try await verifier.verifyTransaction(String(repeating: "A", count: limit + 1))
        }
        // Bytes, not characters: 43,691 three-byte characters are over the limit.
        await expectFailure(.tokenTooLarge) {
            _ = try await verifier.verifyTransaction(String(repeating: "€", count: limit / 3 + 1))
        }
    }

    // MARK: - Payload

    @Test func payloadThatIsAnArrayFails() async throws {
        let token = try pki.signer.sign(payload: Data(#"[{"transactionId":"1"}]"#.utf8))
        await expectFailure(.malformedPayload) { _ = try await verifier.verifyTransaction(token) }
        await expectFailure(.malformedPayload) { _ = try await verifier.verifyNotification(token) }
    }

    @Test(arguments: [#""text""#, "42", "null", "{", "{\"signedDate\":\"yesterday\"}", ""])
    func payloadThatIsNotAnObjectFails(_ json: String) async throws {
        let token = try pki.signer.sign(payload: Data(json.utf8))
        await expectFailure(.malformedPayload) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test func payloadWithWrongFieldTypeFails() async throws {
        let json =
            #"{"transactionId":"1","bundleId":"com.astrosvitla.astroinsight","environment":"Sandbox","quantity":"1"}"#
        let failure = await expectFailure(.malformedPayload) {
            _ = try await verifier.verifyTransaction(try pki.signer.sign(payload: Data(json.utf8)))
        }
        #expect(failure?.detail.contains("quantity") == true)
    }

    @Test func missingTransactionIDFails() async throws {
        for id in [nil, ""] as [String?] {
            var payload = DevFixture.transaction()
            payload.transactionId = id
            await expectFailure(.malformedPayload) { _ = try await verifier.verifyTransaction(try signed(payload)) }
        }
    }

    @Test func wrongBundleFails() async throws {
        let other = try signed(DevFixture.transaction(bundleID: "com.example.other"))
        let failure = await expectFailure(.bundleIDMismatch) { _ = try await verifier.verifyTransaction(other) }
        #expect(failure?.detail.contains("com.example.other") == true)
        let missing = try signed(DevFixture.transaction(bundleID: nil))
        await expectFailure(.bundleIDMismatch) { _ = try await verifier.verifyTransaction(missing) }
    }

    @Test func wrongEnvironmentFails() async throws {
        for environment in ["Production", "sandbox", "Xcode", nil] as [String?] {
            let token = try signed(DevFixture.transaction(environment: environment))
            await expectFailure(.environmentMismatch) { _ = try await verifier.verifyTransaction(token) }
        }
    }

    @Test func untrustedValuesInDetailsStayOnOneLine() async throws {
        let token = try signed(DevFixture.transaction(bundleID: "evil\nline two" + String(repeating: "x", count: 500)))
        let failure = await expectFailure(.bundleIDMismatch) { _ = try await verifier.verifyTransaction(token) }
        #expect((failure?.detail.count ?? 0) < 300)
    }

    // MARK: - Kinds

    @Test func notificationSubmittedAsTransactionFails() async throws {
        let token = try pki.signer.sign(DevFixture.notification(signedTransaction: try signed()))
        await expectFailure(.wrongPayloadKind) { _ = try await verifier.verifyTransaction(token) }
    }

    @Test func transactionSubmittedAsNotificationFails() async throws {
        await expectFailure(.wrongPayloadKind) { _ = try await verifier.verifyNotification(try signed()) }
    }

    // MARK: - Notifications

    @Test func notificationWithTamperedTransactionFails() async throws {
        var inner = TokenParts(try signed(DevFixture.transaction(id: "2000000000000001")))
        inner.payload = TokenParts(try signed(DevFixture.transaction(id: "2000000000000009"))).payload
        let token = try pki.signer.sign(DevFixture.notification(signedTransaction: inner.token))
        let failure = await expectFailure(.invalidNotificationTransaction) {
            _ = try await verifier.verifyNotification(token)
        }
        #expect(failure?.detail.contains(VerificationFailureReason.invalidSignature.rawValue) == true)
    }

    @Test func notificationWithTransactionOfAnotherEnvironmentFails() async throws {
        let inner = try signed(DevFixture.transaction(environment: "Production"))
        let failure = await expectFailure(.invalidNotificationTransaction) {
            _ = try await verifier.verifyNotification(
                try pki.signer.sign(DevFixture.notification(signedTransaction: inner))
            )
        }
        #expect(failure?.detail.contains("environment-mismatch") == true)
    }

    @Test func tamperedNotificationFails() async throws {
        var parts = TokenParts(
            try pki.signer.sign(DevFixture.notification(signedTransaction: try signed(), type: "REFUND_DECLINED"))
        )
        let refund = TokenParts(
            try pki.signer.sign(DevFixture.notification(signedTransaction: try signed(), type: "REFUND"))
        )
        parts.payload = refund.payload
        await expectFailure(.invalidSignature) { _ = try await verifier.verifyNotification(parts.token) }
    }

    @Test func notificationOfAnotherAppOrEnvironmentFails() async throws {
        let inner = try signed()
        let otherApp = DevFixture.notification(signedTransaction: inner, bundleID: "com.example.other")
        await expectFailure(.bundleIDMismatch) {
            _ = try await verifier.verifyNotification(try pki.signer.sign(otherApp))
        }
        let production = DevFixture.notification(signedTransaction: inner, environment: "Production", appAppleID: 1)
        await expectFailure(.environmentMismatch) {
            _ = try await verifier.verifyNotification(try pki.signer.sign(production))
        }
        let empty = NotificationPayload(notificationType: "TEST", signedDate: Date())
        await expectFailure(.bundleIDMismatch) { _ = try await verifier.verifyNotification(try pki.signer.sign(empty)) }
    }

    @Test func productionNotificationNeedsTheAppAppleID() async throws {
        let production = try fixture.verifier(environment: .production, appAppleID: 6_479_214_350)
        let inner = try signed(DevFixture.transaction(environment: "Production"))
        func notification(_ appAppleID: Int64?) -> String {
            try! pki.signer.sign(
                DevFixture.notification(signedTransaction: inner, environment: "Production", appAppleID: appAppleID)
            )
        }
        await expectFailure(.appAppleIDMismatch) { _ = try await production.verifyNotification(notification(nil)) }
        await expectFailure(.appAppleIDMismatch) { _ = try await production.verifyNotification(notification(42)) }
        let verified = try await production.verifyNotification(notification(6_479_214_350))
        #expect(verified.payload.data?.appAppleId == 6_479_214_350)
        #expect(verified.transaction?.payload.environment == "Production")
        // Sandbox does not require it (as in Apple's library).
        let sandboxInner = try signed()
        let sandbox = try pki.signer.sign(DevFixture.notification(signedTransaction: sandboxInner, appAppleID: 42))
        #expect(try await verifier.verifyNotification(sandbox).transaction != nil)
    }

    @Test func productionPolicyWithoutAppAppleIDRejectsNotificationsWithoutOne() async throws {
        // The initializer refuses Production without an app Apple ID; a policy edited afterwards
        // must still not accept a notification that carries none.
        var policy = try fixture.policy(environment: .production, appAppleID: 1)
        policy.appAppleID = nil
        let production = SignedDataVerifier(policy: policy)
        let inner = try signed(DevFixture.transaction(environment: "Production"))
        let token = try pki.signer.sign(
            DevFixture.notification(signedTransaction: inner, environment: "Production", appAppleID: nil)
        )
        await expectFailure(.appAppleIDMismatch) { _ = try await production.verifyNotification(token) }
    }

    @Test func summaryAndExternalPurchaseTokenNameTheApp() async throws {
        let summary = NotificationPayload(
            notificationType: "RENEWAL_EXTENSION",
            subtype: "SUMMARY",
            signedDate: Date(),
            summary: NotificationSummary(requestIdentifier: "r1", environment: "Sandbox", bundleId: Fixtures.bundleID)
        )
        #expect(
            try await verifier.verifyNotification(try pki.signer.sign(summary)).payload.summary?.requestIdentifier
                == "r1"
        )

        let sandboxToken = NotificationPayload(
            notificationType: "EXTERNAL_PURCHASE_TOKEN",
            signedDate: Date(),
            externalPurchaseToken: ExternalPurchaseToken(
                externalPurchaseId: "SANDBOX_1234",
                tokenCreationDate: Date(),
                bundleId: Fixtures.bundleID
            )
        )
        #expect(try await verifier.verifyNotification(try pki.signer.sign(sandboxToken)).transaction == nil)

        var productionToken = sandboxToken
        productionToken.externalPurchaseToken?.externalPurchaseId = "1234"
        await expectFailure(.environmentMismatch) {
            _ = try await verifier.verifyNotification(try pki.signer.sign(productionToken))
        }
    }

    // MARK: - StoreKit Testing

    @Test func xcodeEnvironmentSkipsTheChainButNotTheSignature() async throws {
        // The leaf alone stands in for StoreKit Testing's self-signed certificate; no root trusts it.
        let xcode = SignedDataVerifier(
            policy: try VerificationPolicy(
                trustedRoots: [VerificationPolicy.appleRootCAG3],
                bundleID: Fixtures.bundleID,
                environment: .xcode
            )
        )
        let local = JWSSigner(key: pki.leafKey, chain: [pki.leaf])
        let verified = try await xcode.verifyTransaction(try local.sign(DevFixture.transaction(environment: "Xcode")))
        #expect(verified.payload.environment == "Xcode")

        let forged = JWSSigner(key: P256.Signing.PrivateKey(), chain: [pki.leaf])
        await expectFailure(.invalidSignature) {
            _ = try await xcode.verifyTransaction(try forged.sign(DevFixture.transaction(environment: "Xcode")))
        }
        await expectFailure(.environmentMismatch) {
            _ = try await xcode.verifyTransaction(try local.sign(DevFixture.transaction(environment: "Sandbox")))
        }
        await expectFailure(.invalidChainLength) {
            _ = try await verifier.verifyTransaction(try local.sign(DevFixture.transaction()))
        }
        let fourCertificates = JWSSigner(key: pki.leafKey, chain: [pki.leaf, pki.leaf, pki.leaf, pki.leaf])
        await expectFailure(.invalidChainLength) {
            _ = try await xcode.verifyTransaction(
                try fourCertificates.sign(DevFixture.transaction(environment: "Xcode"))
            )
        }
    }

    @Test func localTestingEnvironmentNeedsItsOwnName() async throws {
        let localTesting = try fixture.verifier(environment: .localTesting)
        let signer = JWSSigner(key: pki.leafKey, chain: [pki.leaf, pki.intermediate, pki.root])
        let inner = try signer.sign(DevFixture.transaction(environment: "LocalTesting"))
        let notification = DevFixture.notification(signedTransaction: inner, environment: "LocalTesting")
        #expect(try await localTesting.verifyNotification(try signer.sign(notification)).transaction != nil)
        await expectFailure(.environmentMismatch) {
            _ = try await localTesting.verifyTransaction(try signer.sign(DevFixture.transaction(environment: "Xcode")))
        }
    }
}
