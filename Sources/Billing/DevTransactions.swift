import AstroDomain
import Foundation
import StoreKitVerification
import UUIDText

/// Values every billing component agrees on.
public enum BillingDefaults {
    /// The iOS app's bundle id: the only one whose purchases count.
    public static let bundleID = VerificationPolicyConfiguration.defaultBundleID
}

/// DEVELOPMENT ONLY: payloads shaped like StoreKit 2's, for tests, the demo and
/// `astroctl billing dev-sign`. Signed with a `DevPKI`, they verify only where that PKI's root is
/// trusted explicitly.
public enum DevTransactions {
    /// A fresh 16-digit transaction id in the range Apple's sandbox uses.
    public static func newTransactionID() -> String {
        "2000\(UInt64.random(in: 100_000_000_000...999_999_999_999))"
    }

    /// A JWSTransactionDecodedPayload-shaped object.
    public static func transaction(
        id: String,
        originalID: String,
        productID: String,
        userID: String?,
        quantity: Int,
        environment: String,
        bundleID: String,
        at date: Date,
        revoked: Bool,
        price: Int = 4990,
        currency: String = "USD"
    ) -> JSONValue {
        let millis = JSONValue.number((date.timeIntervalSince1970 * 1000).rounded(.down))
        var object: [String: JSONValue] = [
            "transactionId": .string(id),
            "originalTransactionId": .string(originalID),
            "bundleId": .string(bundleID),
            "productId": .string(productID),
            "purchaseDate": millis,
            "originalPurchaseDate": millis,
            "quantity": .number(Double(quantity)),
            "type": .string(productID.contains(".credit.") ? "Consumable" : "Non-Consumable"),
            "inAppOwnershipType": "PURCHASED",
            "signedDate": millis,
            "environment": .string(environment),
            "transactionReason": "PURCHASE",
            "storefront": "USA",
            "storefrontId": "143441",
            // Saturating at 2^53, the largest whole number JSON carries exactly: a development
            // token may carry any quantity a test asks for, and its price must still decode.
            "price": .number(min(Double(price) * Double(max(quantity, 1)), 9_007_199_254_740_992)),
            "currency": .string(currency),
        ]
        if let userID { object["appAccountToken"] = .string(userID.lowercased()) }
        if revoked {
            object["revocationDate"] = millis
            object["revocationReason"] = 0
            object["revocationType"] = "REFUND_FULL"
        }
        return .object(object)
    }

    /// A ResponseBodyV2DecodedPayload-shaped object around a signed transaction.
    public static func notification(
        type: String,
        subtype: String? = nil,
        uuid: UUID = UUID(),
        signedTransaction: String,
        environment: String,
        bundleID: String,
        appAppleID: Int64? = nil,
        at date: Date
    ) -> JSONValue {
        var data: [String: JSONValue] = [
            "bundleId": .string(bundleID),
            "bundleVersion": "1",
            "environment": .string(environment),
            "signedTransactionInfo": .string(signedTransaction),
        ]
        if let appAppleID { data["appAppleId"] = .number(Double(appAppleID)) }
        var object: [String: JSONValue] = [
            "notificationType": .string(type),
            "notificationUUID": .string(uuid.lowercasedText),
            "version": "2.0",
            "signedDate": .number((date.timeIntervalSince1970 * 1000).rounded(.down)),
            "data": .object(data),
        ]
        if let subtype { object["subtype"] = .string(subtype) }
        return .object(object)
    }
}
