import AstroDomain
import Foundation
import LLMClient
import Logging
import Postgres
import Reports
import Stories
import StoryIllustration
import StoryService
import WorkerRuntime

/// The story-worker's wiring (Magical Stories): consumes story.generate, story.illustrate,
/// story.read, story.erase-illustrations and user.export. Stories are written by the built-in
/// writer, or through an OpenAI-compatible LLM when LLM_BASE_URL is set; pages are drawn by the
/// built-in illustrator (PNG, or SVG with BUILTIN_ILLUSTRATION_FORMAT=svg), or through an
/// OpenAI-compatible images API when IMAGE_BASE_URL is set; images are stored under STORY_STORAGE_ROOT. Configuration: the workers' environment
/// variables plus these (README).
///
/// Kept out of `main.swift` on purpose: closures written in top-level code are inferred to be
/// main-actor isolated, and one that the runtime or a logger calls on another thread traps
/// (SIGILL). Here every closure is nonisolated.
enum StoryWorker {
    /// Runs the worker until it is stopped; returns the process exit status (WorkerMain.run).
    static func run(environment: [String: String]) async -> Int32 {
        // 32 jobs in flight by default: an image or an LLM answer takes seconds, and waiting holds
        // no thread.
        await WorkerMain.run(
            name: "story-worker",
            defaultHTTPPort: 8084,
            defaultPrefetch: 32,
            queues: [.storyGenerate, .storyIllustrate, .storyRead, .storyEraseIllustrations, .userExport],
            environment: environment
        ) { context in
            try handlers(context: context, environment: environment)
        }
    }

    /// The job handlers, built from the environment.
    /// - Throws: `ConfigurationError` naming the variable (or the package resources) at fault.
    static func handlers(context: WorkerContext, environment: [String: String]) throws -> [any JobHandler] {
        let logger = context.logger
        func setting<T>(_ variable: String, _ load: () throws -> T) throws -> T {
            do {
                return try load()
            } catch {
                throw ConfigurationError(variable: variable, problem: "\(error)")
            }
        }
        let writer = try setting("(package resources)") { try BuiltInStoryWriter() }
        let rules = try setting("(package resources)") { try AchievementRuleBook.load() }

        var llmWriter: LLMStoryWriter?
        if let llm = try setting("LLM_*", { try LLMConfiguration.fromEnvironment(environment) }) {
            let pricing = try setting("LLM_PRICE_*") { try LLMPricing.fromEnvironment(environment) }
            llmWriter = try setting("(package resources)") {
                try LLMStoryWriter(client: LLMClient(configuration: llm), model: llm.model, pricing: pricing)
            }
        }

        var builtInFormat = BuiltInIllustrator.Format.png
        if let text = environment["BUILTIN_ILLUSTRATION_FORMAT"], !text.isEmpty {
            guard let format = BuiltInIllustrator.Format(rawValue: text) else {
                throw ConfigurationError(
                    variable: "BUILTIN_ILLUSTRATION_FORMAT",
                    problem: "expected png or svg, got \(InputQuote.short(text))"
                )
            }
            builtInFormat = format
        }
        // One built-in illustrator: the pages' drawer without an images API, else its fallback.
        let builtIn = try setting("(package resources)") { try BuiltInIllustrator(format: builtInFormat) }
        let illustrator: any StoryIllustrator
        var pricePerImage = 0.0
        if let images = try setting("IMAGE_*", { try ImageConfiguration.fromEnvironment(environment) }) {
            illustrator = ImageAPIIllustrator(client: ImageClient(configuration: images))
            // The images API reports no usage: its pictures are priced per picture, for the metrics.
            if let text = environment["IMAGE_PRICE_PER_IMAGE_USD"], !text.isEmpty {
                guard let price = Double(text), price.isFinite, (0...100).contains(price) else {
                    throw ConfigurationError(
                        variable: "IMAGE_PRICE_PER_IMAGE_USD",
                        problem: "expected a price in USD from 0 to 100, got \(InputQuote.short(text))"
                    )
                }
                pricePerImage = price
            }
        } else {
            illustrator = builtIn
        }
        var rootText = "story-illustrations"
        if let text = environment["STORY_STORAGE_ROOT"], !text.isEmpty { rootText = text }
        let storage = try setting("STORY_STORAGE_ROOT") {
            try IllustrationStorage(root: URL(fileURLWithPath: rootText, isDirectory: true))
        }
        var lease = Duration.seconds(600)
        if let text = environment["ILLUSTRATION_CLAIM_LEASE_SECONDS"], !text.isEmpty {
            guard let seconds = Int(text), (10...86_400).contains(seconds) else {
                throw ConfigurationError(
                    variable: "ILLUSTRATION_CLAIM_LEASE_SECONDS",
                    problem: "expected whole seconds from 10 to 86400, got \(InputQuote.short(text))"
                )
            }
            lease = .seconds(seconds)
        }

        // Child profiles (story.generate) and page states (story.illustrate) are read and written in
        // the jobs' prepare step, outside the commit transactions, on the worker's own pool.
        let pool = context.pool
        // Every LLM call and picture metered at once and bounded (daily budgets, per-user bounds).
        let paidCalls = try context.paidCallLedger(environment)
        logger.info(
            "story worker ready",
            metadata: [
                "writer": "\(llmWriter == nil ? "built-in" : "llm")",
                "illustrator": "\(illustrator.name)",
                "builtin_illustration_format": "\(builtIn.format.rawValue)",
                "storage_root": "\(storage.root.path)",
                "knowledge_base": "\(writer.knowledgeBase(.en).version), \(writer.knowledgeBase(.uk).version)",
                "achievement_rules": "\(rules.version)",
            ]
        )
        return [
            StoryGenerateHandler(writer: writer, llm: llmWriter, pool: pool, paidCalls: paidCalls),
            StoryIllustrateHandler(
                pool: pool,
                illustrator: illustrator,
                storage: storage,
                claimLease: lease,
                logger: logger,
                pricePerImageUSD: pricePerImage,
                paidCalls: paidCalls,
                fallback: builtIn
            ),
            StoryReadHandler(rules: rules),
            EraseIllustrationsHandler(pool: pool, storage: storage),
            UserExportFilesHandler(
                pool: pool,
                storage: storage,
                maxBytes: try setting("USER_EXPORT_MAX_BYTES") {
                    try UserExport.setting(
                        "USER_EXPORT_MAX_BYTES",
                        in: environment,
                        range: UserExport.maxBytesRange,
                        default: UserExport.defaultMaxBytes
                    )
                }
            ),
        ]
    }
}
