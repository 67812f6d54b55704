import Foundation
import TestProcesses
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The helper every test that starts a process goes through: what it promises (the program's
/// output and status, a bound on its time, its whole group ended, the run's mark passed on) is
/// what the suites rely on to leave nothing behind.
@Suite(.timeLimit(.minutes(1)))
struct ProcessRunnerTests {
    @Test func theStatusOutputAndErrorOfAProgramComeBackApart() async throws {
        let result = try await ProcessRunner.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(result.status == 3)
        #expect(result.output == "out\n")
        #expect(result.error == "err\n")
        let waited = try ProcessRunner.runWaiting("/bin/sh", ["-c", "pwd"], directory: URL(fileURLWithPath: "/tmp"))
        #expect(waited.status == 0 && waited.output == "/tmp\n", "\(waited)")
    }

    @Test func theRunsMarkAndTheEnvironmentReachTheProgram() async throws {
        let result = try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "echo \"$ASTRO_TEST_RUN_ID|$ONLY|${HOME:-unset}\""],
            environment: ["ONLY": "this", ChildProcess.runMark: "mark-\(getpid())"],
            replacingEnvironment: true
        )
        #expect(result.output == "mark-\(getpid())|this|unset\n", "\(result)")
    }

    /// A program past its time is killed, and what it started in its group goes with it: the
    /// failure says so and names the program.
    @Test(arguments: [false, true])
    func aProgramPastItsTimeIsKilledWithItsGroup(blocking: Bool) async throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("runner-\(UUID()).pid")
        defer { try? FileManager.default.removeItem(at: marker) }
        // The grandchild writes its pid, then both sleep far past the bound.
        let script = "sleep 300 & echo $! > \(marker.path); wait"
        let started = ContinuousClock.now
        do {
            if blocking {
                _ = try ProcessRunner.runWaiting("/bin/sh", ["-c", script], timeout: .seconds(1))
            } else {
                _ = try await ProcessRunner.run("/bin/sh", ["-c", script], timeout: .seconds(1))
            }
            Issue.record("a program sleeping 300 s ended within a 1 s bound")
        } catch let failure as TestFailure {
            #expect(failure.description.contains("did not exit within"), "\(failure)")
            #expect(failure.description.contains("sh"), "\(failure)")
        }
        #expect(ContinuousClock.now - started < .seconds(30))
        let grandchild = try #require(
            Int32(try String(contentsOf: marker, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        )
        // Killed with the group; reaped by init once orphaned, so it may linger a moment.
        try await Wait.until("the grandchild \(grandchild) is gone", timeout: .seconds(10)) {
            Glibc.kill(grandchild, 0) != 0 || Self.isZombie(grandchild)
        }
    }

    /// The program is started through setpriv (for the parent-death signal), so a program that
    /// does not exist is setpriv's failure to run it: a non-zero status and a message naming it.
    @Test func aProgramThatCannotStartEndsInFailureNamingIt() async throws {
        let result = try await ProcessRunner.run("/nonexistent/program", [])
        #expect(result.status != 0)
        #expect(result.error.contains("/nonexistent/program"), "\(result)")
    }

    static func isZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }
}
