import Foundation
import WorkerRuntime

// The chart-worker: declares its queues' topology, serves /healthz, /readyz and /metrics, and
// consumes the queues its handlers serve. Configuration: environment variables (README).
let status = await WorkerMain.run(name: "chart-worker", defaultHTTPPort: 8081, queues: [.chartCalculate]) { _, _ in
    // Job handlers arrive with their issues (charts, billing, reports); until then the worker
    // declares its topology and serves health without consuming.
    []
}
exit(status)
