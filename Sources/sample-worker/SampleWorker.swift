import Foundation
import Logging
import Postgres
import SampleJobs
import WorkerRuntime

/// A worker running the synthetic sample job on the real runtime: used by the integration tests
/// (graceful shutdown under SIGTERM) and for trying out retries and dead letters by hand.
/// SAMPLE_QUEUE names its queue (default sample.work), SAMPLE_ALLOW_CRASH=1 honours "crash": true;
/// other settings as for every worker.
///
/// Kept out of `main.swift` on purpose: closures written in top-level code are inferred to be
/// main-actor isolated, and one that the runtime calls on another thread traps (SIGILL).
enum SampleWorker {
    /// Runs the worker until it is stopped; returns the process exit status (WorkerMain.run).
    static func run(environment: [String: String]) async -> Int32 {
        let queue = environment["SAMPLE_QUEUE"] ?? "sample.work"
        // SAMPLE_ALLOW_CRASH=1 lets a job ask the worker to crash (tests of poison messages).
        let allowCrash = environment["SAMPLE_ALLOW_CRASH"] == "1"
        return await WorkerMain.run(
            name: "sample-worker",
            defaultHTTPPort: 8089,
            queues: [.init(rawValue: queue)],
            environment: environment,
            databaseSetup: { pool in
                try await pool.withConnection { try $0.executeScript(SampleJobHandler.createTableSQL) }
            },
            handlers: { _ in [SampleJobHandler(queue: queue, allowCrash: allowCrash)] }
        )
    }
}
