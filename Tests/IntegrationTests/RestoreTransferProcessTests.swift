import AstroDomain
import Billing
import Foundation
import Testing
import WorkerRuntime

/// Restore on a new device through two real billing-worker processes (their own least-privilege
/// database role and broker user), the real broker and database: a hundred concurrent
/// deliveries of one restore move the unspent part of a partly spent pack once.
extension BillingWorkerProcessTests {
    @Test func aRestoreDeliveredAHundredTimesConcurrentlyMovesTheUnspentCreditsOnce() async throws {
        let workers = try await startWorkers(2, label: "restore")
        defer { workers.stop() }
        let (buyer, profiles) = try await userWithProfiles(1)
        let (jws, transactionID) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack10",
            user: buyer
        )
        let bought = JobID.random()
        try await publish(
            .billingVerifyPurchase,
            VerifyPurchaseRequest(jobID: bought, userID: buyer, signedTransaction: jws)
        )
        #expect(try await waitForJobs([bought])[bought]?.0 == "succeeded")
        let spent = Self.requests(buyer, profiles, count: 3)
        for request in spent { try await publish(.reportRequest, request) }
        for (_, status) in try await waitForJobs(spent.map(\.jobID)) { #expect(status.0 == "succeeded") }

        // The buyer reinstalls: a new anonymous id restores the same signed transaction.
        let newInstall = UserID.random()
        let jobs = (0..<100).map { _ in JobID.random() }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for job in jobs {
                group.addTask {
                    try await publish(
                        .billingVerifyPurchase,
                        VerifyPurchaseRequest(jobID: job, userID: newInstall, signedTransaction: jws, restore: true)
                    )
                }
            }
            try await group.waitForAll()
        }
        let statuses = try await waitForJobs(jobs)
        #expect(statuses.values.allSatisfy { $0.0 == "succeeded" }, "\(statuses.values.filter { $0.0 != "succeeded" })")
        let list = "{" + jobs.map(\.description).joined(separator: ",") + "}"
        let firsts = try await scalar(
            """
            SELECT count(*)::int AS n FROM jobs
            WHERE id = ANY($1::uuid[]) AND result->>'alreadyProcessed' = 'false' AND result->>'transferred' = 'true'
            """,
            [list]
        )
        #expect(firsts == 1)
        #expect(
            try await scalar(
                "SELECT count(*)::int AS n FROM credit_transfers WHERE transaction_id = $1",
                [transactionID]
            )
                == 1
        )
        #expect(
            try await scalar(
                "SELECT count(*)::int AS n FROM credit_ledger WHERE transaction_id = $1 AND entry = 'transferred'",
                [transactionID]
            ) == 14
        )
        let old = try await audit(buyer)
        #expect(old.available == 0 && old.consumed == 3 && old.transferredOut == 7 && old.balanced, "\(old)")
        let new = try await audit(newInstall)
        #expect(new.available == 7 && new.transferredIn == 7 && new.issued == 0 && new.balanced, "\(new)")
        await close()
    }
}
