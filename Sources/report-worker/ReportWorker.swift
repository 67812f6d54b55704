import Foundation
import LLMClient
import Logging
import Postgres
import ReportService
import Reports
import WorkerRuntime

/// The report-worker's wiring: consumes report.generate (published by the billing-worker once a
/// credit is spent), writes the report — through an OpenAI-compatible LLM when LLM_BASE_URL is
/// set, with the built-in expert-rules writer otherwise — and stores it; a report that cannot be
/// written gives the credit back. Configuration: the workers' environment variables plus LLM_*
/// (README).
///
/// Kept out of `main.swift` on purpose: closures written in top-level code are inferred to be
/// main-actor isolated, and one that the runtime or a logger calls on another thread traps
/// (SIGILL). Here every closure is nonisolated.
enum ReportWorker {
    /// Runs the worker until it is stopped; returns the process exit status (WorkerMain.run).
    static func run(environment: [String: String]) async -> Int32 {
        // 32 jobs in flight by default: an LLM answer takes seconds, and waiting on it holds no thread.
        await WorkerMain.run(
            name: "report-worker",
            defaultHTTPPort: 8082,
            defaultPrefetch: 32,
            queues: [.reportGenerate],
            environment: environment
        ) { context in
            try handlers(context: context, environment: environment)
        }
    }

    /// The job handlers, built from the environment.
    /// - Throws: `ConfigurationError` naming the variable (or the package resources) at fault.
    static func handlers(context: WorkerContext, environment: [String: String]) throws -> [any JobHandler] {
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
        let llm: LLMConfiguration?
        do {
            llm = try LLMConfiguration.fromEnvironment(environment)
        } catch {
            throw ConfigurationError(variable: "LLM_*", problem: "\(error)")
        }
        var setup: ReportGenerateHandler.LLMSetup?
        var writerName = "built-in"
        if let llm {
            let pricing: LLMPricing
            do {
                pricing = try LLMPricing.fromEnvironment(environment)
            } catch {
                throw ConfigurationError(variable: "LLM_PRICE_*", problem: "\(error)")
            }
            // Every call metered at once and bounded (daily budget, per-user bound).
            let paidCalls = try context.paidCallLedger(environment)
            do {
                // Charts are read in the jobs' prepare step, outside the commit transactions, on the
                // worker's own pool.
                setup = .init(
                    writer: try LLMReportWriter(
                        client: LLMClient(configuration: llm),
                        model: llm.model,
                        pricing: pricing
                    ),
                    pool: context.pool,
                    paidCalls: paidCalls
                )
            } catch {
                throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
            }
            writerName = "llm \(llm.model)"
        }
        var pairVersions = "none"
        if let pairWriter {
            pairVersions = "\(pairWriter.knowledgeBase(.en).version), \(pairWriter.knowledgeBase(.uk).version)"
        }
        logger.info(
            "report writer ready",
            metadata: [
                "writer": "\(writerName)",
                "knowledge_base": "\(writer.knowledgeBase(.en).version), \(writer.knowledgeBase(.uk).version)",
                "synastry_knowledge_base": "\(pairVersions)",
            ]
        )
        return [ReportGenerateHandler(writer: writer, pairWriter: pairWriter, llm: setup)]
    }
}
