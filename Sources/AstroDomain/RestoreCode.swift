/// Why a restore on a new device (`billing.verify-purchase` with `restore: true`) moved no
/// credits: the `error.code` of the job and of its `billing.purchase-rejected` event. The
/// checks every purchase gets (a forged or foreign token fails verification, a refunded one is
/// `transaction-revoked`) come first and keep their own codes.
public enum RestoreCode: String, Sendable, CaseIterable, Codable {
    /// The restore names only a transaction id: an id is an identifier (logs, events and support
    /// requests carry it), no proof of who holds the purchase, so moving credits needs StoreKit's
    /// signed transaction.
    case needsSignedTransaction = "restore-needs-signed-transaction"
    /// The purchase was never redeemed here by the user its appAccountToken names (for a
    /// consumable that Apple no longer lists, the app has no transaction to send at all).
    case purchaseUnknown = "restore-purchase-unknown"
    /// Every credit of the purchase is spent or revoked: nothing is left to move.
    case nothingToTransfer = "restore-nothing-to-transfer"
}
