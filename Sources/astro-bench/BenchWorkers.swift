import AstroCLISupport
import Foundation

#if canImport(Glibc)
import Glibc
#endif

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
        try start(binaries) { _ in environment }
    }

    /// Starts one process per path as `start` does, each with its health endpoint on a port of its
    /// own, so that its /metrics can be read at the end of a measurement.
    static func startWithHealthPorts(_ binaries: [String], environment: [String: String]) throws -> [BenchWorker] {
        var ports: [Int] = []
        let processes = try start(binaries) { _ in
            // Found right before its worker starts, so that no other process takes it meanwhile.
            let port = try freePort()
            ports.append(port)
            var own = environment
            own["HTTP_PORT"] = String(port)
            return own
        }
        return zip(processes, ports).map { BenchWorker(process: $0, healthPort: $1) }
    }

    private static func start(
        _ binaries: [String],
        environment: (Int) throws -> [String: String]
    ) throws -> [Process] {
        var processes: [Process] = []
        do {
            for (index, binary) in binaries.enumerated() {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: binary)
                process.environment = try environment(index)
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

    /// Terminates the processes still running and waits until every one has exited.
    static func stop(_ processes: [Process]) {
        for process in processes where process.isRunning { process.terminate() }
        for process in processes { process.waitUntilExit() }
    }

    /// Jobs per database commit over the workers' lifetime, from their /metrics (0 when none
    /// answered): how well the runtime batched its commits under the load.
    static func jobsPerCommit(_ workers: [BenchWorker]) async -> Double {
        var batches = 0.0
        var batchedJobs = 0.0
        for worker in workers {
            guard let text = try? await runProcess("curl", ["-fsS", "http://127.0.0.1:\(worker.healthPort)/metrics"])
            else { continue }
            batches += metric("astro_commit_batches_total", in: text)
            batchedJobs += metric("astro_commit_batch_jobs_total", in: text)
        }
        return batches > 0 ? batchedJobs / batches : 0
    }

    /// A port nobody listens on right now (bound once to port 0, then released).
    static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CommandFailure("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(descriptor, pointer, length) == 0 else { return -1 }
                return getsockname(descriptor, pointer, &length)
            }
        }
        guard bound == 0 else { throw CommandFailure("could not find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The value of an unlabelled metric in Prometheus text.
    static func metric(_ name: String, in text: String) -> Double {
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }
}

/// A worker process a measurement started, and the port of its health and metrics endpoint.
struct BenchWorker {
    var process: Process
    var healthPort: Int
}
