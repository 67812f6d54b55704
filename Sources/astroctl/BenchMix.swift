import AMQP
import ArgumentParser
import AstroDomain
import Foundation
import Postgres
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
    /// One measurement of a mix: `chartWorkers` chart-workers, one billing-worker and one
    /// report-worker; every job timed from its publish to its outcome event, per job type.
    func measureMix(
        _ mix: BenchMix,
        chartWorkers: Int,
        amqp: AMQPConfiguration,
        database: PostgresConfiguration
    ) async throws -> String {
        let logger = connection.logger
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        defer { Task { await publisher.close() } }
        let retry = RetryPolicy(maxAttempts: 5, initialDelay: .seconds(1), maxDelay: .seconds(60))
        try await publisher.declare(WorkerTopology.contract(retry: retry))
        let queues = [JobType.chartCalculate, .reportRequest, .reportGenerate, .billingRefundCredit]
        for queue in queues { _ = try await publisher.purgeQueue(queue.rawValue) }

        let reportCount = mix.reports(of: count)
        var charts = JobBodyGenerator(kind: .chart)
        var reports = JobBodyGenerator(kind: .report)
        if reportCount > 0 {
            let chartData = try await ReportBenchFixture.chartJSON()
            reports.reportRequesters = try await connection.withPool { pool in
                try await BillingBenchSeed.seed(pool: pool, jobs: reportCount, hotUser: false, chartData: chartData)
            }
        }

        let eventQueue = "bench.mix.events.\(UUID().uuidString.prefix(8).lowercased())"
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: eventQueue, durable: false, exclusive: false, autoDelete: false)],
                bindings: [EventType.chartCalculated, .chartFailed, .reportCompleted, .reportFailed].map {
                    BindingSpec(queue: eventQueue, exchange: BrokerNames.eventsExchange, routingKey: $0.rawValue)
                }
            )
        )
        defer { Task { try? await publisher.deleteQueue(eventQueue) } }

        var environment = BenchWorkers.environment(connection: connection, prefetch: prefetch)
        if environment["BILLING_ENVIRONMENT"] == nil { environment["BILLING_ENVIRONMENT"] = "Sandbox" }
        for item in workerEnvironment {
            let parts = item.split(separator: "=", maxSplits: 1)
            environment[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        let binaries =
            Array(repeating: "chart-worker", count: chartWorkers)
            + (reportCount > 0 ? ["billing-worker", "report-worker"] : [])
        let processes = try BenchWorkers.start(binaries.map(BenchAMQP.sibling), environment: environment)
        defer {
            for process in processes where process.isRunning { process.terminate() }
            for process in processes { process.waitUntilExit() }
        }
        let started = ContinuousClock.now
        while true {
            let chartConsumers = try await publisher.queueState(JobType.chartCalculate.rawValue).consumerCount
            let requestConsumers = try await publisher.queueState(JobType.reportRequest.rawValue).consumerCount
            let generateConsumers = try await publisher.queueState(JobType.reportGenerate.rawValue).consumerCount
            if chartConsumers >= chartWorkers, reportCount == 0 || (requestConsumers >= 1 && generateConsumers >= 1) {
                break
            }
            guard ContinuousClock.now - started < .seconds(60) else {
                throw CommandFailure("the workers did not start consuming within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }

        let chartTimes = BenchTimes(count: count - reportCount)
        let reportTimes = BenchTimes(count: reportCount)
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: .empty,
            queues: [eventQueue],
            prefetch: 500,
            logger: logger
        )
        try await consumer.start()
        let total = count
        let collector = Task {
            for await delivery in consumer.deliveries {
                let now = ContinuousClock.now
                try? await consumer.ack(delivery)
                guard let object = try? JSONValue.parse(delivery.body) else { continue }
                let failed = object["error"] != nil
                // report-workers' events run under a derived job id and name the request's.
                if delivery.routingKey.hasPrefix("chart."), let id = object["jobId"]?.stringValue.flatMap(JobID.init) {
                    _ = chartTimes.finish(id, at: now, failed: failed)
                } else if let id = (object["requestJobId"] ?? object["jobId"])?.stringValue.flatMap(JobID.init) {
                    _ = reportTimes.finish(id, at: now, failed: failed)
                }
                if chartTimes.finishedCount + reportTimes.finishedCount >= total { break }
            }
        }
        let peakMemory = PeakMemory(pids: processes.map(\.processIdentifier))
        let sampler = Task {
            while !Task.isCancelled {
                peakMemory.sample()
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        let firstPublish = ContinuousClock.now
        let progress = Task {
            while !Task.isCancelled {
                Self.drawProgress(
                    done: chartTimes.finishedCount + reportTimes.finishedCount,
                    total: total,
                    since: firstPublish
                )
                try? await Task.sleep(for: .milliseconds(250))
            }
        }

        var published = 0
        while published < count {
            let size = min(window, count - published)
            var messages: [OutgoingMessage] = []
            var chartIDs: [JobID] = []
            var reportIDs: [JobID] = []
            for index in published..<(published + size) {
                let id = JobID.random()
                let isReport = mix.isReport(index)
                if isReport { reportIDs.append(id) } else { chartIDs.append(id) }
                var properties = MessageProperties(contentType: "application/json")
                properties.messageID = id.description
                messages.append(
                    OutgoingMessage(
                        exchange: BrokerNames.jobsExchange,
                        routingKey: isReport ? JobType.reportRequest.rawValue : JobType.chartCalculate.rawValue,
                        body: isReport ? reports.body(jobID: id) : charts.body(jobID: id),
                        properties: properties
                    )
                )
            }
            let now = ContinuousClock.now
            chartTimes.published(chartIDs, at: now)
            reportTimes.published(reportIDs, at: now)
            try await publisher.publish(messages, timeout: .seconds(60))
            published += size
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        while chartTimes.finishedCount + reportTimes.finishedCount < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        progress.cancel()
        sampler.cancel()
        Self.drawProgress(done: chartTimes.finishedCount + reportTimes.finishedCount, total: count, since: firstPublish)
        FileHandle.standardError.write(Data("\n".utf8))
        await consumer.close()
        collector.cancel()

        let chart = chartTimes.report()
        let report = reportTimes.report()
        guard chart.finished + report.finished == count else {
            throw CommandFailure(
                "only \(chart.finished + report.finished) of \(count) jobs finished within \(timeout) s"
            )
        }
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
            Double(peakMemory.peakKilobytes) / 1024
        ) + line("chart", chart) + "\n" + line("report", report)
    }
}
