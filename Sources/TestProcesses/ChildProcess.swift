import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A process a test started, which ends with the test whatever its outcome.
///
/// - It runs in a process group of its own, and `stop()` ends the whole group: SIGTERM, then
///   SIGKILL after a grace period.
/// - It is started through `setpriv --pdeathsig KILL` from a thread that lives as long as the test
///   process, so a test binary that crashes or is killed takes its children with it (the kernel's
///   parent-death signal follows the thread that spawned the child, hence the dedicated thread).
/// - It never inherits the test's standard output or error (a child holding them would keep
///   `swift test`'s pipe open after the tests ended, and the run would hang): its output goes to
///   a log file that `output` reads and failure messages quote.
/// - A `ChildProcess` released without `stop()` is killed (SIGKILL to its group) in `deinit`.
/// - It carries the test run's mark (`ASTRO_TEST_RUN_ID`, which scripts/integration-tests.sh sets
///   per suite) in its environment, so that the script can find whatever a run left behind, and
///   only that.
public final class ChildProcess: Sendable {
    /// What the process is, for messages.
    public let label: String
    /// Its process id, which is also its process group id.
    public let pid: pid_t
    /// The file its standard output goes to, and its standard error unless `errorLog` is set.
    public let log: URL
    /// The file its standard error goes to when kept apart from its output.
    public let errorLog: URL?
    /// The wait status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    /// The environment variable that marks every process a test run started (scripts/leftovers.sh).
    public static let runMark = "ASTRO_TEST_RUN_ID"

    private init(label: String, pid: pid_t, log: URL, errorLog: URL?) {
        self.label = label
        self.pid = pid
        self.log = log
        self.errorLog = errorLog
    }

    /// Starts one of this package's executables (built beside the test bundle), with the test's
    /// environment plus `environment` (or exactly `environment` when `replacingEnvironment`).
    /// - Throws: `TestFailure` when the process cannot be started.
    public static func product(
        _ name: String,
        arguments: [String] = [],
        environment: [String: String],
        replacingEnvironment: Bool = false,
        label: String? = nil
    ) async throws -> ChildProcess {
        try await start(
            executable: ProcessRunner.productPath(name),
            arguments: arguments,
            environment: replacingEnvironment
                ? environment : ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            label: label ?? name
        )
    }

    /// Starts `executable` with exactly `environment` (plus the run's mark, when the test has one).
    /// - Parameters:
    ///   - separateError: standard error to a file of its own (`errorLog`, `error`) rather than
    ///     into `log`.
    ///   - existingLog: a log to append to (a restarted process's, say) instead of a new one.
    ///   - input: a file to read standard input from, instead of /dev/null.
    ///   - directory: the working directory (the test's own when `nil`).
    /// - Throws: `TestFailure` when the log file cannot be created or the process cannot be
    ///   started.
    public static func start(
        executable: String,
        arguments: [String],
        environment: [String: String],
        label: String,
        separateError: Bool = false,
        appendingTo existingLog: URL? = nil,
        input: URL? = nil,
        directory: URL? = nil
    ) async throws -> ChildProcess {
        let launch = try Launch(
            executable: executable,
            arguments: arguments,
            environment: environment,
            label: label,
            separateError: separateError,
            existingLog: existingLog,
            input: input,
            directory: directory
        )
        return try launch.finish(await SpawnerThread.shared.run { launch.spawn() })
    }

    /// `start` for where no `await` is possible (a static initializer): blocks the calling thread
    /// while the spawner thread starts the process.
    /// - Throws: `TestFailure` as `start` does.
    public static func startWaiting(
        executable: String,
        arguments: [String],
        environment: [String: String],
        label: String,
        separateError: Bool = false,
        input: URL? = nil,
        directory: URL? = nil
    ) throws -> ChildProcess {
        let launch = try Launch(
            executable: executable,
            arguments: arguments,
            environment: environment,
            label: label,
            separateError: separateError,
            existingLog: nil,
            input: input,
            directory: directory
        )
        return try launch.finish(SpawnerThread.shared.runWaiting { launch.spawn() })
    }

    /// What a start needs, made ready (log files created, the run's mark added) before the spawn.
    private struct Launch: Sendable {
        let label: String
        let argv: [String]
        let envp: [String]
        let inputPath: String
        let log: URL
        let errorLog: URL?

        init(
            executable: String,
            arguments: [String],
            environment: [String: String],
            label: String,
            separateError: Bool,
            existingLog: URL?,
            input: URL?,
            directory: URL?
        ) throws {
            let safeLabel = String(label.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" }.prefix(80))
            let stem = "astro-test-\(safeLabel)-\(UUID().uuidString.prefix(8))"
            let log = existingLog ?? FileManager.default.temporaryDirectory.appendingPathComponent("\(stem).log")
            let errorLog =
                separateError ? FileManager.default.temporaryDirectory.appendingPathComponent("\(stem).err") : nil
            for file in (existingLog == nil ? [log] : []) + (errorLog.map { [$0] } ?? []) {
                guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                    throw TestFailure("\(label): cannot create its log file \(file.path)")
                }
            }
            var environment = environment
            if environment[ChildProcess.runMark] == nil,
                let mark = ProcessInfo.processInfo.environment[ChildProcess.runMark]
            {
                environment[ChildProcess.runMark] = mark
            }
            // env -C: posix_spawn has no portable working-directory action.
            let changeDirectory = directory.map { ["/usr/bin/env", "-C", $0.path] } ?? []
            self.label = label
            self.argv = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] + changeDirectory + [executable] + arguments
            self.envp = environment.map { "\($0.key)=\($0.value)" }
            self.inputPath = input?.path ?? "/dev/null"
            self.log = log
            self.errorLog = errorLog
        }

