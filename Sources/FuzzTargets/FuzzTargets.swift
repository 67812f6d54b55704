import Foundation

/// One fuzz target: a function that takes any bytes, exercises one parser or decoder with them and
/// traps (`fatalError`, `precondition`) only when it finds a bug: a crash or hang of the product
/// code, or a broken invariant the target checks.
///
/// The same function runs under libFuzzer (`astro-fuzz`, built by scripts/fuzz.sh), replays files in
/// an ordinary build (`astro-fuzz FILE…`) and replays the committed corpus in the unit tests.
public struct FuzzTarget: Sendable {
    /// The name `ASTRO_FUZZ_TARGET` selects and the corpus folder is called (`Fuzz/corpus/<name>`).
    public let name: String
    /// One line: what the target exercises.
    public let summary: String
    private let setUp: @Sendable () -> Void
    private let body: Body

    private enum Body: Sendable {
        case sync(@Sendable (Data) -> Void)
        case async(@Sendable (Data) async -> Void)
    }

    init(
        name: String,
        summary: String,
        setUp: @escaping @Sendable () -> Void = {},
        run: @escaping @Sendable (Data) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.setUp = setUp
        self.body = .sync(run)
    }

    init(
        name: String,
        summary: String,
        setUp: @escaping @Sendable () -> Void = {},
        runAsync: @escaping @Sendable (Data) async -> Void
    ) {
        self.name = name
        self.summary = summary
        self.setUp = setUp
        self.body = .async(runAsync)
    }

    /// Does the expensive one-time work (a development PKI for `jws`) now rather than in the first run.
    public func prepare() {
        setUp()
    }

    /// Runs one input to completion.
    ///
    /// - Important: For async targets this blocks the calling thread until the work is done, so call it
    ///   from a thread of your own (libFuzzer's, `main`'s), never from a Swift concurrency task: use
    ///   ``runAsync(_:)`` there.
    public func run(_ data: Data) {
        switch body {
        case .sync(let run):
            run(data)
        case .async(let run):
            Blocking.wait { await run(data) }
        }
    }

    /// Runs one input to completion, from async code.
    public func runAsync(_ data: Data) async {
        switch body {
        case .sync(let run):
            run(data)
        case .async(let run):
            await run(data)
        }
    }
}

/// Every fuzz target, by name.
public enum FuzzTargets {
    /// All targets, in the order scripts/fuzz.sh runs them.
    public static let all: [FuzzTarget] = [
        JSONTarget.target, AMQPTableTarget.target, JWSTarget.target, URLTarget.target, HTTPTarget.target,
        CBORTarget.target,
    ]

    /// The target called `name`, if there is one.
    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }

    /// The names of all targets, comma-separated (for usage messages).
    public static var names: String {
        all.map(\.name).joined(separator: ", ")
    }
}

/// Runs async work to completion on the calling thread, which must not belong to the Swift concurrency
/// pool (it blocks while the work waits for something).
///
/// The task prefers an executor that runs its jobs right here, so everything the work does, including
/// the task's teardown, is over when `wait` returns: a task on the global pool would still be freeing
/// its captures (the input) after signalling, which LeakSanitizer, checking right after each input,
/// reports as a leak now and then.
enum Blocking {
    static func wait(_ work: @escaping @Sendable () async -> Void) {
        let executor = CallingThreadExecutor()
        let task = Task(executorPreference: executor) {
            await work()
            executor.finish()
        }
        // Holding the handle until the end frees the task here too, not on whichever thread drops it last.
        withExtendedLifetime(task) { executor.runUntilFinished() }
    }
}

/// A task executor whose jobs run on the thread that calls `runUntilFinished`.
private final class CallingThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var finished = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Called by the work's last job, which runs on this thread: the loop ends after it.
    func finish() {
        condition.lock()
        finished = true
        condition.unlock()
    }

    func runUntilFinished() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished {
                condition.wait()
            }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Reports a broken invariant the way libFuzzer notices: by trapping, with what was found.
func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    if !condition() {
        fatalError("fuzz invariant broken: \(message())")
    }
}

/// A printable, bounded rendering of input bytes for invariant messages.
func quoted(_ text: String, limit: Int = 200) -> String {
    let clipped = text.count > limit ? String(text.prefix(limit)) + "…" : text
    return clipped.debugDescription
}
