import AstroDomain
import Foundation
import Reports
import WorkerRuntime

/// The report-worker's business measurements, counted once the report's transaction committed.
enum ReportMeasurements {
    /// A report stored: by area, language and writer (`built-in` or `llm`). What its LLM answers
    /// cost is counted when they were answered (`PaidCallLedger`), not here: a report that is
    /// never stored still paid for them.
    static func written(_ request: ReportGenerateRequest, writer: String) -> [BusinessMeasurement] {
        [
            BusinessMeasurement(
                .reports,
                [
                    MetricLabel.bounded(request.area.rawValue, among: MetricLabel.creditAreas),
                    MetricLabel.bounded(request.language.rawValue, among: MetricLabel.languages),
                    MetricLabel.writer(writer),
                ]
            )
        ]
    }
}
