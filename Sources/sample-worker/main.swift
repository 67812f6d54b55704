import Foundation
import Logging
import Postgres
import SampleJobs
import WorkerRuntime

// A worker running the synthetic sample job on the real runtime: used by the integration tests
// (graceful shutdown under SIGTERM) and for trying out retries and dead letters by hand.
// SAMPLE_QUEUE names its queue (default sample.work), SAMPLE_ALLOW_CRASH=1 honours "crash": true;
// other settings as for every worker.
let queue = ProcessInfo.processInfo.environment["SAMPLE_QUEUE"] ?? "sample.work"
let status = await WorkerMain.run(
    name: "sample-worker",
    defaultHTTPPort: 8089,
    queues: [.init(rawValue: queue)],
    databaseSetup: { pool in
        try await pool.withConnection { try $0.executeScript(SampleJobHandler.createTableSQL) }
    },
    handlers: { _ in
        // SAMPLE_ALLOW_CRASH=1 lets a job ask the worker to crash (tests of poison messages).
        let allowCrash = ProcessInfo.processInfo.environment["SAMPLE_ALLOW_CRASH"] == "1"
        return [SampleJobHandler(queue: queue, allowCrash: allowCrash)]
    }
)
exit(status)
