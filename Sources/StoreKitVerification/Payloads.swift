import Foundation

/// A signed transaction's payload: Apple's `JWSTransactionDecodedPayload`.
///
/// Dates are integer milliseconds since 1970 in JSON, whatever the coder's date strategy;
/// encoding writes them the same way and leaves out fields that are `nil`. Fields this type does
/// not name are kept only in ``VerifiedTransaction/rawPayload``.
public struct TransactionPayload: Sendable, Hashable, Codable {
    public var transactionId: String?
    public var originalTransactionId: String?
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Date?
    public var originalPurchaseDate: Date?
    public var expiresDate: Date?
    public var quantity: Int?
    /// `Consumable`, `Non-Consumable`, `Auto-Renewable Subscription`, `Non-Renewing Subscription`.
    public var type: String?
    public var appAccountToken: String?
    /// `PURCHASED` or `FAMILY_SHARED`.
    public var inAppOwnershipType: String?
    public var signedDate: Date?
    public var revocationReason: Int?
    public var revocationDate: Date?
    public var revocationType: String?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var offerDiscountType: String?
    public var offerPeriod: String?
    /// `Production`, `Sandbox`, `Xcode` or `LocalTesting`.
    public var environment: String?
    public var storefront: String?
    public var storefrontId: String?
    /// `PURCHASE` or `RENEWAL`.
    public var transactionReason: String?
    /// ISO 4217 currency code of `price`.
    public var currency: String?
    /// The price in milli-units of `currency` (4990 is 4.99).
    public var price: Int64?
    public var appTransactionId: String?

    public init(
        transactionId: String? = nil,
        originalTransactionId: String? = nil,
        webOrderLineItemId: String? = nil,
        bundleId: String? = nil,
        productId: String? = nil,
        subscriptionGroupIdentifier: String? = nil,
        purchaseDate: Date? = nil,
        originalPurchaseDate: Date? = nil,
        expiresDate: Date? = nil,
        quantity: Int? = nil,
        type: String? = nil,
        appAccountToken: String? = nil,
        inAppOwnershipType: String? = nil,
        signedDate: Date? = nil,
        revocationReason: Int? = nil,
        revocationDate: Date? = nil,
        revocationType: String? = nil,
        isUpgraded: Bool? = nil,
        offerType: Int? = nil,
        offerIdentifier: String? = nil,
        offerDiscountType: String? = nil,
        offerPeriod: String? = nil,
        environment: String? = nil,
        storefront: String? = nil,
        storefrontId: String? = nil,
        transactionReason: String? = nil,
        currency: String? = nil,
        price: Int64? = nil,
        appTransactionId: String? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.webOrderLineItemId = webOrderLineItemId
        self.bundleId = bundleId
        self.productId = productId
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.quantity = quantity
        self.type = type
        self.appAccountToken = appAccountToken
        self.inAppOwnershipType = inAppOwnershipType
        self.signedDate = signedDate
        self.revocationReason = revocationReason
        self.revocationDate = revocationDate
        self.revocationType = revocationType
        self.isUpgraded = isUpgraded
        self.offerType = offerType
        self.offerIdentifier = offerIdentifier
        self.offerDiscountType = offerDiscountType
        self.offerPeriod = offerPeriod
        self.environment = environment
        self.storefront = storefront
        self.storefrontId = storefrontId
        self.transactionReason = transactionReason
        self.currency = currency
        self.price = price
        self.appTransactionId = appTransactionId
    }

