import AppStoreServerAPI
import AppStoreServerFake
import AstroDomain
import Billing
import Crypto
import Foundation
import Postgres
import StoreKitVerification
import Testing
import WorkerRuntime

/// `billing.verify-purchase` with only a transaction id: the handler fetches the signed
/// transaction from (a local fake of) the App Store Server API, verifies it and records it.
@Suite(.timeLimit(.minutes(2)))
struct BillingVerifyByIDTests {
    let key = P256.Signing.PrivateKey()
    let fake: AppStoreServerFake
    let handler: VerifyPurchaseHandler
    let ledger: BillingLedgerIntegrationTests

    init() async throws {
        fake = try AppStoreServerFake(
            bundleID: BillingDefaults.bundleID,
            keyID: "TESTKEY123",
            issuerID: "57246542-96fe-1a63-e053-0824d011072a",
            publicKey: key.publicKey
        )
        let client = AppStoreServerAPIClient(
            configuration: try AppStoreServerAPIConfiguration(
                baseURL: fake.baseURL,
                keyID: "TESTKEY123",
                issuerID: "57246542-96fe-1a63-e053-0824d011072a",
                bundleID: BillingDefaults.bundleID,
                signingKey: key,
                requestTimeout: .seconds(2),
                retryPolicy: .init(maxAttempts: 3, baseDelay: .milliseconds(50), maxDelay: .milliseconds(200))
            )
        )
        handler = VerifyPurchaseHandler(
            verifier: BillingLedgerIntegrationTests.verifier,
            catalog: .defaults,
            appStore: client
        )
        ledger = try await BillingLedgerIntegrationTests()
    }

    func purchase(id: String, user: UserID) async throws -> JobOutcome {
        try await ledger.run(
            handler,
            [
                "jobId": .string(JobID.random().description), "userId": .string(user.description),
                "transactionId": .string(id),
            ],
            type: .billingVerifyPurchase
        )
    }

    @Test func aTransactionFetchedByIdIsVerifiedAndRecorded() async throws {
        let user = UserID.random()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: user
        )
        fake.register(signedTransaction: jws, forTransactionID: id)
        // Apple is busy twice, then answers: the client retries within the job.
        fake.enqueueFailure(.rateLimited(retryAfter: nil))
        fake.enqueueFailure(.retryableServerError)
        let outcome = try await purchase(id: id, user: user)
        #expect(outcome.status == .succeeded)
        #expect(BillingLedgerIntegrationTests.credits(outcome).count == 5)
        #expect(fake.requestCount == 3)
        #expect(try await ledger.balance(user).available == 5)
    }

    /// A transaction id is no proof of who bought it: fetched by id, a transaction counts only
    /// with an appAccountToken naming the caller, whatever BILLING_REQUIRE_ACCOUNT_TOKEN says.
    @Test func aTransactionFetchedByIdNeedsAnAccountTokenAlways() async throws {
        let lenient = VerifyPurchaseHandler(
            verifier: BillingLedgerIntegrationTests.verifier,
            catalog: .defaults,
            appStore: AppStoreServerAPIClient(
                configuration: try AppStoreServerAPIConfiguration(
                    baseURL: fake.baseURL,
                    keyID: "TESTKEY123",
                    issuerID: "57246542-96fe-1a63-e053-0824d011072a",
                    bundleID: BillingDefaults.bundleID,
                    signingKey: key
                )
            ),
            requireAccountToken: false
        )
        let user = UserID.random()
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.single",
            user: nil
        )
        fake.register(signedTransaction: jws, forTransactionID: id)
        let outcome = try await ledger.run(
            lenient,
            [
                "jobId": .string(JobID.random().description), "userId": .string(user.description),
                "transactionId": .string(id),
            ],
            type: .billingVerifyPurchase
        )
        #expect(BillingLedgerIntegrationTests.failureCode(outcome) == "account-token-missing")
        #expect(try await ledger.balance(user).issued == 0)
    }

    @Test func anUnknownTransactionIsRejectedWithoutRetry() async throws {
        let outcome = try await purchase(id: "2000000999999999", user: .random())
        #expect(BillingLedgerIntegrationTests.failureCode(outcome) == "transaction-not-found")
        #expect(fake.requestCount == 1)
    }

    @Test func aForgedAnswerFromTheAPIIsStillVerified() async throws {
        // Whatever the network returns is verified like a token from the app.
        let user = UserID.random()
        let rogue = try DevPKI.generate(
            notValidBefore: Date().addingTimeInterval(-86_400),
            notValidAfter: Date().addingTimeInterval(86_400)
        )
        let (jws, id) = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack10",
            user: user,
            signer: rogue.signer
        )
        fake.register(signedTransaction: jws, forTransactionID: id)
        let outcome = try await purchase(id: id, user: user)
        #expect(BillingLedgerIntegrationTests.failureCode(outcome) == "untrusted-certificate-chain")
        #expect(try await ledger.balance(user).issued == 0)
    }

    @Test func anOutageThatOutlastsTheClientsRetriesIsRetriedByTheRuntime() async throws {
        fake.enqueueFailure(.serverError, count: 10)
        await #expect(throws: AppStoreAPIError.self) {
            _ = try await purchase(id: "2000000957300037", user: .random())
        }
        #expect(fake.requestCount == 3)
    }
}
