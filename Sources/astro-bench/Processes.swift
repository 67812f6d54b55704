import AstroCLISupport
import Foundation
import Synchronization

/// Where astro-bench finds the programs it starts: beside itself, as `swift build` leaves them.
enum BenchProcesses {
    /// The path of `name` in astro-bench's own folder (symbolic links resolved).
    static func sibling(_ name: String) -> String {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent(name).path
    }
}

extension Duration {
    var benchSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// Runs a program to completion and returns its standard output; non-zero exit throws with its
/// standard error. The waiting happens on a thread of its own, never on the concurrency pool.
func runProcess(_ path: String, _ arguments: [String], environment: [String: String]? = nil) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try runProcessBlocking(path, arguments, environment: environment) })
        }
        thread.start()
    }
}

private func runProcessBlocking(_ path: String, _ arguments: [String], environment: [String: String]?) throws -> String
{
    let process = Process()
    if path.contains("/") {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [path] + arguments
    }
    if let environment { process.environment = environment }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Standard error is drained on another thread so neither pipe can fill up and stall the child.
    let errorText = Mutex(Data())
    let errorsRead = DispatchSemaphore(value: 0)
    let errorReader = Thread {
        errorText.withLock { $0 = errors.fileHandleForReading.readDataToEndOfFile() }
        errorsRead.signal()
    }
    errorReader.start()
    let outData = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    errorsRead.wait()
    guard process.terminationStatus == 0 else {
        let message = String(decoding: errorText.withLock { $0 }, as: UTF8.self)
        throw CommandFailure("\(path) failed (\(process.terminationStatus)): \(message)")
    }
    return String(decoding: outData, as: UTF8.self)
}
