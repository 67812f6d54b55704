import AstroDomain
import Billing
import Foundation
import Testing
import WorkerRuntime

/// A restore that names only a transaction id moves nothing: an id proves nothing about who
/// holds the purchase (README, "Restore on a new device").
extension BillingVerifyByIDTests {
    @Test func aRestoreByTransactionIdMovesNothing() async throws {
        let (buyer, _) = try await ledger.userWithProfile()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: buyer
        )
        #expect(try await ledger.purchase(jws, user: buyer).status == .succeeded)
        fake.register(signedTransaction: jws, forTransactionID: id)
        let newInstall = UserID.random()
        let outcome = try await ledger.run(
            handler,
            [
                "jobId": .string(JobID.random().description), "userId": .string(newInstall.description),
                "transactionId": .string(id), "restore": true,
            ],
            type: .billingVerifyPurchase
        )
        #expect(BillingLedgerIntegrationTests.failureCode(outcome) == RestoreCode.needsSignedTransaction.rawValue)
        #expect(outcome.messages.map(\.routingKey) == ["billing.purchase-rejected"])
        #expect(try await ledger.balance(buyer).available == 5)
        #expect(try await ledger.balance(newInstall).available == 0)
    }
}
