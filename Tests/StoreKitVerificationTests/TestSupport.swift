import Crypto
import Foundation
import StoreKitVerification
import Testing

/// Files under Fixtures/ (copied from the team's shared billing examples).
enum Fixtures {
    static func url(_ name: String, _ fileExtension: String) -> URL {
        guard let url = Bundle.module.url(forResource: name, withExtension: fileExtension, subdirectory: "Fixtures")
        else {
            fatalError("missing test fixture Fixtures/\(name).\(fileExtension)")
        }
        return url
    }

    static let bundleID = "com.astrosvitla.astroinsight"

    /// The policy every example was judged under.
    static let policy: VerificationPolicy = {
        let roots = try! VerificationPolicy.loadCertificates(fromFile: url("test-root", "der").path)
        return try! VerificationPolicy(trustedRoots: roots, bundleID: bundleID, environment: .sandbox)
    }()
}

/// The pieces of a compact JWS, to build malformed and re-signed tokens from genuine ones.
struct TokenParts {
    var header: String
    var payload: String
    var signature: String

    init(_ token: String) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        precondition(parts.count == 3, "not a compact JWS")
        header = parts[0]
        payload = parts[1]
        signature = parts[2]
    }

    var token: String { "\(header).\(payload).\(signature)" }

    /// The header as a JSON object.
    var headerObject: [String: Any] {
        try! JSONSerialization.jsonObject(with: B64.urlDecode(header)) as! [String: Any]
    }

    /// The x5c entries, as written.
    var x5c: [String] { headerObject["x5c"] as! [String] }

    var payloadData: Data { B64.urlDecode(payload) }

    /// A token with this header object and payload, signed ES256 with `key` over the new text.
    static func sign(header: Any, payload: Data, key: P256.Signing.PrivateKey) -> String {
        let headerData = try! JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        return sign(headerSegment: B64.url(headerData), payloadSegment: B64.url(payload), key: key)
    }

    /// Signs the literal segments given, whatever they hold.
    static func sign(headerSegment: String, payloadSegment: String, key: P256.Signing.PrivateKey) -> String {
        let input = "\(headerSegment).\(payloadSegment)"
        let signature = try! key.signature(for: Data(input.utf8)).rawRepresentation
        return "\(input).\(B64.url(signature))"
    }
}

enum B64 {
    static func url(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func url(_ text: String) -> String { url(Data(text.utf8)) }

    static func urlDecode(_ text: String) -> Data {
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while standard.count % 4 != 0 { standard += "=" }
        return Data(base64Encoded: standard)!
    }
}

/// A development PKI valid from a day ago for a year, and payloads signed with it.
struct DevFixture: Sendable {
    let pki: DevPKI
    let notValidBefore: Date
    let notValidAfter: Date

    init(prefix: String = "Test", options: DevPKI.Options = .init()) throws {
        let now = Date()
        // Whole seconds: certificates store validity to the second.
        notValidBefore = Date(timeIntervalSince1970: (now.timeIntervalSince1970 - 86_400).rounded(.down))
        notValidAfter = notValidBefore.addingTimeInterval(365 * 86_400)
        pki = try DevPKI.generate(
            commonNamePrefix: prefix,
            notValidBefore: notValidBefore,
            notValidAfter: notValidAfter,
            options: options
        )
    }

    func policy(
        environment: StoreEnvironment = .sandbox,
        appAppleID: Int64? = nil
    ) throws -> VerificationPolicy {
        try VerificationPolicy(
            trustedRoots: [pki.root],
            bundleID: Fixtures.bundleID,
            environment: environment,
            appAppleID: appAppleID
        )
    }

    func verifier(environment: StoreEnvironment = .sandbox, appAppleID: Int64? = nil) throws -> SignedDataVerifier {
        SignedDataVerifier(policy: try policy(environment: environment, appAppleID: appAppleID))
    }

    /// Now, to the millisecond (the precision of dates in signed payloads).
    static func now() -> Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
    }

    static func transaction(
        id: String = "2000000000000001",
        signedDate: Date? = DevFixture.now(),
        bundleID: String? = Fixtures.bundleID,
        environment: String? = "Sandbox"
    ) -> TransactionPayload {
        TransactionPayload(
            transactionId: id,
            originalTransactionId: id,
            bundleId: bundleID,
            productId: "com.astrosvitla.report.credit.single",
            purchaseDate: signedDate,
            originalPurchaseDate: signedDate,
            quantity: 1,
            type: "Consumable",
            appAccountToken: "0ff9bb51-0944-4e0c-9dfb-369bab13dfae",
            inAppOwnershipType: "PURCHASED",
            signedDate: signedDate,
            environment: environment,
            storefront: "UKR",
            storefrontId: "143492",
            transactionReason: "PURCHASE",
            currency: "UAH",
            price: 199_000
        )
    }

    static func notification(
        signedTransaction: String?,
        type: String = "REFUND",
        bundleID: String = Fixtures.bundleID,
        environment: String = "Sandbox",
        appAppleID: Int64? = nil,
        signedDate: Date = DevFixture.now()
    ) -> NotificationPayload {
        NotificationPayload(
            notificationType: type,
            notificationUUID: UUID().uuidString.lowercased(),
            version: "2.0",
            signedDate: signedDate,
            data: NotificationData(
                appAppleId: appAppleID,
                bundleId: bundleID,
                bundleVersion: "1",
                environment: environment,
                signedTransactionInfo: signedTransaction
            )
        )
    }
}

/// Runs `body`, expecting it to fail with `reason`; returns the failure for further checks.
@discardableResult
func expectFailure(
    _ reason: VerificationFailureReason,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> VerificationFailure? {
    do {
        try await body()
        Issue.record("verified, expected \(reason.rawValue)", sourceLocation: sourceLocation)
        return nil
    } catch let failure as VerificationFailure {
        #expect(failure.reason == reason, "\(failure.detail)", sourceLocation: sourceLocation)
        #expect(!failure.detail.isEmpty && !failure.detail.contains("\n"), sourceLocation: sourceLocation)
        return failure
    } catch {
        Issue.record("expected \(reason.rawValue), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
