import AstroDomain
import Foundation
import Reports
import WorkerRuntime

/// The report-worker's business measurements, counted once the report's transaction committed.
enum ReportMeasurements {
    /// A report stored: by area, language and writer (`built-in` or `llm`), and what its LLM
    /// answer cost when an LLM wrote it.
    static func written(_ request: ReportGenerateRequest, writer: String, usage: ReportUsage?) -> [BusinessMeasurement]
    {
        var measurements = [
            BusinessMeasurement(
                .reports,
                [
                    MetricLabel.bounded(request.area.rawValue, among: MetricLabel.creditAreas),
                    MetricLabel.bounded(request.language.rawValue, among: MetricLabel.languages),
                    MetricLabel.writer(writer),
                ]
            )
        ]
        if let usage {
            measurements += BusinessMeasurement.llmUsage(
                purpose: "report",
                promptTokens: usage.promptTokens,
                completionTokens: usage.completionTokens,
                costUSD: NSDecimalNumber(decimal: usage.costUSD).doubleValue
            )
        }
        return measurements
    }
}
