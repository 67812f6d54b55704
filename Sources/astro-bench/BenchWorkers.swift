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
