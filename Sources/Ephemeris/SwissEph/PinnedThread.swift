import Dispatch
import Foundation
import Synchronization

/// A dedicated thread (never one of the Swift concurrency pool's) that runs submitted jobs one at a time,
/// in order. Each holds its own libswe thread state.
///
/// Sendable without `@unchecked`: its state is in a `Mutex`, the semaphores are thread-safe, and the thread
/// body only touches those.
final class PinnedThread: Sendable {
    typealias Job = @Sendable () -> Void

    private struct State {
        var jobs: [Job] = []
        var head = 0
        /// Jobs queued or running, for choosing the least busy thread.
        var load = 0
        var stopping = false
    }

    let name: String
    private let state = Mutex(State())
    /// Signalled once per submitted job and once by `stop()`.
    private let wakeUp = DispatchSemaphore(value: 0)

    /// Starts the thread.
    init(name: String) {
        self.name = name
        let thread = Thread { [self] in
            self.run()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// How many jobs are queued or running.
    var load: Int {
        state.withLock { $0.load }
    }

    /// Queues `job`.
    /// - Returns: `false` (and drops the job) when the thread is stopping.
    func submit(_ job: @escaping Job) -> Bool {
        let accepted = state.withLock { state in
            guard !state.stopping else { return false }
            state.jobs.append(job)
            state.load += 1
            return true
        }
        if accepted { wakeUp.signal() }
        return accepted
    }

    /// Runs `body` on the thread and blocks the caller until it returned.
    ///
    /// - Important: Blocks the calling thread; not for the concurrency pool's hot paths.
    func runAndWait<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let accepted = submit {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard accepted else { return nil }
        done.wait()
        return result.withLock { $0 }
    }

    /// Makes the thread finish the jobs already queued, close its libswe files and exit. Idempotent; does
    /// not wait.
    func stop() {
        let first = state.withLock { state in
            defer { state.stopping = true }
            return !state.stopping
        }
        if first { wakeUp.signal() }
    }

    private func run() {
        while true {
            wakeUp.wait()
            let job: Job? = state.withLock { state in
                guard state.head < state.jobs.count else { return nil }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head == state.jobs.count {
                    state.jobs.removeAll(keepingCapacity: true)
                    state.head = 0
                }
                return job
            }
            if let job {
                job()
                state.withLock { $0.load -= 1 }
                continue
            }
            // Every job was taken before `stopping` was seen with an empty queue: none is left behind.
            if state.withLock({ $0.stopping && $0.head == $0.jobs.count }) { break }
        }
        SwissEphThreadState.current.close()
    }
}
