import AMQP
import AstroDomain
import Foundation
import Testing
import WorkerRuntime
import WorkerRuntimeTestKit

/// Business measurements are counted after their transaction commits, never for a rolled-back
/// attempt, and every series the runtime exports is a `MetricName`.
@Suite(.timeLimit(.minutes(1))) struct BusinessMetricsTests {
    static let jobType: JobType = "test.business"

    /// A handler whose commit reports one report written in `finances`/`en` by the built-in
    /// writer, and 100 prompt + 50 completion tokens costing 0.25 USD.
    static var handler: InMemoryJobHandler {
        InMemoryJobHandler(
            jobType: jobType,
            prepare: { _ in true },
            commit: { _, _, _ in
                JobOutcome(
                    status: .succeeded,
                    measurements: [BusinessMeasurement(.reports, ["finances", "en", "built-in"])]
                        + BusinessMeasurement.llmUsage(
                            purpose: "report",
                            promptTokens: 100,
                            completionTokens: 50,
                            costUSD: 0.25
                        )
                )
            }
        )
    }

    /// The value of the series `name{labels}` in a text exposition, nil when absent.
    static func value(_ name: String, _ labels: String = "", in text: String) -> Double? {
        let prefix = labels.isEmpty ? "\(name) " : "\(name){\(labels)} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }
            .flatMap { Double($0.dropFirst(prefix.count)) }
    }

    @Test func aCommittedJobsMeasurementsAreCountedOnce() async throws {
        let runtime = InMemoryRuntime(handlers: [Self.handler], retry: testRetryPolicy)
        let delivery = TestDeliveries.job(Self.jobType)
        await runtime.process(delivery)
        // The same job again: a duplicate, whose transaction writes nothing and counts nothing.
        await runtime.process(TestDeliveries.redelivery(of: delivery))

        let text = runtime.metrics.render()
        #expect(
            Self.value("astro_reports_total", #"area="finances",language="en",writer="built-in""#, in: text) == 1
        )
        #expect(Self.value("astro_llm_tokens_total", #"purpose="report",kind="prompt""#, in: text) == 100)
        #expect(Self.value("astro_llm_tokens_total", #"purpose="report",kind="completion""#, in: text) == 50)
        #expect(Self.value("astro_llm_cost_usd_total", #"purpose="report""#, in: text) == 0.25)
    }

    @Test func aRolledBackCommitCountsNothing() async throws {
        let runtime = InMemoryRuntime(handlers: [Self.handler], retry: testRetryPolicy)
        // The transaction fails (a lost connection): the handler's outcome is discarded and the
        // job goes to a retry.
        runtime.store.failNextTransactions(1, throwing: ScriptedFailure(failureCode: "test-lost", isTransient: true))
        await runtime.process(TestDeliveries.job(Self.jobType))

        let text = runtime.metrics.render()
        #expect(text.contains("astro_job_retries_total"))
        #expect(!text.contains("astro_reports_total"))
        #expect(!text.contains("astro_llm_cost_usd_total"))
    }

    @Test func unknownLabelValuesBecomeOtherAndAmountsStayFinite() {
        #expect(MetricLabel.bounded("finances", among: MetricLabel.creditAreas) == "finances")
        #expect(MetricLabel.bounded("<script>", among: MetricLabel.creditAreas) == "other")
        #expect(MetricLabel.writer("llm:gpt-4o-mini") == "llm")
        #expect(MetricLabel.writer("built-in") == "built-in")
        #expect(MetricLabel.writer("someone") == "other")
        #expect(MetricLabel.illustrator("images:dall-e") == "images-api")
        #expect(
            BusinessMeasurement.llmUsage(purpose: "poem", promptTokens: 1, completionTokens: 1, costUSD: 1)
                .allSatisfy { $0.labelValues[0] == "other" }
        )
        #expect(BusinessMeasurement(.llmCost, ["report"], amount: .infinity).amount == 0)
        #expect(BusinessMeasurement(.llmCost, ["report"], amount: -3).amount == 0)

        let metrics = WorkerMetrics()
        metrics.record([BusinessMeasurement(.llmCost, ["report"], amount: 1e300)])
        let cost = Self.value("astro_llm_cost_usd_total", #"purpose="report""#, in: metrics.render())
        #expect(cost == 1e12)
    }

    /// Every series the runtime can export is declared in `MetricName`, with its kind and labels:
    /// a renamed metric breaks this test before it breaks a dashboard.
    @Test func everyExportedSeriesIsAMetricName() {
        let metrics = WorkerMetrics()
        for outcome in WorkerMetrics.Outcome.allCases { metrics.recordJob(queue: "q", outcome: outcome) }
        metrics.recordRetry(queue: "q")
        metrics.recordDeadLetter(queue: "q", reason: "invalid-payload")
        metrics.recordDuration(queue: "q", .milliseconds(3))
        metrics.adjustInFlight(queue: "q", by: 1)
        metrics.recordCommitBatch(jobs: 2)
        metrics.recordOutbox(published: 1, failed: 1)
        metrics.set(.outboxOldestUnsentAge, to: 2)
        metrics.set(.probeLastSuccess, ["outbox-lag"], to: 1)
        metrics.set(.workerReady, to: 1)
        for name in MetricName.allCases where name.rawValue.hasPrefix("astro_") && name.kind != .histogram {
            metrics.record([BusinessMeasurement(name, name.labelNames.map { _ in "x" })])
        }
        let text = metrics.render()
        let known = Set(MetricName.allCases.flatMap(\.seriesNames))
        let exported = Set(
            text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                .map { String($0.prefix { $0 != "{" && $0 != " " }) }
        )
        #expect(exported.subtracting(known).isEmpty, "exported but not in MetricName: \(exported.subtracting(known))")
        let workerNames = Set(
            MetricName.allCases.filter { $0.rawValue.hasPrefix("astro_") }.flatMap(\.seriesNames)
        )
        #expect(workerNames.subtracting(exported).isEmpty, "never exported: \(workerNames.subtracting(exported))")
        // Labels come out with the names MetricName gives them.
        #expect(text.contains(#"astro_jobs_total{queue="q",outcome="succeeded"}"#))
        #expect(text.contains(#"astro_dead_letters_total{queue="q",reason="invalid-payload"}"#))
    }
}