    private enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, webOrderLineItemId, bundleId, productId
        case subscriptionGroupIdentifier, purchaseDate, originalPurchaseDate, expiresDate, quantity, type
        case appAccountToken, inAppOwnershipType, signedDate, revocationReason, revocationDate, revocationType
        case isUpgraded, offerType, offerIdentifier, offerDiscountType, offerPeriod, environment, storefront
        case storefrontId, transactionReason, currency, price, appTransactionId
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        transactionId = try container.decodeIfPresent(String.self, forKey: .transactionId)
        originalTransactionId = try container.decodeIfPresent(String.self, forKey: .originalTransactionId)
        webOrderLineItemId = try container.decodeIfPresent(String.self, forKey: .webOrderLineItemId)
        bundleId = try container.decodeIfPresent(String.self, forKey: .bundleId)
        productId = try container.decodeIfPresent(String.self, forKey: .productId)
        subscriptionGroupIdentifier = try container.decodeIfPresent(String.self, forKey: .subscriptionGroupIdentifier)
        purchaseDate = try container.decodeMillisecondsIfPresent(forKey: .purchaseDate)
        originalPurchaseDate = try container.decodeMillisecondsIfPresent(forKey: .originalPurchaseDate)
        expiresDate = try container.decodeMillisecondsIfPresent(forKey: .expiresDate)
        quantity = try container.decodeIfPresent(Int.self, forKey: .quantity)
        type = try container.decodeIfPresent(String.self, forKey: .type)
        appAccountToken = try container.decodeIfPresent(String.self, forKey: .appAccountToken)
        inAppOwnershipType = try container.decodeIfPresent(String.self, forKey: .inAppOwnershipType)
        signedDate = try container.decodeMillisecondsIfPresent(forKey: .signedDate)
        revocationReason = try container.decodeIfPresent(Int.self, forKey: .revocationReason)
        revocationDate = try container.decodeMillisecondsIfPresent(forKey: .revocationDate)
        revocationType = try container.decodeIfPresent(String.self, forKey: .revocationType)
        isUpgraded = try container.decodeIfPresent(Bool.self, forKey: .isUpgraded)
        offerType = try container.decodeIfPresent(Int.self, forKey: .offerType)
        offerIdentifier = try container.decodeIfPresent(String.self, forKey: .offerIdentifier)
        offerDiscountType = try container.decodeIfPresent(String.self, forKey: .offerDiscountType)
        offerPeriod = try container.decodeIfPresent(String.self, forKey: .offerPeriod)
        environment = try container.decodeIfPresent(String.self, forKey: .environment)
        storefront = try container.decodeIfPresent(String.self, forKey: .storefront)
        storefrontId = try container.decodeIfPresent(String.self, forKey: .storefrontId)
        transactionReason = try container.decodeIfPresent(String.self, forKey: .transactionReason)
        currency = try container.decodeIfPresent(String.self, forKey: .currency)
        price = try container.decodeIfPresent(Int64.self, forKey: .price)
        appTransactionId = try container.decodeIfPresent(String.self, forKey: .appTransactionId)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(transactionId, forKey: .transactionId)
        try container.encodeIfPresent(originalTransactionId, forKey: .originalTransactionId)
        try container.encodeIfPresent(webOrderLineItemId, forKey: .webOrderLineItemId)
        try container.encodeIfPresent(bundleId, forKey: .bundleId)
        try container.encodeIfPresent(productId, forKey: .productId)
        try container.encodeIfPresent(subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try container.encodeMillisecondsIfPresent(purchaseDate, forKey: .purchaseDate)
        try container.encodeMillisecondsIfPresent(originalPurchaseDate, forKey: .originalPurchaseDate)
        try container.encodeMillisecondsIfPresent(expiresDate, forKey: .expiresDate)
        try container.encodeIfPresent(quantity, forKey: .quantity)
        try container.encodeIfPresent(type, forKey: .type)
        try container.encodeIfPresent(appAccountToken, forKey: .appAccountToken)
        try container.encodeIfPresent(inAppOwnershipType, forKey: .inAppOwnershipType)
        try container.encodeMillisecondsIfPresent(signedDate, forKey: .signedDate)
        try container.encodeIfPresent(revocationReason, forKey: .revocationReason)
        try container.encodeMillisecondsIfPresent(revocationDate, forKey: .revocationDate)
        try container.encodeIfPresent(revocationType, forKey: .revocationType)
        try container.encodeIfPresent(isUpgraded, forKey: .isUpgraded)
        try container.encodeIfPresent(offerType, forKey: .offerType)
        try container.encodeIfPresent(offerIdentifier, forKey: .offerIdentifier)
        try container.encodeIfPresent(offerDiscountType, forKey: .offerDiscountType)
        try container.encodeIfPresent(offerPeriod, forKey: .offerPeriod)
        try container.encodeIfPresent(environment, forKey: .environment)
        try container.encodeIfPresent(storefront, forKey: .storefront)
        try container.encodeIfPresent(storefrontId, forKey: .storefrontId)
        try container.encodeIfPresent(transactionReason, forKey: .transactionReason)
        try container.encodeIfPresent(currency, forKey: .currency)
        try container.encodeIfPresent(price, forKey: .price)
        try container.encodeIfPresent(appTransactionId, forKey: .appTransactionId)
    }
}

/// A signed transaction that verified.
public struct VerifiedTransaction: Sendable, Hashable {
    /// The decoded payload.
    public var payload: TransactionPayload
    /// The payload's `transactionId`; never empty.
    public var transactionID: String
    /// The payload's `signedDate`, or the time of verification when the payload has none (the
    /// chain was then checked at that time, as Apple's library does).
    public var signedDate: Date
    /// The payload's JSON exactly as signed.
    public var rawPayload: Data

