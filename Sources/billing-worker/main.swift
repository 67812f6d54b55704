import Billing
import Foundation
import StoreKitVerification
import WorkerRuntime

// The billing-worker: verifies App Store purchases and issues credits once
// (billing.verify-purchase), spends them atomically (report.request), gives them back when a
// report cannot be written (billing.refund-credit), and applies App Store Server Notifications
// (billing.store-notification). Configuration: the workers' environment variables plus the
// BILLING_* and APPSTORE_API_* ones (README); BILLING_ENVIRONMENT has no default on purpose.
let environment = ProcessInfo.processInfo.environment
let status = await WorkerMain.run(
    name: "billing-worker",
    defaultHTTPPort: 8083,
    queues: [.billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification, .userDelete],
    // The ledger audit as a gauge (astro_ledger_unbalanced_users), every LEDGER_AUDIT_INTERVAL_SECONDS.
    probes: [try LedgerAuditProbe.fromEnvironment(environment)]
) { context in
    let logger = context.logger
    let billing = try BillingConfiguration.fromEnvironment(environment)
    logger.info(
        "billing configured",
        metadata: [
            "environment": "\(billing.policy.environment.rawValue)",
            "bundle_id": "\(billing.policy.bundleID)",
            "trusted_roots": "\(billing.trustedRootsDescription)",
            "products": "\(billing.catalog.products.count)",
            "verify_by_id": "\(billing.appStore == nil ? "off (no APPSTORE_API_KEY_ID)" : "on")",
            "require_account_token": "\(billing.requireAccountToken)",
        ]
    )
    let verifier = SignedDataVerifier(policy: billing.policy)
    return [
        VerifyPurchaseHandler(
            verifier: verifier,
            catalog: billing.catalog,
            appStore: billing.appStore,
            requireAccountToken: billing.requireAccountToken
        ),
        ReportRequestHandler(),
        RefundCreditHandler(),
        StoreNotificationHandler(verifier: verifier),
        UserDeleteHandler(pool: context.pool),
    ]
}
exit(status)
