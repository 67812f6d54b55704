import AstroDomain
import Prometheus

/// A business fact a job's transaction wrote (credits issued, a report stored, tokens paid for),
/// handed back in `JobOutcome.measurements` and counted by the runtime only once that
/// transaction committed: a rolled-back or replayed attempt counts nothing.
public struct BusinessMeasurement: Sendable, Hashable {
    /// The metric (one of `MetricName`).
    public var metric: MetricName
    /// Label values in the order of `metric.labelNames`, each from its closed set.
    public var labelValues: [String]
    /// How much to add to the counter (a gauge is set to it).
    public var amount: Double

    /// - Parameters:
    ///   - labelValues: as many as `metric.labelNames`; a wrong count is a programming error.
    ///   - amount: added to a counter; a negative or non-finite amount is recorded as 0.
    public init(_ metric: MetricName, _ labelValues: [String] = [], amount: Double = 1) {
        precondition(
            labelValues.count == metric.labelNames.count,
            "\(metric.rawValue) takes labels \(metric.labelNames), got \(labelValues)"
        )
        self.metric = metric
        self.labelValues = labelValues
        self.amount = amount.isFinite && amount > 0 ? amount : 0
    }
}

/// The largest amount one measurement adds: a bounded input (a forged usage figure, a price typo)
/// cannot push a counter to infinity.
let maximumMeasurementAmount = 1e12

extension WorkerMetrics {
    /// Counts business facts (or sets business gauges) after the transaction that wrote them
    /// committed.
    public func record(_ measurements: [BusinessMeasurement]) {
        for measurement in measurements {
            let labels = Array(zip(measurement.metric.labelNames, measurement.labelValues))
            let amount = min(measurement.amount, maximumMeasurementAmount)
            switch measurement.metric.kind {
            case .counter:
                registry.makeCounter(descriptor: measurement.metric.descriptor, labels: labels).increment(by: amount)
            case .gauge:
                registry.makeGauge(descriptor: measurement.metric.descriptor, labels: labels).set(measurement.amount)
            case .histogram:
                // No business histogram exists; the runtime's own are recorded by WorkerMetrics.
                break
            }
        }
    }

    /// Sets a gauge (a probe's reading), e.g. the outbox lag or the ledger audit's result.
    public func set(_ metric: MetricName, _ labelValues: [String] = [], to value: Double) {
        precondition(labelValues.count == metric.labelNames.count, "\(metric.rawValue) takes \(metric.labelNames)")
        let labels = Array(zip(metric.labelNames, labelValues))
        registry.makeGauge(descriptor: metric.descriptor, labels: labels).set(value.isFinite ? value : 0)
    }

    /// Creates the counters at zero for every combination of the given label values, so that a
    /// dashboard's `rate()` and an alert see the series before the first event.
    public func declare(_ metric: MetricName, labelSets: [[String]] = [[]]) {
        for values in labelSets where values.count == metric.labelNames.count {
            let labels = Array(zip(metric.labelNames, values))
            switch metric.kind {
            case .counter: _ = registry.makeCounter(descriptor: metric.descriptor, labels: labels)
            case .gauge: _ = registry.makeGauge(descriptor: metric.descriptor, labels: labels)
            case .histogram: break
            }
        }
    }
}

extension BusinessMeasurement {
    /// What one LLM answer cost: its prompt and completion tokens and their price in USD
    /// (`astro_llm_tokens_total{purpose, kind}`, `astro_llm_cost_usd_total{purpose}`).
    /// - Parameter purpose: `report` or `story` (anything else is `other`).
    public static func llmUsage(
        purpose: String,
        promptTokens: Int,
        completionTokens: Int,
        costUSD: Double
    ) -> [BusinessMeasurement] {
        let purpose = MetricLabel.bounded(purpose, among: MetricLabel.llmPurposes)
        return [
            BusinessMeasurement(.llmTokens, [purpose, "prompt"], amount: Double(promptTokens)),
            BusinessMeasurement(.llmTokens, [purpose, "completion"], amount: Double(completionTokens)),
            BusinessMeasurement(.llmCost, [purpose], amount: costUSD),
        ]
    }
}

extension MetricName {
    /// The name as swift-prometheus takes it: the whole name, with its help text.
    var descriptor: MetricNameDescriptor {
        MetricNameDescriptor(metricName: rawValue, unitName: "", helpText: help)
    }
}
