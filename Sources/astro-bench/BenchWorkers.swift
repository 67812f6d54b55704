import AstroCLISupport
import Foundation

/// Worker processes the end-to-end benchmarks start beside astro-bench.
enum BenchWorkers {
    /// The environment of benchmark workers: this process's, pointed at the same broker and
    /// database, quiet, not migrating (the benchmark did), with `prefetch` jobs in flight.
    static func environment(connection: ConnectionOptions, prefetch: Int) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["AMQP_URL"] = connection.resolvedAMQPURL
        environment["DATABASE_URL"] = connection.resolvedDatabaseURL
        environment["HTTP_HOST"] = "127.0.0.1"
        environment["HTTP_PORT"] = "0"
        environment["LOG_LEVEL"] = "warning"
        environment["MIGRATE_ON_START"] = "false"
        environment["PREFETCH"] = String(prefetch)
        return environment
    }

    /// Starts one process per path, output discarded, errors to this process's standard error.
    /// - Throws: when a binary cannot be started; those already started are terminated first.
    static func start(_ binaries: [String], environment: [String: String]) throws -> [Process] {
        var processes: [Process] = []
        do {
            for binary in binaries {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: binary)
                process.environment = environment
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.standardError
                try process.run()
                processes.append(process)
            }
        } catch {
            for process in processes { process.terminate() }
            throw error
        }
        return processes
    }
}