    public init(payload: TransactionPayload, transactionID: String, signedDate: Date, rawPayload: Data) {
        self.payload = payload
        self.transactionID = transactionID
        self.signedDate = signedDate
        self.rawPayload = rawPayload
    }
}

/// An App Store Server Notification V2's payload: Apple's `ResponseBodyV2DecodedPayload`.
public struct NotificationPayload: Sendable, Hashable, Codable {
    /// `REFUND`, `CONSUMPTION_REQUEST`, `DID_RENEW`, `TEST`, …
    public var notificationType: String?
    public var subtype: String?
    public var notificationUUID: String?
    public var version: String?
    public var signedDate: Date?
    /// App and transaction data; present for most notification types.
    public var data: NotificationData?
    /// Present for `RENEWAL_EXTENSION` summaries instead of `data`.
    public var summary: NotificationSummary?
    /// Present for `EXTERNAL_PURCHASE_TOKEN` instead of `data`.
    public var externalPurchaseToken: ExternalPurchaseToken?

    public init(
        notificationType: String? = nil,
        subtype: String? = nil,
        notificationUUID: String? = nil,
        version: String? = nil,
        signedDate: Date? = nil,
        data: NotificationData? = nil,
        summary: NotificationSummary? = nil,
        externalPurchaseToken: ExternalPurchaseToken? = nil
    ) {
        self.notificationType = notificationType
        self.subtype = subtype
        self.notificationUUID = notificationUUID
        self.version = version
        self.signedDate = signedDate
        self.data = data
        self.summary = summary
        self.externalPurchaseToken = externalPurchaseToken
    }

    private enum CodingKeys: String, CodingKey {
        case notificationType, subtype, notificationUUID, version, signedDate, data, summary, externalPurchaseToken
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationType = try container.decodeIfPresent(String.self, forKey: .notificationType)
        subtype = try container.decodeIfPresent(String.self, forKey: .subtype)
        notificationUUID = try container.decodeIfPresent(String.self, forKey: .notificationUUID)
        version = try container.decodeIfPresent(String.self, forKey: .version)
        signedDate = try container.decodeMillisecondsIfPresent(forKey: .signedDate)
        data = try container.decodeIfPresent(NotificationData.self, forKey: .data)
        summary = try container.decodeIfPresent(NotificationSummary.self, forKey: .summary)
        externalPurchaseToken = try container.decodeIfPresent(
            ExternalPurchaseToken.self,
            forKey: .externalPurchaseToken
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(notificationType, forKey: .notificationType)
        try container.encodeIfPresent(subtype, forKey: .subtype)
        try container.encodeIfPresent(notificationUUID, forKey: .notificationUUID)
        try container.encodeIfPresent(version, forKey: .version)
        try container.encodeMillisecondsIfPresent(signedDate, forKey: .signedDate)
        try container.encodeIfPresent(data, forKey: .data)
        try container.encodeIfPresent(summary, forKey: .summary)
        try container.encodeIfPresent(externalPurchaseToken, forKey: .externalPurchaseToken)
    }
}

/// A notification's `data`.
///
/// - Important: `signedTransactionInfo` is verified (``VerifiedNotification/transaction``);
///   `signedRenewalInfo` is not: do not trust it without verifying it yourself.
public struct NotificationData: Sendable, Hashable, Codable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var bundleVersion: String?
    public var environment: String?
    public var signedTransactionInfo: String?
    public var signedRenewalInfo: String?
    public var status: Int?
    public var consumptionRequestReason: String?

    public init(
        appAppleId: Int64? = nil,
        bundleId: String? = nil,
        bundleVersion: String? = nil,
        environment: String? = nil,
        signedTransactionInfo: String? = nil,
        signedRenewalInfo: String? = nil,
        status: Int? = nil,
        consumptionRequestReason: String? = nil
    ) {
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.signedTransactionInfo = signedTransactionInfo
        self.signedRenewalInfo = signedRenewalInfo
        self.status = status
        self.consumptionRequestReason = consumptionRequestReason
    }
}

/// A notification's `summary` (subscription renewal date extension for many customers).
public struct NotificationSummary: Sendable, Hashable, Codable {
    public var requestIdentifier: String?
    public var environment: String?
    public var appAppleId: Int64?
    public var bundleId: String?
    public var productId: String?
    public var storefrontCountryCodes: [String]?
    public var failedCount: Int64?
    public var succeededCount: Int64?

