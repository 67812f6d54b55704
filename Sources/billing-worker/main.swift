import Billing
import Foundation
import StoreKitVerification
import WorkerRuntime

// The billing-worker: verifies App Store purchases and issues credits once
// (billing.verify-purchase), spends them atomically (report.request), gives them back when a
// report cannot be written (billing.refund-credit), and applies App Store Server Notifications
// (billing.store-notification), and answers Apple's consumption requests
// (billing.send-consumption). Configuration: the workers' environment variables plus the
// BILLING_* and APPSTORE_API_* ones (README); BILLING_ENVIRONMENT has no default on purpose.
let environment = ProcessInfo.processInfo.environment
let recoveryOnStart: DatabaseSetup?
do {
    recoveryOnStart = try NotificationRecoveryStartUp.setup(environment)
} catch {
    FileHandle.standardError.write(Data("billing-worker: \(error)\n".utf8))
    exit(2)
}
let status = await WorkerMain.run(
    name: "billing-worker",
    defaultHTTPPort: 8083,
    queues: [
        .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
        .billingSendConsumption,
        .billingRecoverNotifications,
        .userDelete,
        .userExportPack,
    ],
    // After downtime, the notifications Apple sent meanwhile (Get Notification History).
    databaseSetup: recoveryOnStart,
    // The ledger audit as a gauge (astro_ledger_unbalanced_users), every LEDGER_AUDIT_INTERVAL_SECONDS.
    // The maintenance task's recorded deletions, drops and runs (MaintenanceMetricsProbe).
    probes: [try LedgerAuditProbe.fromEnvironment(environment), MaintenanceMetricsProbe.probe()]
) { context in
    let logger = context.logger
    let billing = try BillingConfiguration.fromEnvironment(environment)
    let consumption = try ConsumptionPolicy.fromEnvironment(environment)
    logger.info(
        "billing configured",
        metadata: [
            "environment": "\(billing.policy.environment.rawValue)",
            "bundle_id": "\(billing.policy.bundleID)",
            "trusted_roots": "\(billing.trustedRootsDescription)",
            "products": "\(billing.catalog.products.count)",
            "verify_by_id": "\(billing.appStore == nil ? "off (no APPSTORE_API_KEY_ID)" : "on")",
            "require_account_token": "\(billing.requireAccountToken)",
            "consumption_refund_preference": "\(consumption.refundRule.rawValue)",
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
        try RefundCreditHandler.fromEnvironment(environment),
        StoreNotificationHandler(verifier: verifier, consumptionPolicy: consumption),
        SendConsumptionHandler(pool: context.pool, appStore: billing.appStore),
        RecoverNotificationsHandler(verifier: verifier, appStore: billing.appStore, consumptionPolicy: consumption),
        UserDeleteHandler(pool: context.pool),
        try UserExportPackHandler.fromEnvironment(environment, pool: context.pool),
    ]
}
exit(status)
