import Foundation
import WorkerRuntime

// The billing-worker: declares its queues' topology, serves /healthz, /readyz and /metrics, and
// consumes the queues its handlers serve. Configuration: environment variables (README).
let status = await WorkerMain.run(
    name: "billing-worker",
    defaultHTTPPort: 8083,
    queues: [.billingVerifyPurchase, .reportRequest, .billingRefundCredit, .billingStoreNotification]
) { _, _ in
    // Job handlers arrive with their issues (charts, billing, reports); until then the worker
    // declares its topology and serves health without consuming.
    []
}
exit(status)
