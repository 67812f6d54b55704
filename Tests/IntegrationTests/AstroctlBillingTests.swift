import AstroDomain
import Foundation
import TestProcesses
import Testing

/// `astroctl billing` as a user runs it: verdicts on Apple-judged tokens, a development PKI and
/// a purchase signed with it, and credits from the real database.
@Suite(.timeLimit(.minutes(2)))
struct AstroctlBillingTests {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("StoreKitVerificationTests/Fixtures")

    struct Example: Decodable {
        var id: String
        var kind: String
        var jws: String?
        var expected: Expected
        struct Expected: Decodable {
            var valid: Bool
            var transactionId: String?
        }
    }

    static let examples: [Example] = {
        struct File: Decodable { var items: [Example] }
        let data = try! Data(contentsOf: fixtures.appendingPathComponent("examples.json"))
        return try! JSONDecoder().decode(File.self, from: data).items
    }()

    /// Runs astroctl with `input` on standard input.
    func astroctl(_ arguments: [String], input: String = "") async throws -> ProcessRunner.Result {
        try await ProcessRunner.run(ProcessRunner.productPath("astroctl"), arguments, input: input)
    }

    func verdict(_ result: ProcessRunner.Result) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(result.output.utf8))
    }

    @Test func verifyAgreesWithApplesVerdictOnEveryExample() async throws {
        let root = Self.fixtures.appendingPathComponent("test-root.der").path
        for example in Self.examples {
            guard let jws = example.jws else { continue }
            var arguments = ["billing", "verify", "--root", root, "--environment", "Sandbox"]
            if example.kind == "notification" { arguments.append("--notification") }
            let result = try await astroctl(arguments, input: jws)
            #expect(result.status == 0, "\(example.id): \(result.error)")
            let verdict = try verdict(result)
            #expect(verdict["valid"] == .bool(example.expected.valid), "\(example.id)")
            #expect(verdict["transactionId"]?.stringValue == example.expected.transactionId, "\(example.id)")
            if !example.expected.valid {
                #expect(verdict["reason"]?.stringValue?.isEmpty == false, "\(example.id) has no reason")
            }
        }
    }

    @Test func aDevelopmentPurchaseVerifiesOnlyAgainstItsOwnRoot() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("astroctl-pki-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let made = try await astroctl(["billing", "dev-pki", "--out", folder])
        #expect(made.status == 0, "\(made.error)")
        // A second run refuses to overwrite the PKI.
        #expect(try await astroctl(["billing", "dev-pki", "--out", folder]).status != 0)
        let user = UserID.random().description
        let signed = try await astroctl([
            "billing", "dev-sign", "--pki", folder, "--product", "com.astrosvitla.report.credit.pack5", "--user", user,
        ])
        #expect(signed.status == 0, "\(signed.error)")
        let mine = try verdict(
            try await astroctl(["billing", "verify", "--root", folder + "/root.der"], input: signed.output)
        )
        #expect(mine["valid"] == true)
        #expect(mine["productId"] == "com.astrosvitla.report.credit.pack5")
        // Apple's root (the default) does not trust it.
        let apple = try verdict(try await astroctl(["billing", "verify"], input: signed.output))
        #expect(apple["valid"] == false)
        #expect(apple["reason"] == "untrusted-certificate-chain")
        // A notification about it verifies as a notification, not as a transaction.
        let notification = try await astroctl([
            "billing", "dev-sign", "--pki", folder, "--product", "com.astrosvitla.report.credit.pack5",
            "--notification", "REFUND",
        ])
        let asNotification = try verdict(
            try await astroctl(
                ["billing", "verify", "--notification", "--root", folder + "/root.der"],
                input: #"{"signedPayload": "\#(notification.output.trimmingCharacters(in: .whitespacesAndNewlines))"}"#
            )
        )
        #expect(asNotification["valid"] == true)
        #expect(asNotification["notificationType"] == "REFUND")
        let asTransaction = try verdict(
            try await astroctl(["billing", "verify", "--root", folder + "/root.der"], input: notification.output)
        )
        #expect(asTransaction["reason"] == "wrong-payload-kind")
    }

    @Test func creditsOfAUserWithNothingAreZeroAndBalanced() async throws {
        let database = try await RuntimeTestEnvironment.database()
        let url =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        let result = try await astroctl([
            "billing", "credits", "--user", UserID.random().description, "--json", "--database-url", url,
        ])
        #expect(result.status == 0, "\(result.error)")
        let balance = try verdict(result)
        #expect(balance["available"] == 0)
        #expect(balance["balanced"] == true)
        let bad = try await astroctl(["billing", "credits", "--user", "not-a-uuid", "--database-url", url])
        #expect(bad.status != 0)
        #expect(bad.error.contains("--user"))
    }
}
