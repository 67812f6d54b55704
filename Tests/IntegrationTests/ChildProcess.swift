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
final class ChildProcess: Sendable {
    /// What the process is, for messages.
    let label: String
    /// Its process id, which is also its process group id.
    let pid: pid_t
    /// The file its standard output and error go to.
    let log: URL
    /// The wait status once reaped.
    private let reaped = Mutex<Int32?>(nil)

    private init(label: String, pid: pid_t, log: URL) {
        self.label = label
        self.pid = pid
        self.log = log
    }

    /// Starts one of this package's executables (built beside the test bundle), with the test's
    /// environment plus `environment`.
    /// - Throws: `RuntimeTestError` when the process cannot be started.
    static func product(
        _ name: String,
        arguments: [String] = [],
        environment: [String: String],
        label: String? = nil
    ) async throws -> ChildProcess {
        try await start(
            executable: ProcessRunner.productPath(name),
            arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            label: label ?? name
        )
    }

    /// Starts `executable` with exactly `environment`.
    /// - Throws: `RuntimeTestError` when the log file cannot be created or the process cannot be
    ///   started.
    static func start(
        executable: String,
        arguments: [String],
        environment: [String: String],
        label: String
    ) async throws -> ChildProcess {
        let safeLabel = String(label.map { $0.isLetter || $0.isNumber || $0 == "-" ? $0 : "-" })
        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "astro-test-\(safeLabel)-\(UUID().uuidString.prefix(8)).log"
        )
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw RuntimeTestError("\(label): cannot create its log file \(log.path)")
        }
        let argv = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", executable] + arguments
        let envp = environment.map { "\($0.key)=\($0.value)" }
        let logPath = log.path
        let spawned: Result<pid_t, RuntimeTestError> = await SpawnerThread.shared.run {
            Self.spawn(argv: argv, envp: envp, logPath: logPath)
        }
        switch spawned {
        case .success(let pid): return ChildProcess(label: label, pid: pid, log: log)
        case .failure(let error): throw RuntimeTestError("\(label): \(error.description)")
        }
    }

    /// posix_spawn in a new process group, stdin from /dev/null, stdout and stderr to the log,
    /// every other descriptor closed, SIGTERM/SIGINT at their defaults and no signal blocked.
    private static func spawn(argv: [String], envp: [String], logPath: String) -> Result<pid_t, RuntimeTestError> {
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
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
            return .failure(RuntimeTestError("posix_spawn \(argv[4]) failed: \(String(cString: strerror(status)))"))
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
    var isRunning: Bool { exitStatus == nil }

    /// The wait status (as `waitpid` gives it) once the process exited; `nil` while it runs.
    var exitStatus: Int32? {
        if let status = reaped.withLock({ $0 }) { return status }
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            reaped.withLock { $0 = status }
            // Anything the process left behind in its group goes with it.
            kill(-pid, SIGKILL)
            return status
        }
        return nil
    }

    /// The exit code, or 128 + the signal that ended the process; `nil` while it runs.
    var exitCode: Int32? {
        guard let status = exitStatus else { return nil }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Everything the process wrote so far.
    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// The last `characters` of the output, with the log's path, for failure messages.
    func tail(_ characters: Int = 3_000) -> String {
        "\(label) (log \(log.path)):\n" + String(output.suffix(characters))
    }

    /// Ends the process and its group: SIGTERM, then SIGKILL once `grace` passed.
    /// - Returns: the exit code (128 + signal when a signal ended it).
    @discardableResult
    func stop(grace: Duration = .seconds(10)) async -> Int32 {
        if let code = exitCode { return code }
        kill(-pid, SIGTERM)
        let deadline = ContinuousClock.now + grace
        while ContinuousClock.now < deadline {
            if let code = exitCode { return code }
            try? await Task.sleep(for: .milliseconds(50))
        }
        kill(-pid, SIGKILL)
        while true {
            if let code = exitCode { return code }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits until the output contains `text`, or the process exits, or `timeout` passes.
    /// - Throws: `RuntimeTestError` naming what it waited for, with the output's tail, when the
    ///   text does not appear.
    func waitForOutput(_ text: String, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.contains(text) { return }
            if !isRunning {
                if output.contains(text) { return }
                throw RuntimeTestError(
                    "\(label) exited with \(exitCode ?? -1) before writing \"\(text)\"\n\(tail())"
                )
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        throw RuntimeTestError("\(label) did not write \"\(text)\" within \(timeout)\n\(tail())")
    }

    /// The value of `key=` in the first output line containing `message` (the text log format).
    func logValue(_ key: String, onLineWith message: String) -> String? {
        for line in output.split(separator: "\n") where line.contains(message) {
            for word in line.split(separator: " ") where word.hasPrefix("\(key)=") {
                return String(word.dropFirst(key.count + 1))
            }
        }
        return nil
    }

    deinit {
        if reaped.withLock({ $0 }) == nil {
            kill(-pid, SIGKILL)
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
}
