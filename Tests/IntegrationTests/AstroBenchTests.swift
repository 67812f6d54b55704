import Foundation
import Postgres
import TestProcesses
import Testing

/// `astro-bench` as a developer runs it: the end-to-end figures through real worker processes, in
/// the format earlier runs printed (people compare them across versions), and usage errors that
/// exit 2 like astroctl's.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct AstroBenchTests {
    /// Runs astro-bench against a fresh database of its own, which it migrates itself.
    func astroBench(_ arguments: [String]) async throws -> ProcessRunner.Result {
        let database = try await RuntimeTestEnvironment.freshDatabase()
        let url =
            "postgres://\(database.user):\(database.password ?? "")@\(database.host):\(database.port)/\(database.database)"
        return try await ProcessRunner.run(
            ProcessRunner.productPath("astro-bench"),
            arguments,
            environment: ["AMQP_URL": try RuntimeTestEnvironment.variable("AMQP_URL"), "DATABASE_URL": url]
        )
    }

    static let figures = #"p50 +\d+\.\d ms  p95 +\d+\.\d ms  p99 +\d+\.\d ms  failed 0"#

    @Test func e2eOfOneJobTypePrintsOneLinePerWorkerCount() async throws {
        let result = try await astroBench(["e2e", "--type", "chart", "--count", "60", "--workers", "1"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "bench e2e: 60 chart.calculate jobs per measurement, prefetch 64, publish window 200")
        let line = try Regex(
            #"1 worker: +\d+\.\d jobs/s  "# + Self.figures + #"  worker peak RSS \d+\.\d MB  jobs per commit \d+\.\d"#
        )
        #expect(lines.count == 2 && lines[1].wholeMatch(of: line) != nil, "\(result.output)")
    }

    @Test func e2eOfAMixPrintsEachJobTypesFigures() async throws {
        let result = try await astroBench([
            "e2e", "--mix", "chart=50,report=50", "--count", "40", "--workers", "1", "--prefetch", "16",
        ])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(
            lines.first
                == "bench e2e --mix chart=50,report=50: 40 jobs per measurement (20 report requests), prefetch 16, "
                + "publish window 200"
        )
        let overall = try Regex(#"1 chart-worker: +\d+\.\d jobs/s overall, worker peak RSS \d+\.\d MB"#)
        let chart = try Regex(#"    chart  +20 jobs +\d+\.\d jobs/s  "# + Self.figures)
        let report = try Regex(#"    report +20 jobs +\d+\.\d jobs/s  "# + Self.figures)
        #expect(lines.count == 4, "\(result.output)")
        #expect(lines.dropFirst().first?.wholeMatch(of: overall) != nil, "\(result.output)")
        #expect(lines.dropFirst(2).first?.wholeMatch(of: chart) != nil, "\(result.output)")
        #expect(lines.dropFirst(3).first?.wholeMatch(of: report) != nil, "\(result.output)")
    }

    /// The benchmarks left astroctl: it refuses `bench` like any unknown command, and astro-bench
    /// refuses invalid options with status 2, never with the argument parser's 64.
    @Test func usageErrorsExitTwo() async throws {
        let bench = try await ProcessRunner.run(ProcessRunner.productPath("astro-bench"), ["chart", "--count", "0"])
        #expect(bench.status == 2)
        #expect(bench.error.contains("--count"))
        let mix = try await ProcessRunner.run(ProcessRunner.productPath("astro-bench"), ["e2e", "--mix", "chart=90"])
        #expect(mix.status == 2)
        let astroctl = try await ProcessRunner.run(ProcessRunner.productPath("astroctl"), ["bench", "chart"])
        #expect(astroctl.status == 2)
    }
}
