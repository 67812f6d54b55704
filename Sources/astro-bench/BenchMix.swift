import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import Schema
import WorkerRuntime

/// The job mix of `bench e2e --mix chart=80,report=20`: percentages of chart.calculate and
/// report.request jobs, interleaved evenly.
struct BenchMix: Sendable, Hashable {
    var chart: Int
    var report: Int

    /// Parses `chart=80,report=20` (either part may be missing, meaning 0; the sum must be 100).
    init(parsing text: String) throws {
        var chart = 0
        var report = 0
        for part in text.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, let share = Int(pair[1]), share >= 0 else {
                throw ValidationError("--mix takes chart=N,report=M (percentages), got \(text.debugDescription)")
            }
            switch pair[0] {
            case "chart": chart = share
            case "report": report = share
            default: throw ValidationError("--mix: unknown job type \(pair[0].debugDescription) (chart, report)")
            }
        }
        guard chart + report == 100 else {
            throw ValidationError("--mix: the shares add up to \(chart + report), not 100")
        }
        self.chart = chart
        self.report = report
    }

    /// Whether job `index` of the run is a report request (spread evenly through the run).
    func isReport(_ index: Int) -> Bool {
        report > 0 && (index * report) / 100 != ((index + 1) * report) / 100
    }

    /// How many of `count` jobs are report requests.
    func reports(of count: Int) -> Int { (0..<count).filter(isReport).count }
}

extension BenchE2E {
    /// `e2e --mix`: one measurement per --workers count, then a summary.
    func runMix(_ mix: BenchMix) async throws {
        for name in ["chart-worker", "billing-worker", "report-worker"]
        where !FileManager.default.isExecutableFile(atPath: BenchProcesses.sibling(name)) {
            throw CommandFailure("\(name) not found beside astro-bench: build it first")
        }
        try await connection.withPool { pool in
            _ = try await Migrator(migrations: try AstroSchema.migrations(), logger: connection.logger).migrate(
                pool: pool
            )
        }
        print(
            "bench e2e --mix chart=\(mix.chart),report=\(mix.report): \(count) jobs per measurement "
                + "(\(mix.reports(of: count)) report requests), prefetch \(prefetch), publish window \(window)"
        )
        var summaries: [String] = []
        for chartWorkers in workers {
            let result = try await measureMix(mix, chartWorkers: chartWorkers)
            summaries.append(result)
            print(result)
        }
        if summaries.count > 1 {
            print("summary:")
            for line in summaries { print(line) }
        }
    }

    /// One measurement of a mix: `chartWorkers` chart-workers, one billing-worker and one
    /// report-worker; every job timed from its publish to its outcome event, per job type.
    private func measureMix(_ mix: BenchMix, chartWorkers: Int) async throws -> String {
        try await connection.withPublisher { publisher in
            let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
            try await publisher.declare(WorkerTopology.contract(retry: retry))
            let queues = [JobType.chartCalculate, .reportRequest, .reportGenerate, .billingRefundCredit]
            for queue in queues { _ = try await publisher.purgeQueue(queue.rawValue) }

            let reportCount = mix.reports(of: count)
            var reports = JobBodyGenerator(kind: .report)
            if reportCount > 0 {
                let chartData = try await ReportBenchFixture.chartJSON()
                reports.reportRequesters = try await connection.withPool { pool in
                    try await BillingBenchSeed.seed(pool: pool, jobs: reportCount, hotUser: false, chartData: chartData)
                }
            }
            let environment = workerProcessEnvironment { environment in
                if environment["BILLING_ENVIRONMENT"] == nil { environment["BILLING_ENVIRONMENT"] = "Sandbox" }
            }
            let binaries =
                Array(repeating: "chart-worker", count: chartWorkers)
                + (reportCount > 0 ? ["billing-worker", "report-worker"] : [])
            let measurement = E2EMeasurement(
                kinds: [
                    .init(routingKey: JobType.chartCalculate.rawValue, bodies: JobBodyGenerator(kind: .chart)),
                    .init(routingKey: JobType.reportRequest.rawValue, bodies: reports),
                ],
                kindOfJob: { mix.isReport($0) ? 1 : 0 },
                count: count,
                window: window,
                rate: rate,
                timeout: timeout,
                doneEvents: [.chartCalculated, .chartFailed, .reportCompleted, .reportFailed],
                eventQueuePrefix: "bench.mix.events",
                workerBinaries: binaries.map(BenchProcesses.sibling),
                workerEnvironment: environment,
                requiredConsumers: [(JobType.chartCalculate.rawValue, chartWorkers)]
                    + (reportCount > 0
                        ? [(JobType.reportRequest.rawValue, 1), (JobType.reportGenerate.rawValue, 1)] : []),
                workersDescription: "the workers"
            )
            let result = try await measurement.run(publisher: publisher, connection: connection)
            return Self.mixLines(chartWorkers: chartWorkers, count: count, result: result)
        }
    }

    /// The figures of one mix measurement: overall, then per job type.
    private static func mixLines(chartWorkers: Int, count: Int, result: E2EMeasurement.Result) -> String {
        let chart = result.reports[0]
        let report = result.reports[1]
        let elapsed = max(
            chart.finished > 0 ? Double(chart.finished) / max(chart.throughput, 1e-9) : 0,
            report.finished > 0 ? Double(report.finished) / max(report.throughput, 1e-9) : 0
        )
        func line(_ name: String, _ figures: BenchTimes.Report) -> String {
            String(
                format: "    %-6@ %6d jobs %8.1f jobs/s  p50 %7.1f ms  p95 %7.1f ms  p99 %7.1f ms  failed %d",
                name,
                figures.finished,
                figures.throughput,
                figures.p50 * 1000,
                figures.p95 * 1000,
                figures.p99 * 1000,
                figures.failed
            )
        }
        return String(
            format: "%d chart-worker%@: %7.1f jobs/s overall, worker peak RSS %.1f MB\n",
            chartWorkers,
            chartWorkers == 1 ? "" : "s",
            Double(count) / max(elapsed, 1e-9),
            Double(result.peakKilobytes) / 1024
        ) + line("chart", chart) + "\n" + line("report", report)
    }
}
