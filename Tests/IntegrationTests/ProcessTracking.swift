import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Processes the tests started with Foundation's `Process` (`runTracked()`), ended when the test
/// process exits.
///
/// A test that fails (or times out) before its own clean-up would otherwise leave its workers
/// running: they keep consuming the test database's shared queues, and since they hold the test
/// process's standard error, `swift test` waits for them forever after the last test. New tests
/// start processes with `ChildProcess`, which ends with its test.
enum ProcessTracking {
    private struct Tracked: @unchecked Sendable {
        // Read only under the lock and at exit, after the tests.
        let process: Process
    }

    private static let tracked = Mutex<[Tracked]>([])
    private static let installed = Mutex(false)

    /// Starts `process` (`Process.run()`) and records it to be killed at exit if still running.
    /// - Throws: what `run()` throws.
    static func run(_ process: Process) throws {
        installOnce()
        try process.runTracked()
        tracked.withLock { list in
            list.removeAll { !$0.process.isRunning }
            list.append(Tracked(process: process))
        }
    }

    /// Kills (SIGKILL) every tracked process still running; what `atexit` calls.
    static func killRemaining() {
        let running = tracked.withLock { list in list.filter { $0.process.isRunning } }
        for entry in running { kill(entry.process.processIdentifier, SIGKILL) }
    }

    private static func installOnce() {
        let first = installed.withLock { done in
            defer { done = true }
            return !done
        }
        if first { atexit { ProcessTracking.killRemaining() } }
    }
}

extension Process {
    /// `run()`, and the process is killed when the test process exits if it is still running
    /// (`ProcessTracking`).
    /// - Throws: what `run()` throws.
    func runTracked() throws { try ProcessTracking.run(self) }
}
