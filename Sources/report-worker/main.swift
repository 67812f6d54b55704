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
) { configuration, logger in
    let writer: BuiltInReportWriter
    do {
        writer = try BuiltInReportWriter()
    } catch {
        throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
    }
    var setup: ReportGenerateHandler.LLMSetup?
    let llm: LLMConfiguration?
    do {
        llm = try LLMConfiguration.fromEnvironment(environment)
    } catch {
        throw ConfigurationError(variable: "LLM_*", problem: "\(error)")
    }
    if let llm {
        func price(_ name: String) throws -> Decimal {
            guard let text = environment[name], !text.isEmpty else { return 0 }
            guard let value = Decimal(string: text), value >= 0 else {
                throw ConfigurationError(
                    variable: name,
                    problem: "expected a price in USD per million tokens, got \(text)"
                )
            }
            return value
        }
        let pricing = LLMPricing(
            inputPerMillionUSD: try price("LLM_PRICE_INPUT_PER_1M_USD"),
            outputPerMillionUSD: try price("LLM_PRICE_OUTPUT_PER_1M_USD")
        )
        // Charts are read in the jobs' prepare step, outside the commit transactions.
        let pool = PostgresPool(
            configuration: configuration.database,
            options: .init(maxConnections: 4, acquireTimeout: configuration.databaseAcquireTimeout),
            logger: logger
        )
        do {
            setup = .init(
                writer: try LLMReportWriter(client: LLMClient(configuration: llm), model: llm.model, pricing: pricing),
                pool: pool
            )
        } catch {
            throw ConfigurationError(variable: "(package resources)", problem: "\(error)")
        }
    }
    logger.info(
        "report writer ready",
        metadata: [
            "writer": "\(llm.map { "llm \($0.model)" } ?? "built-in")",
            "knowledge_base": "\(writer.knowledgeBase(.en).version), \(writer.knowledgeBase(.uk).version)",
        ]
    )
    return [ReportGenerateHandler(writer: writer, llm: setup)]
}
exit(status)
