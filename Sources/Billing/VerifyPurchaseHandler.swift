import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import StoreKitVerification
import UUIDText
import WorkerRuntime

/// `billing.verify-purchase`: verify a StoreKit 2 signed transaction (or fetch it by id from the
/// App Store Server API and verify that), then record it and issue its credits exactly once.
///
/// A token that does not verify, a product we do not sell, a revoked transaction or one bought
/// for another account grants nothing: the job ends `failed` with a stable reason code and a
/// `billing.purchase-rejected` event. A transaction already recorded answers with what the first
/// delivery issued.
///
/// A restore on a new install (`restore: true`) of a signed transaction bought by another of our
/// users moves that purchase's unspent credits to the caller instead (`CreditLedger.transfer`).
public struct VerifyPurchaseHandler: JobHandler {
    public let jobType = JobType.billingVerifyPurchase
    private let verifier: SignedDataVerifier
    private let catalog: ProductCatalog
    private let appStore: AppStoreServerAPIClient?
    private let requireAccountToken: Bool

    /// - Parameters:
    ///   - appStore: the App Store Server API client for requests that carry only a
    ///     `transactionId`; without one such requests are rejected with
    ///     `verification-by-id-unavailable`.
    ///   - requireAccountToken: refuse a signed transaction that has no `appAccountToken`
    ///     (`account-token-missing`); a transaction fetched by id always needs one, because
    ///     anyone who learns a transaction id could otherwise redeem it.
    public init(
        verifier: SignedDataVerifier,
        catalog: ProductCatalog,
        appStore: AppStoreServerAPIClient?,
        requireAccountToken: Bool = true
    ) {
        self.verifier = verifier
        self.catalog = catalog
        self.appStore = appStore
        self.requireAccountToken = requireAccountToken
    }

    public enum Prepared: Sendable {
        case verified(VerifyPurchaseRequest, VerifiedTransaction, Product)
        /// A restore on a new install: the transaction verified, bought by `buyer` (see
        /// `CreditLedger.transfer`).
        case transfer(VerifyPurchaseRequest, VerifiedTransaction, Product, buyer: UserID)
        case rejected(VerifyPurchaseRequest, JobError, transactionID: String?)
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(VerifyPurchaseRequest.self)
        let token: String
        switch (request.signedTransaction, request.transactionID) {
        case (let signed?, nil):
            token = signed
        case (nil, let id?):
            guard let appStore else {
                return .rejected(
                    request,
                    JobError(
                        code: .verificationByIDUnavailable,
                        message:
                            "this billing-worker has no App Store Server API key configured; send signedTransaction"
                    ),
                    transactionID: id
                )
            }
            do {
                token = try await appStore.signedTransactionInfo(transactionID: id)
            } catch {
                // Rate limits and outages pass: retried with backoff by the runtime.
                if error.isTransient { throw error }
                return .rejected(request, JobError(code: error.code, message: error.description), transactionID: id)
            }
        case (_?, _?):
            throw JobRejection(
                code: .invalidPayload,
                message: "send either signedTransaction or transactionId, not both"
            )
        case (nil, nil):
            throw JobRejection(
                code: .invalidPayload,
                message: "missing field \"signedTransaction\" (or \"transactionId\")"
            )
        }
        let verified: VerifiedTransaction
        do {
            verified = try await verifier.verifyTransaction(token)
        } catch {
            return .rejected(
                request,
                JobError(code: error.reason.rawValue, message: error.detail),
                transactionID: request.transactionID
            )
        }
        let payload = verified.payload
        if let id = request.transactionID, id != verified.transactionID {
            return .rejected(
                request,
                JobError(
                    code: .transactionIDMismatch,
                    message: "asked for transaction \(id), the App Store returned \(verified.transactionID)"
                ),
                transactionID: id
            )
        }
        guard let productID = payload.productId, let product = catalog.product(id: productID) else {
            return .rejected(
                request,
                JobError(
                    code: .unknownProduct,
                    message: "product \(payload.productId ?? "(none)") is not in the catalog; no credits issued"
                ),
                transactionID: verified.transactionID
            )
        }
        if payload.revocationDate != nil {
            return .rejected(
                request,
                JobError(
                    code: .transactionRevoked,
                    message: "transaction \(verified.transactionID) was refunded or revoked by the App Store"
                ),
                transactionID: verified.transactionID
            )
        }
        // The app sets appAccountToken to our user id at purchase: a token bought by one account
        // cannot be redeemed by another, and one without it only where the operator allows
        // (never when we fetched it by id: a transaction id is no proof of who bought it).
        guard let token = payload.appAccountToken else {
            if requireAccountToken || request.transactionID != nil {
                return .rejected(
                    request,
                    JobError(
                        code: .accountTokenMissing,
                        message: "transaction \(verified.transactionID) carries no appAccountToken, so it cannot "
                            + "be tied to this account; purchase with appAccountToken set to the user id"
                    ),
                    transactionID: verified.transactionID
                )
            }
            return try checkedQuantity(request, verified, product)
        }
        if let buyer = UUID(text: token), buyer != request.userID.uuid, request.restore == true {
            return try restore(request, verified, product, buyer: UserID(buyer))
        }
        if UUID(text: token) != request.userID.uuid {
            return .rejected(
                request,
                JobError(
                    code: .accountMismatch,
                    message: "transaction \(verified.transactionID) was bought for another account"
                ),
                transactionID: verified.transactionID
            )
        }
        return try checkedQuantity(request, verified, product)
    }

