/// Why a restore on a new device (`billing.verify-purchase` with `restore: true`) moved no
/// credits: the `error.code` of the job and of its `billing.purchase-rejected` event. The
/// checks every purchase gets (a forged or foreign token fails verification, a refunded one is
/// `transaction-revoked`) come first and keep their own codes. The codes are the catalogue's
/// (`ErrorCode.restoreNeedsSignedTransaction`, …); this names them for the restore.
public enum RestoreCode {
    /// The restore names only a transaction id: an id is an identifier (logs, events and support
    /// requests carry it), no proof of who holds the purchase, so moving credits needs StoreKit's
    /// signed transaction.
    public static let needsSignedTransaction = ErrorCode.restoreNeedsSignedTransaction
    /// The purchase was never redeemed here by the user its appAccountToken names (for a
    /// consumable that Apple no longer lists, the app has no transaction to send at all).
    public static let purchaseUnknown = ErrorCode.restorePurchaseUnknown
    /// Every credit of the purchase is spent or revoked: nothing is left to move.
    public static let nothingToTransfer = ErrorCode.restoreNothingToTransfer

    /// The three, in this order.
    public static let allCases: [ErrorCode] = [needsSignedTransaction, purchaseUnknown, nothingToTransfer]
}
