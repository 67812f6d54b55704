import Foundation

/// The body of `billing.verify-purchase`: a StoreKit 2 signed transaction, or only its id, in
/// which case the billing-worker fetches the signed transaction from the App Store Server API.
public struct VerifyPurchaseRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    /// The JWS the app received from StoreKit 2 (`Transaction.jwsRepresentation`).
    public var signedTransaction: String?
    /// The transaction's id, when the app sends only that.
    public var transactionID: String?
    /// The app restores purchases on a new install: a signed transaction bought by another of
    /// our users moves that purchase's unspent credits to this user (see `RestoreCode`).
    /// Absent means `false`: such a transaction is refused (`account-mismatch`).
    public var restore: Bool?

    public init(
        jobID: JobID,
        userID: UserID,
        signedTransaction: String? = nil,
        transactionID: String? = nil,
        restore: Bool? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.signedTransaction = signedTransaction
        self.transactionID = transactionID
        self.restore = restore
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case signedTransaction
        case transactionID = "transactionId"
        case restore
    }
}

/// The body of `report.request`: spend one credit on a report of `area` in `language` for a
/// profile.
public struct ReportRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var profileID: ProfileID
    public var area: ReportArea
    public var language: ReportLanguage
    /// Another profile of the same user: the report is then about the two of them (synastry).
    /// Only with area `relationships` (see `PartnerRule`); absent (and omitted from the JSON)
    /// for a report about one profile. With and without a partner are different reports.
    public var partnerProfileID: ProfileID?

    public init(
        jobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        area: ReportArea,
        language: ReportLanguage,
        partnerProfileID: ProfileID? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.area = area
        self.language = language
        self.partnerProfileID = partnerProfileID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case profileID = "profileId"
        case area, language
        case partnerProfileID = "partnerProfileId"
    }
}

/// The body of `report.generate`, published by the billing-worker once a credit is consumed.
public struct ReportGenerateRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var userID: UserID
    public var profileID: ProfileID
    public var area: ReportArea
    public var language: ReportLanguage
    /// The credit paid with, and its purchase (stored with the report).
    public var creditID: CreditID
    public var transactionID: String
    /// The `report.request` job that consumed the credit (refunds name it).
    public var requestJobID: JobID
    /// The request's partner profile, when the report is for two (omitted from the JSON otherwise).
    public var partnerProfileID: ProfileID?

    public init(
        jobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        area: ReportArea,
        language: ReportLanguage,
        creditID: CreditID,
        transactionID: String,
        requestJobID: JobID,
        partnerProfileID: ProfileID? = nil
    ) {
        self.jobID = jobID
        self.userID = userID
        self.profileID = profileID
        self.area = area
        self.language = language
        self.creditID = creditID
        self.transactionID = transactionID
        self.requestJobID = requestJobID
        self.partnerProfileID = partnerProfileID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case userID = "userId"
        case profileID = "profileId"
        case area, language
        case creditID = "creditId"
        case transactionID = "transactionId"
        case requestJobID = "requestJobId"
        case partnerProfileID = "partnerProfileId"
    }
}

/// The body of `billing.refund-credit`: give back the credit a `report.request` consumed,
/// because its report could not be written.
public struct RefundCreditRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var creditID: CreditID
    /// The consumption being compensated. A credit refunded and spent again by a later request
    /// is not refunded a second time by a late copy of this message.
    public var requestJobID: JobID
    /// What the credit was spent on: the billing-worker refunds only when the credit row says
    /// the same (a forged refund with a leaked credit id changes nothing).
    public var userID: UserID
    public var profileID: ProfileID
    public var area: ReportArea
    public var language: ReportLanguage
    /// Why (a reason code such as `llm-unavailable`), kept in the ledger.
    public var reason: String
    /// The partner profile the credit was spent on, for a report for two (omitted otherwise).
    public var partnerProfileID: ProfileID?

    public init(
        jobID: JobID,
        creditID: CreditID,
        requestJobID: JobID,
        userID: UserID,
        profileID: ProfileID,
        area: ReportArea,
        language: ReportLanguage,
        reason: String,
        partnerProfileID: ProfileID? = nil
    ) {
        self.jobID = jobID
        self.creditID = creditID
        self.requestJobID = requestJobID
        self.userID = userID
        self.profileID = profileID
        self.area = area
        self.language = language
        self.reason = reason
        self.partnerProfileID = partnerProfileID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case creditID = "creditId"
        case requestJobID = "requestJobId"
        case userID = "userId"
        case profileID = "profileId"
        case area, language, reason
        case partnerProfileID = "partnerProfileId"
    }
}

/// The body of `billing.store-notification`: an App Store Server Notification V2 as Apple
/// posts it (`{"signedPayload": "…"}`) plus the job id.
public struct StoreNotificationRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var signedPayload: String

    public init(jobID: JobID, signedPayload: String) {
        self.jobID = jobID
        self.signedPayload = signedPayload
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case signedPayload
    }
}

/// The body of `billing.send-consumption`: answer the CONSUMPTION_REQUEST `notificationUUID`
/// about `transactionID`. Published by `billing.store-notification` in the transaction that
/// recorded the request and its computed answer (`consumption_answers`); the job reads that row,
/// so the body names the request and carries nothing to trust.
public struct SendConsumptionRequest: Sendable, Hashable, Codable {
    public var jobID: JobID
    public var notificationUUID: UUID
    public var transactionID: String

    public init(jobID: JobID, notificationUUID: UUID, transactionID: String) {
        self.jobID = jobID
        self.notificationUUID = notificationUUID
        self.transactionID = transactionID
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case notificationUUID
        case transactionID = "transactionId"
    }
}

extension JobID {
    /// A job id derived from another job's id and a purpose, the same every time: a follow-up
    /// job published again by a replayed transaction keeps its idempotency key.
    public static func derived(from parent: JobID, purpose: String) -> JobID {
        // FNV-1a over the purpose and parent, spread into 16 bytes; shaped as a version-8
        // (custom) UUID. Uniqueness only needs to hold per parent, which it does.
        var bytes = [UInt8](repeating: 0, count: 16)
        let input = Array(purpose.utf8) + [0] + Array(parent.description.utf8)
        for lane in 0..<2 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 &+ UInt64(lane) &* 0x9e37_79b9_7f4a_7c15
            for byte in input {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01b3
            }
            for index in 0..<8 { bytes[lane * 8 + index] = UInt8(truncatingIfNeeded: hash >> (UInt64(index) * 8)) }
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x80
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            )
        )
        return JobID(uuid)
    }
}