    /// A restore of another user's purchase, when its proof will do: StoreKit's signed
    /// transaction (verified: our app, our environment, Apple's signature), not a transaction
    /// id, an identifier that logs, events and support requests carry, which proves nothing
    /// about who holds the purchase.
    private func restore(
        _ request: VerifyPurchaseRequest,
        _ verified: VerifiedTransaction,
        _ product: Product,
        buyer: UserID
    ) throws -> Prepared {
        guard request.transactionID == nil else {
            return .rejected(
                request,
                JobError(
                    code: RestoreCode.needsSignedTransaction.rawValue,
                    message: "transaction \(verified.transactionID) was bought by another account; restoring it "
                        + "needs StoreKit's signed transaction, not its id"
                ),
                transactionID: verified.transactionID
            )
        }
        let checked = try checkedQuantity(request, verified, product)
        guard case .verified = checked else { return checked }
        return .transfer(request, verified, product, buyer: buyer)
    }

    /// A verified transaction whose quantity the product allows, or its rejection: a signed
    /// quantity is outside input (a development or sandbox token can carry 2^62), and it
    /// multiplies the credits issued.
    private func checkedQuantity(
        _ request: VerifyPurchaseRequest,
        _ verified: VerifiedTransaction,
        _ product: Product
    ) throws -> Prepared {
        let quantity = verified.payload.quantity ?? 1
        guard (1...product.maxQuantity).contains(quantity) else {
            return .rejected(
                request,
                JobError(
                    code: .invalidQuantity,
                    message: "transaction \(verified.transactionID) buys \(quantity) units of \(product.productID); "
                        + "1…\(product.maxQuantity) are allowed"
                ),
                transactionID: verified.transactionID
            )
        }
        return .verified(request, verified, product)
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        switch prepared {
        case .rejected(let request, let error, let transactionID):
            return try Self.rejection(request, error, transactionID: transactionID)
        case .transfer(let request, let verified, _, let buyer):
            return try Self.transfer(request, verified, buyer: buyer, database: database)
        case .verified(let request, let verified, let product):
            let payload = verified.payload
            let facts = PurchaseFacts(
                transactionID: verified.transactionID,
                originalTransactionID: payload.originalTransactionId ?? verified.transactionID,
                productID: product.productID,
                productType: payload.type,
                purchaseDate: payload.purchaseDate ?? verified.signedDate,
                quantity: payload.quantity ?? 1,  // checked against the product in prepare
                environment: payload.environment ?? "",
                currency: payload.currency.flatMap { $0.wholeMatch(of: /[A-Z]{3}/) != nil ? $0 : nil } ?? "USD",
                priceMilli: payload.price,
                payloadJSON: String(decoding: verified.rawPayload, as: UTF8.self)
            )
            let grant: PurchaseGrant
            do {
                grant = try CreditLedger.recordPurchase(
                    facts,
                    product: product,
                    userID: request.userID,
                    jobID: request.jobID,
                    database: database
                )
            } catch let rejection as LedgerRejection {
                return try Self.rejection(
                    request,
                    JobError(code: rejection.code, message: rejection.message),
                    transactionID: verified.transactionID
                )
            }
            var fields: [String: JSONValue] = [
                "userId": .string(request.userID.description),
                "transactionId": .string(grant.transactionID),
                "productId": .string(grant.productID),
                "credits": .array(grant.credits.map { .string($0.description) }),
                "area": grant.area.map { .string($0.rawValue) } ?? .string("any"),
                "alreadyProcessed": .bool(grant.alreadyRecorded),
            ]
            if let restored = grant.restoredFrom { fields["restoredFrom"] = .string(restored) }
            return JobOutcome(
                status: .succeeded,
                result: .object(fields),
                messages: [
                    try .event(
                        JobEvent(
                            jobID: request.jobID,
                            userID: request.userID,
                            type: .billingCreditsIssued,
                            fields: fields
                        )
                    )
                ],
                measurements: BillingMeasurements.verified(grant)
            )
        }
    }

