import AstroDomain
import Billing
import Foundation
import Testing

/// Restore on a new device as the app does it: `POST /v1/purchases` with `restore: true`
/// through the real gateway and billing-worker; the outcome is visible in the job and in
/// `GET /v1/credits` and `GET /v1/ledger` of both installs.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRestoreTests {
    typealias Resources = GatewayResourcesTests

    @Test func aNewInstallRestoresTheUnspentCreditsOfItsAccountsPurchase() async throws {
        let gateway = try await GatewayHarness.launch(label: "restore-gateway")
        defer { gateway.processes.stop() }
        let workers = try await Resources.startBillingAndReportWorkers()
        defer { workers.stop() }
        let base = gateway.base
        let logs = { gateway.processes.output + "\n" + workers.output }
        let (oldText, oldToken) = try await GatewayHarness.register(base)
        let (_, newToken) = try await GatewayHarness.register(base)
        let oldUser = try #require(UserID(oldText))
        let pack = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: oldUser
        )

        func post(_ body: JSONValue, token: String) async throws -> JSONValue {
            let job = try Resources.accepted(
                try await Resources.request("POST", "\(base)/v1/purchases", token: token, body: body)
            )
            return try await Resources.finished(base, job, token: token, logs: logs)
        }
        #expect(try await post(["signedTransaction": .string(pack.jws)], token: oldToken)["status"] == "succeeded")

        // The input is bounded: `restore` is a boolean or nothing.
        let wrongType = try await Resources.request(
            "POST",
            "\(base)/v1/purchases",
            token: newToken,
            body: ["signedTransaction": .string(pack.jws), "restore": "yes"]
        )
        #expect(wrongType.status == 422 && wrongType.json?["code"] == "invalid-field-type")
        #expect(wrongType.json?["field"] == "restore")

        // Without `restore` the transaction of another account is refused, as before.
        let refused = try await post(["signedTransaction": .string(pack.jws)], token: newToken)
        #expect(refused["error"]?["code"] == "account-mismatch", "\(refused)")

        let restored = try await post(["signedTransaction": .string(pack.jws), "restore": true], token: newToken)
        #expect(restored["status"] == "succeeded", "\(restored)")
        #expect(restored["result"]?["transferred"] == true)
        #expect(restored["result"]?["credits"]?.arrayValue?.count == 5)
        let again = try await post(["signedTransaction": .string(pack.jws), "restore": true], token: newToken)
        #expect(again["result"]?["alreadyProcessed"] == true)

        let newCredits = try await Resources.request("GET", "\(base)/v1/credits", token: newToken)
        #expect(newCredits.json?["available"] == 5 && newCredits.json?["byArea"]?["any"] == 5)
        let oldCredits = try await Resources.request("GET", "\(base)/v1/credits", token: oldToken)
        #expect(oldCredits.json?["available"] == 0)
        for (token, count) in [(newToken, 5), (oldToken, 10)] {
            let ledger = try await Resources.request("GET", "\(base)/v1/ledger", token: token)
            #expect(ledger.status == 200)
            let entries = try #require(ledger.json?["items"]?.arrayValue)
            #expect(entries.count == count, "\(String(describing: ledger.json))")
            #expect(entries.filter { $0["entry"] == "transferred" }.count == 5)
        }
    }
}
