import Foundation
import StoreKitVerification
import Testing

/// One of the shared billing examples: a token and the verdict of Apple's App Store Server
/// Library on it (bundle id com.astrosvitla.astroinsight, Sandbox, root test-root.der).
struct Example: Sendable, CustomTestStringConvertible {
    var id: String
    var kind: String
    var jws: String
    var valid: Bool
    var transactionID: String?

    var testDescription: String { id }

    static let all: [Example] = {
        struct File: Decodable {
            struct Item: Decodable {
                struct Expected: Decodable {
                    var valid: Bool
                    var transactionId: String?
                }
                var id: String
                var kind: String
                var jws: String?
                var expected: Expected
            }
            var items: [Item]
        }
        let data = try! Data(contentsOf: Fixtures.url("examples", "json"))
        let file = try! JSONDecoder().decode(File.self, from: data)
        let genuine = file.items.first { $0.id == "tx-001" }!.jws!
        return file.items.map { item in
            Example(
                id: item.id,
                kind: item.kind,
                jws: item.jws ?? generated(item.id, genuine: genuine),
                valid: item.expected.valid,
                transactionID: item.expected.transactionId
            )
        }
    }()

    /// The two inputs too large to ship: made here as their notes say.
    static func generated(_ id: String, genuine: String) -> String {
        switch id {
        case "tx-091":
            // 1 MiB of the letter A (no dots).
            return String(repeating: "A", count: 1_048_576)
        case "tx-092":
            // Genuine header and signature around 1 MiB of base64url junk.
            let parts = TokenParts(genuine)
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            var generator = SystemRandomNumberGenerator()
            let junk = String((0..<1_048_576).map { _ in alphabet.randomElement(using: &generator)! })
            return "\(parts.header).\(junk).\(parts.signature)"
        default:
            fatalError("example \(id) has no jws and no generator")
        }
    }

    /// The reason this verifier gives for each invalid example (Apple's library says only
    /// "invalid"; these pin down our codes).
    static let reasons: [String: VerificationFailureReason] = [
        "tx-031": .invalidSignature, "tx-034": .invalidSignature, "tx-035": .invalidSignature,
        "tx-040": .invalidSignature, "tx-044": .invalidSignature, "tx-045": .invalidSignature,
        "tx-049": .untrustedCertificateChain, "tx-050": .untrustedCertificateChain,
        "tx-055": .untrustedCertificateChain, "tx-057": .missingMarkerExtension,
        "tx-062": .untrustedCertificateChain, "tx-066": .invalidChainLength,
        "tx-069": .missingCertificateChain, "tx-074": .malformedCertificate,
        "tx-075": .missingCertificateChain, "tx-077": .certificateNotValidAtSignedDate,
        "tx-080": .certificateNotValidAtSignedDate, "tx-083": .unsupportedAlgorithm,
        "tx-085": .unsupportedAlgorithm, "tx-087": .unsupportedAlgorithm, "tx-091": .tokenTooLarge,
        "tx-092": .tokenTooLarge, "tx-096": .malformedJWS, "tx-104": .malformedJWS,
        "tx-106": .malformedPayload, "tx-107": .bundleIDMismatch, "tx-109": .bundleIDMismatch,
        "tx-114": .bundleIDMismatch, "tx-115": .environmentMismatch, "tx-119": .environmentMismatch,
        "tx-121": .wrongPayloadKind, "ntf-006": .invalidSignature, "ntf-009": .bundleIDMismatch,
        "ntf-010": .invalidNotificationTransaction,
    ]
}

/// Our verdict on every shared example must be Apple's.
@Suite struct ExampleFixtureTests {
    /// One verifier for all examples, so later ones run against a warm chain cache.
    static let shared = SignedDataVerifier(policy: Fixtures.policy)

    @Test func theFileHoldsAllExamples() {
        #expect(Example.all.count == 48)
        #expect(Example.all.filter { $0.kind == "notification" }.count == 5)
        #expect(Set(Example.all.map(\.id)).count == 48)
        #expect(Example.all.first { $0.id == "tx-091" }?.jws.utf8.count == 1_048_576)
        #expect(Example.all.first { $0.id == "tx-092" }.map { TokenParts($0.jws).payload.utf8.count } == 1_048_576)
    }

    @Test func everyInvalidExampleHasAnExpectedReason() {
        let invalid = Set(Example.all.filter { !$0.valid }.map(\.id))
        #expect(invalid == Set(Example.reasons.keys))
    }

    @Test(arguments: Example.all)
    func verdictMatchesApple(_ example: Example) async {
        // Fresh (cold cache) and shared (warm cache) verifiers must agree with Apple.
        for verifier in [SignedDataVerifier(policy: Fixtures.policy), Self.shared] {
            let verdict = await Self.verdict(example, verifier)
            switch verdict {
            case .success(let transactionID):
                #expect(example.valid, "verified, but Apple's library rejects \(example.id)")
                #expect(transactionID == example.transactionID)
            case .failure(let failure):
                #expect(!example.valid, "rejected \(example.id): \(failure)")
                #expect(failure.reason == Example.reasons[example.id], "\(failure)")
                #expect(!failure.detail.contains(TokenParts.signatureOrWhole(example.jws)))
            }
        }
    }

    static func verdict(
        _ example: Example,
        _ verifier: SignedDataVerifier
    ) async -> Result<String?, VerificationFailure> {
        do {
            if example.kind == "notification" {
                let notification = try await verifier.verifyNotification(example.jws)
                return .success(notification.transaction?.transactionID)
            }
            return .success(try await verifier.verifyTransaction(example.jws).transactionID)
        } catch {
            return .failure(error)
        }
    }
}

extension TokenParts {
    /// A distinctive piece of a token that must never be echoed: the signature segment, or the
    /// first 40 characters of something that is not a JWS.
    static func signatureOrWhole(_ token: String) -> String {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 3, parts[2].count >= 20 { return String(parts[2]) }
        return String(token.prefix(40))
    }
}
