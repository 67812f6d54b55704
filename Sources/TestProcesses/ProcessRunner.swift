import Foundation

/// Runs programs to completion as `ChildProcess`es: the package's own executables and tools.
public enum ProcessRunner {
    /// How a program ended and what it wrote.
    public struct Result: Sendable {
        /// The exit code, or 128 + the signal that ended it.
        public var status: Int32
        /// Its standard output.
        public var output: String
        /// Its standard error.
        public var error: String
    }

    /// The path of a product built beside the test bundle.
    public static func productPath(_ name: String) -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // On Linux the test runner is `<bin>/<package>PackageTests.xctest`; on macOS a bundle deeper.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path),
            directory.pathComponents.count > 2
        {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent(name).path
    }

    /// Runs `path` to completion as a `ChildProcess` (its own process group, the parent-death
    /// signal, output to files read back as `output` and `error`), with the test's environment
    /// plus `environment` (or exactly `environment` when `replacingEnvironment`), `input` on its
    /// standard input, in `directory` (the test's own when `nil`).
    /// - Throws: `TestFailure` when it cannot start or does not end within `timeout` (it is then
    ///   killed, its group with it; the message quotes its output); `CancellationError` when the
    ///   test is cancelled (it is killed too).
    public static func run(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        replacingEnvironment: Bool = false,
        input: String? = nil,
        directory: URL? = nil,
        timeout: Duration = .seconds(300)
    ) async throws -> Result {
        let inputFile = try input.map(Self.inputFile)
        defer { if let inputFile { try? FileManager.default.removeItem(at: inputFile) } }
        let process = try await ChildProcess.start(
            executable: path,
            arguments: arguments,
            environment: replacingEnvironment
                ? environment : ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            label: label(path, arguments),
            separateError: true,
            input: inputFile,
            directory: directory
        )
        return Self.finish(process, status: try await process.waitForExit(timeout: timeout))
    }

    /// `run` for where no `await` is possible (a static initializer): blocks the calling thread
    /// until the program ends, at most `timeout`.
    /// - Throws: `TestFailure` as `run` does.
    public static func runWaiting(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        replacingEnvironment: Bool = false,
        directory: URL? = nil,
        timeout: Duration = .seconds(300)
    ) throws -> Result {
        let process = try ChildProcess.startWaiting(
            executable: path,
            arguments: arguments,
            environment: replacingEnvironment
                ? environment : ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            label: label(path, arguments),
            separateError: true,
            directory: directory
        )
        return Self.finish(process, status: try process.waitForExitWaiting(timeout: timeout))
    }

    private static func label(_ path: String, _ arguments: [String]) -> String {
        ([URL(fileURLWithPath: path).lastPathComponent] + arguments.prefix(2)).joined(separator: "-")
    }

    private static func inputFile(_ input: String) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("astro-test-input-\(UUID()).txt")
        try Data(input.utf8).write(to: file)
        return file
    }

    /// What the process wrote, its log files removed.
    private static func finish(_ process: ChildProcess, status: Int32) -> Result {
        let result = Result(status: status, output: process.output, error: process.error)
        try? FileManager.default.removeItem(at: process.log)
        if let errorLog = process.errorLog { try? FileManager.default.removeItem(at: errorLog) }
        return result
    }
}
