import Billing
import Foundation
import StoreKitVerification
import WorkerRuntime

/// The billing-worker's wiring: verifies App Store purchases and issues credits once
/// (billing.verify-purchase), spends them atomically (report.request), gives them back when a
/// report cannot be written (billing.refund-credit), applies App Store Server Notifications
/// (billing.store-notification), answers Apple's consumption requests (billing.send-consumption),
/// recovers missed notifications, and erases and exports users (user.delete, user.export-pack).
/// Configuration: the workers' environment variables plus the BILLING_* and APPSTORE_API_* ones
/// (README); BILLING_ENVIRONMENT has no default on purpose.
///
/// Kept out of `main.swift` on purpose: closures written in top-level code are inferred to be
/// main-actor isolated, and one that the runtime or a logger calls on another thread traps
/// (SIGILL). Here every closure is nonisolated.
enum BillingWorker {
    /// Runs the worker until it is stopped; returns the process exit status (2 for a
    /// configuration error, as WorkerMain.run).
    static func run(environment: [String: String]) async -> Int32 {
        let recoveryOnStart: DatabaseSetup?
        do {
            recoveryOnStart = try NotificationRecoveryStartUp.setup(environment)
        } catch {
            FileHandle.standardError.write(Data("billing-worker: \(error)\n".utf8))
            return 2
        }
        return await WorkerMain.run(
            name: "billing-worker",
            defaultHTTPPort: 8083,
            queues: [
                .billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification,
                .billingSendConsumption,
                .billingRecoverNotifications,
                .userDelete,
                .userExportPack,
            ],
            environment: environment,
            // After downtime, the notifications Apple sent meanwhile (Get Notification History).
            databaseSetup: recoveryOnStart,
            // The ledger audit as a gauge (astro_ledger_unbalanced_users), every
            // LEDGER_AUDIT_INTERVAL_SECONDS; the maintenance task's recorded deletions, drops and
            // runs (MaintenanceMetricsProbe).
            probes: try probes(environment: environment)
        ) { context in
            try handlers(context: context, environment: environment)
        }
    }

    /// The worker's own metrics probes.
    /// - Throws: `ConfigurationError` for a malformed LEDGER_AUDIT_INTERVAL_SECONDS.
    static func probes(environment: [String: String]) throws -> [MetricsProbe] {
        [try LedgerAuditProbe.fromEnvironment(environment), MaintenanceMetricsProbe.probe()]
    }

    /// The job handlers, built from the environment.
    /// - Throws: `ConfigurationError` naming the variable at fault.
    static func handlers(context: WorkerContext, environment: [String: String]) throws -> [any JobHandler] {
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
}