        func spawn() -> Result<pid_t, TestFailure> {
            ChildProcess.spawn(
                argv: argv,
                envp: envp,
                inputPath: inputPath,
                logPath: log.path,
                errorPath: errorLog?.path
            )
        }

        func finish(_ spawned: Result<pid_t, TestFailure>) throws -> ChildProcess {
            switch spawned {
            case .success(let pid): return ChildProcess(label: label, pid: pid, log: log, errorLog: errorLog)
            case .failure(let error): throw TestFailure("\(label): \(error.description)")
            }
        }
    }

    /// posix_spawn in a new process group, stdin from `inputPath`, stdout to the log and stderr to
    /// the error log or the log, every other descriptor closed, SIGTERM/SIGINT at their defaults
    /// and no signal blocked.
    private static func spawn(
        argv: [String],
        envp: [String],
        inputPath: String,
        logPath: String,
        errorPath: String?
    ) -> Result<pid_t, TestFailure> {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        // Every other descriptor closed (glibc 2.34+; not in the Glibc module's headers, so
        // looked up): a pipe of the test runner's without close-on-exec stays out of the child.
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes,
            Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        )
        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        var cEnvironment: [UnsafeMutablePointer<CChar>?] = envp.map { strdup($0) } + [nil]
        defer {
            for pointer in cArguments { free(pointer) }
            for pointer in cEnvironment { free(pointer) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, argv[0], &actions, &attributes, &cArguments, &cEnvironment)
        guard status == 0 else {
            return .failure(
                TestFailure("posix_spawn \(argv.joined(separator: " ")) failed: \(String(cString: strerror(status)))")
            )
        }
        return .success(pid)
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// Whether the process has not exited yet.
    public var isRunning: Bool { exitStatus == nil }

    /// The wait status (as `waitpid` gives it) once the process exited; `nil` while it runs.
    public var exitStatus: Int32? {
        if let status = reaped.withLock({ $0 }) { return status }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            reaped.withLock { $0 = status }
            // Anything the process left behind in its group goes with it.
            Glibc.kill(-pid, SIGKILL)
            return status
        }
        return nil
    }

    /// The exit code, or 128 + the signal that ended the process; `nil` while it runs.
    public var exitCode: Int32? {
        guard let status = exitStatus else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Everything the process wrote so far (its standard output alone when `errorLog` is set).
    public var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// What the process wrote to its standard error, when kept apart (`errorLog`); else "".
    public var error: String { errorLog.flatMap { try? String(contentsOf: $0, encoding: .utf8) } ?? "" }

    /// The last `characters` of the output (and of the error output when kept apart), with the
    /// log's path, for failure messages.
    public func tail(_ characters: Int = 3_000) -> String {
        var text = "\(label) (log \(log.path)):\n" + String(output.suffix(characters))
        if let errorLog { text += "\n\(label) (standard error \(errorLog.path)):\n" + String(error.suffix(characters)) }
        return text
    }

    /// Sends `signal` to the process's group (SIGTERM, SIGINT, SIGKILL, SIGSTOP…); nothing once
    /// it was reaped.
    public func send(_ signal: Int32) {
        guard reaped.withLock({ $0 }) == nil else { return }
        Glibc.kill(-pid, signal)
    }

    /// Ends the process and its group: SIGTERM, then SIGKILL once `grace` passed. A cancelled
    /// task (a test past its time limit) skips the grace: SIGKILL at once.
    /// - Returns: the exit code (128 + the signal when a signal ended it).
    @discardableResult
    public func stop(grace: Duration = .seconds(10)) async -> Int32 {
        if let code = exitCode { return code }
        Glibc.kill(-pid, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if let code = exitCode { return code }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return kill()
    }

    /// `stop(grace:)` for where no `await` is possible (a `defer`): SIGTERM, then SIGKILL once
    /// `grace` passed, blocking the calling thread meanwhile.
    /// - Returns: the exit code (128 + the signal when a signal ended it).
    @discardableResult
    public func stopWaiting(grace: Duration = .seconds(10)) -> Int32 {
        if let code = exitCode { return code }
        Glibc.kill(-pid, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if let code = exitCode { return code }
            usleep(20_000)
        }
        return kill()
    }

    /// Ends the process and its group at once (SIGKILL) and reaps it.
    /// - Returns: the exit code (128 + the signal when a signal ended it).
    @discardableResult
    public func kill() -> Int32 {
        if let code = exitCode { return code }
        Glibc.kill(-pid, SIGKILL)
        // A killed process is reaped within moments (unless stuck in the kernel).
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        reaped.withLock { if $0 == nil { $0 = status } }
        return exitCode ?? 128 + SIGKILL
    }

    /// Waits until the process exits by itself, at most `timeout`; kills it (and its group) when
    /// it does not, or when the waiting task is cancelled.
    /// - Returns: the exit code (128 + the signal when a signal ended it).
    /// - Throws: `TestFailure` naming the process, with its log's path and tail, when it did
    ///   not exit in time; `CancellationError` when the task was cancelled.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(120)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        var pause = 2
        while ContinuousClock.now < deadline {
            if let code = exitCode { return code }
            if Task.isCancelled {
                kill()
                throw CancellationError()
            }
            try? await Task.sleep(for: .milliseconds(pause))
            pause = min(pause * 2, 50)
        }
        if let code = exitCode { return code }
        kill()
        throw TestFailure("\(label) did not exit within \(timeout), killed\n\(tail())")
    }

    /// `waitForExit` for where no `await` is possible: blocks the calling thread, at most
    /// `timeout`, and kills the process (and its group) when it does not exit by then.
    /// - Returns: the exit code (128 + the signal when a signal ended it).
    /// - Throws: `TestFailure` naming the process, with its log's path and tail, when it did not
    ///   exit in time.
    @discardableResult
    public func waitForExitWaiting(timeout: Duration = .seconds(120)) throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let code = exitCode { return code }
            usleep(5_000)
        }
        if let code = exitCode { return code }
        kill()
        throw TestFailure("\(label) did not exit within \(timeout), killed\n\(tail())")
    }

    /// Waits until the output contains `text`, or the process exits, or `timeout` passes.
    /// - Throws: `TestFailure` naming what it waited for, with the output's tail, when the
    ///   text does not appear; `CancellationError` when the task was cancelled.
    public func waitForOutput(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.contains(text) { return }
            if !isRunning {
                if output.contains(text) { return }
                throw TestFailure(
                    "\(label) exited with \(exitCode ?? -1) before writing \"\(text)\"\n\(tail())"
                )
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("\(label) did not write \"\(text)\" within \(timeout)\n\(tail())")
    }

    /// `Wait.until` for a wait on child processes: when it gives up, the
    /// error names each process's log and quotes its last lines.
    /// - Throws: `TestFailure` when `condition` does not hold within `timeout`, what
    ///   `condition` throws, or `CancellationError`.
    public static func eventually(
        _ what: String,
        on processes: [ChildProcess],
        timeout: Duration = .seconds(60),
        _ condition: () async throws -> Bool
    ) async throws {
        do {
            try await Wait.until(what, timeout: timeout, condition)
        } catch let error as TestFailure {
            throw TestFailure(([error.description] + processes.map { $0.tail(2_000) }).joined(separator: "\n"))
        }
    }

    /// The port a worker's health endpoint bound (`HTTP_PORT` 0 is any free one), from its
    /// "health endpoint listening" line: the worker must log at info.
    /// - Throws: `TestFailure` with the log's tail when the line does not come.
    public func healthPort(timeout: Duration = .seconds(60)) async throws -> Int {
        try await waitForOutput("health endpoint listening", timeout: timeout)
        guard let port = logValue("http.port", onLineWith: "health endpoint listening").flatMap(Int.init) else {
            throw TestFailure("\(label) logged no health port\n\(tail())")
        }
        return port
    }

    /// The value of `key=` in the first output line containing `message` (the text log format).
    public func logValue(_ key: String, onLineWith message: String) -> String? {
        for line in output.split(separator: "\n") where line.contains(message) {
            for word in line.split(separator: " ") where word.hasPrefix("\(key)=") {
                return String(word.dropFirst(key.count + 1))
            }
        }
        return nil
    }

    deinit {
        if reaped.withLock({ $0 }) == nil {
            Glibc.kill(-pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}

/// A thread that lives as long as the test process and starts every `ChildProcess`: the
/// parent-death signal fires when the thread that spawned a child ends, so spawning from a pool
/// thread that may retire would kill children at random.
private final class SpawnerThread: @unchecked Sendable {
    // @unchecked: `work` is only touched with `condition` locked.
    static let shared = SpawnerThread()
    private let condition = NSCondition()
    private var work: [@Sendable () -> Void] = []

    private init() {
        let thread = Thread { [condition = self.condition, unowned self] in
            while true {
                condition.lock()
                while self.work.isEmpty { condition.wait() }
                let next = self.work.removeFirst()
                condition.unlock()
                next()
            }
        }
        thread.name = "test-process-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner thread and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            condition.lock()
            work.append { continuation.resume(returning: body()) }
            condition.signal()
            condition.unlock()
        }
    }

    /// Runs `body` on the spawner thread, blocking the calling thread until it returns.
    func runWaiting<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        condition.lock()
        work.append {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        condition.signal()
        condition.unlock()
        done.wait()
        return result.withLock { $0! }
    }
}