    public init(
        requestIdentifier: String? = nil,
        environment: String? = nil,
        appAppleId: Int64? = nil,
        bundleId: String? = nil,
        productId: String? = nil,
        storefrontCountryCodes: [String]? = nil,
        failedCount: Int64? = nil,
        succeededCount: Int64? = nil
    ) {
        self.requestIdentifier = requestIdentifier
        self.environment = environment
        self.appAppleId = appAppleId
        self.bundleId = bundleId
        self.productId = productId
        self.storefrontCountryCodes = storefrontCountryCodes
        self.failedCount = failedCount
        self.succeededCount = succeededCount
    }
}

/// A notification's `externalPurchaseToken`. Its environment is not a field: Apple's library
/// reads Sandbox from an `externalPurchaseId` starting with `SANDBOX`, Production otherwise.
public struct ExternalPurchaseToken: Sendable, Hashable, Codable {
    public var externalPurchaseId: String?
    public var tokenCreationDate: Date?
    public var appAppleId: Int64?
    public var bundleId: String?

    public init(
        externalPurchaseId: String? = nil,
        tokenCreationDate: Date? = nil,
        appAppleId: Int64? = nil,
        bundleId: String? = nil
    ) {
        self.externalPurchaseId = externalPurchaseId
        self.tokenCreationDate = tokenCreationDate
        self.appAppleId = appAppleId
        self.bundleId = bundleId
    }

    /// The environment Apple's library derives from `externalPurchaseId`.
    public var environment: StoreEnvironment {
        externalPurchaseId?.hasPrefix("SANDBOX") == true ? .sandbox : .production
    }

    private enum CodingKeys: String, CodingKey {
        case externalPurchaseId, tokenCreationDate, appAppleId, bundleId
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        externalPurchaseId = try container.decodeIfPresent(String.self, forKey: .externalPurchaseId)
        tokenCreationDate = try container.decodeMillisecondsIfPresent(forKey: .tokenCreationDate)
        appAppleId = try container.decodeIfPresent(Int64.self, forKey: .appAppleId)
        bundleId = try container.decodeIfPresent(String.self, forKey: .bundleId)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(externalPurchaseId, forKey: .externalPurchaseId)
        try container.encodeMillisecondsIfPresent(tokenCreationDate, forKey: .tokenCreationDate)
        try container.encodeIfPresent(appAppleId, forKey: .appAppleId)
        try container.encodeIfPresent(bundleId, forKey: .bundleId)
    }
}

/// A notification that verified, with the transaction inside it.
public struct VerifiedNotification: Sendable, Hashable {
    /// The decoded payload.
    public var payload: NotificationPayload
    /// `data.signedTransactionInfo`, verified like any transaction; `nil` when the notification
    /// carries none.
    public var transaction: VerifiedTransaction?
    /// The payload's JSON exactly as signed.
    public var rawPayload: Data

    public init(payload: NotificationPayload, transaction: VerifiedTransaction?, rawPayload: Data) {
        self.payload = payload
        self.transaction = transaction
        self.rawPayload = rawPayload
    }
}

extension KeyedDecodingContainer {
    /// A date written as milliseconds since 1970 (an integer, or a number with a fraction),
    /// from 1970 to the end of 9999: a signed payload is outside input, and a date of 1e300
    /// must be refused here, not trap where it is stored.
    func decodeMillisecondsIfPresent(forKey key: Key) throws -> Date? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        let millis: Double
        if let whole = try? decode(Int64.self, forKey: key) {
            millis = Double(whole)
        } else {
            millis = try decode(Double.self, forKey: key)
        }
        guard millis.isFinite, (0...253_402_300_799_999).contains(millis) else {
            throw DecodingError.dataCorruptedError(
                forKey: key,
                in: self,
                debugDescription: "\(key.stringValue) is not a date from 1970 to 9999 in milliseconds"
            )
        }
        return Date(timeIntervalSince1970: millis / 1000)
    }
}

extension KeyedEncodingContainer {
    /// Writes a date as integer milliseconds since 1970; nothing for `nil`.
    mutating func encodeMillisecondsIfPresent(_ date: Date?, forKey key: Key) throws {
        guard let date else { return }
        guard let millis = Int64(exactly: (date.timeIntervalSince1970 * 1000).rounded()) else {
            throw EncodingError.invalidValue(
                date,
                EncodingError.Context(codingPath: codingPath + [key], debugDescription: "date out of range")
            )
        }
        try encode(millis, forKey: key)
    }
}
