import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Processes the tests started with Foundation's `Process` (`runTracked()`), killed when the test
/// process exits if they have not ended by then.
///
/// A test that fails (or times out) before its own clean-up would otherwise leave its workers
/// running: they keep consuming the test database's shared queues, and since they hold the test
/// process's standard error, `swift test` waits for them forever after the last test. New tests
/// start processes with `ChildProcess`, which ends with its test.
///
/// Only process ids and an "ended" flag are kept (set from the process's termination handler,
/// chained before the test's own): no `Process` object is touched from another thread or kept
/// alive longer than its test keeps it.
enum ProcessTracking {
    /// One started process: its id, and whether its termination handler ran.
    final class Entry: Sendable {
        let pid = Atomic<Int32>(0)
        let ended = Atomic<Bool>(false)
    }

    private static let entries = Mutex<[Entry]>([])
    private static let installed = Mutex(false)

    /// Starts `process` (`Process.run()`) and records it to be killed at exit if still running.
    /// - Throws: what `run()` throws.
    static func run(_ process: Process) throws {
        installOnce()
        let entry = Entry()
        let handler = process.terminationHandler
        process.terminationHandler = { ended in
            entry.ended.store(true, ordering: .sequentiallyConsistent)
            handler?(ended)
        }
        try process.run()
        entry.pid.store(process.processIdentifier, ordering: .sequentiallyConsistent)
        entries.withLock { list in
            list.removeAll { $0.ended.load(ordering: .sequentiallyConsistent) }
            list.append(entry)
        }
    }

    /// Kills (SIGKILL) every tracked process whose termination was not seen; what `atexit` calls.
    static func killRemaining() {
        let running = entries.withLock { list in
            list.filter { !$0.ended.load(ordering: .sequentiallyConsistent) }
        }
        for entry in running {
            let pid = entry.pid.load(ordering: .sequentiallyConsistent)
            if pid > 0 { kill(pid, SIGKILL) }
        }
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
