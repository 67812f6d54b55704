import Foundation
import WorkerRuntime

// The report-worker: declares its queues' topology, serves /healthz, /readyz and /metrics, and
// consumes the queues its handlers serve. Configuration: environment variables (README).
let status = await WorkerMain.run(name: "report-worker", defaultHTTPPort: 8082, queues: [.reportGenerate]) { _, _ in
    // Job handlers arrive with their issues (charts, billing, reports); until then the worker
    // declares its topology and serves health without consuming.
    []
}
exit(status)