    /// Moves the purchase's unspent credits to the caller and answers like a grant
    /// (`billing.credits-issued`), with `transferred` set so the app can tell a restore from a
    /// purchase: `credits` are the credits moved (by the first delivery, on a repeat).
    private static func transfer(
        _ request: VerifyPurchaseRequest,
        _ verified: VerifiedTransaction,
        buyer: UserID,
        database: PostgresConnection
    ) throws -> JobOutcome {
        let moved: CreditTransfer
        do {
            moved = try CreditLedger.transfer(
                presentedTransactionID: verified.transactionID,
                originalTransactionID: verified.payload.originalTransactionId ?? verified.transactionID,
                buyer: buyer,
                to: request.userID,
                jobID: request.jobID,
                database: database
            )
        } catch let refusal as LedgerRejection {
            return try rejection(
                request,
                JobError(code: refusal.code, message: refusal.message),
                transactionID: verified.transactionID
            )
        }
        var fields: [String: JSONValue] = [
            "userId": .string(request.userID.description),
            "transactionId": .string(verified.transactionID),
            "productId": .string(moved.productID),
            "credits": .array(moved.credits.map { .string($0.description) }),
            "area": moved.area.map { .string($0.rawValue) } ?? .string("any"),
            "alreadyProcessed": .bool(moved.alreadyTransferred),
            "transferred": .bool(true),
            "transferId": .string(moved.transferID.lowercasedText),
        ]
        if moved.transactionID != verified.transactionID {
            fields["restoredFrom"] = .string(moved.transactionID)
        }
        return JobOutcome(
            status: .succeeded,
            result: .object(fields),
            messages: [
                try .event(
                    JobEvent(jobID: request.jobID, userID: request.userID, type: .billingCreditsIssued, fields: fields)
                )
            ]
        )
    }

    private static func rejection(
        _ request: VerifyPurchaseRequest,
        _ error: JobError,
        transactionID: String?
    ) throws -> JobOutcome {
        var fields: [String: JSONValue] = ["userId": .string(request.userID.description)]
        if let transactionID { fields["transactionId"] = .string(transactionID) }
        return JobOutcome(
            status: .failed(error),
            result: .object(fields),
            messages: [
                try .event(
                    JobEvent(
                        jobID: request.jobID,
                        userID: request.userID,
                        type: .billingPurchaseRejected,
                        fields: fields,
                        error: error
                    )
                )
            ],
            measurements: BillingMeasurements.rejected(code: error.code)
        )
    }
}

/// An App Store Server API failure carries its own classification: rate limits and outages are
/// retried under Apple's code, the rest is not.
extension AppStoreAPIError: RetryClassifiedError {
    public var failureCode: String { ErrorCode.appStore(code).rawValue }
}
