import Foundation
import LLMClient
import Logging
import Postgres
import ReportService
import Reports
import WorkerRuntime

// The report-worker: consumes report.generate (published by the billing-worker once a credit is
// spent), writes the report — through an OpenAI-compatible LLM when LLM_BASE_URL is set, with the
// built-in expert-rules writer otherwise — and stores it; a report that cannot be written gives
// the credit back. Configuration: the workers' environment variables plus LLM_* (README).
let environment = ProcessInfo.processInfo.environment
// 32 jobs in flight by default: an LLM answer takes seconds, and waiting on it holds no thread.
let status = await WorkerMain.run(
    name: "report-worker",
    defaultHTTPPort: 8082,
    defaultPrefetch: 32,
    queues: [.reportGenerate]
) { context in
    let logger = context.logger
    let writer: BuiltInReportWriter
    do {
        writer = try BuiltInReportWriter()
    } catch {
        throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
    }
    // Reports for two need the synastry knowledge base; a build without a complete one still
    // writes every other report, and refunds requests for two (`pair-reports-unavailable`). The
    // Reports unit tests fail such a build.
    let pairWriter: PairReportWriter?
    do {
        pairWriter = try PairReportWriter()
    } catch {
        logger.error("reports for two are unavailable", metadata: ["error": "\(error)"])
        pairWriter = nil
    }
    var setup: ReportGenerateHandler.LLMSetup?
    let llm: LLMConfiguration?
    do {
        llm = try LLMConfiguration.fromEnvironment(environment)
    } catch {
        throw ConfigurationError(variable: "LLM_*", problem: "\(error)")
    }
    if let llm {
        let pricing: LLMPricing
        do {
            pricing = try LLMPricing.fromEnvironment(environment)
        } catch {
            throw ConfigurationError(variable: "LLM_PRICE_*", problem: "\(error)")
        }
        do {
            // Charts are read in the jobs' prepare step, outside the commit transactions, on the
            // worker's own pool.
            setup = .init(
                writer: try LLMReportWriter(client: LLMClient(configuration: llm), model: llm.model, pricing: pricing),
                pool: context.pool,
                paidCalls: try context.paidCallLedger(environment)
            )
        } catch {
            throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
        }
    }
    // Computed here, not in the log call's metadata: a closure there would be inferred to be
    // main-actor isolated (top-level code) and trap when the logger runs it on another thread.
    var pairVersions = "none"
    if let pairWriter {
        pairVersions = "\(pairWriter.knowledgeBase(.en).version), \(pairWriter.knowledgeBase(.uk).version)"
    }
    logger.info(
        "report writer ready",
        metadata: [
            "writer": "\(llm.map { "llm \($0.model)" } ?? "built-in")",
            "knowledge_base": "\(writer.knowledgeBase(.en).version), \(writer.knowledgeBase(.uk).version)",
            "synastry_knowledge_base": "\(pairVersions)",
        ]
    )
    return [ReportGenerateHandler(writer: writer, pairWriter: pairWriter, llm: setup)]
}
exit(status)
