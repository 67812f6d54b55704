import Foundation
import ReportService
import Reports
import WorkerRuntime

// The report-worker: consumes report.generate (published by the billing-worker once a credit is
// spent), writes the report with the built-in expert-rules writer and stores it; a report that
// cannot be written gives the credit back. Configuration: the workers' environment variables
// (README).
let status = await WorkerMain.run(name: "report-worker", defaultHTTPPort: 8082, queues: [.reportGenerate]) {
    _,
    logger in
    let writer: BuiltInReportWriter
    do {
        writer = try BuiltInReportWriter()
    } catch {
        throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
    }
    logger.info(
        "report writer ready",
        metadata: [
            "writer": "built-in",
            "knowledge_base": "\(writer.knowledgeBase(.en).version), \(writer.knowledgeBase(.uk).version)",
        ]
    )
    return [ReportGenerateHandler(writer: writer)]
}
exit(status)
