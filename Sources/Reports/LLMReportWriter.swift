import AstroDomain
import Foundation
import LLMClient

/// What an LLM-written report cost.
public struct ReportUsage: Sendable, Hashable {
    public var model: String
    public var promptTokens: Int
    public var completionTokens: Int
    public var costUSD: Decimal

    public init(model: String, promptTokens: Int, completionTokens: Int, costUSD: Decimal) {
        self.model = model
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.costUSD = costUSD
    }
}

/// Why a report could not be written; `isPermanent` decides between a retry of the job and a
/// refund.
public struct ReportWriterError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `llm-unauthorized`, `llm-bad-request`, `llm-rejected-answer`, or the LLM client's code for
    /// transient failures (`rate-limited`, `server-error`, `timeout`, …).
    public var code: String
    public var message: String
    public var isPermanent: Bool
    /// Set when no call was made because the meter refused it (the daily budget or the user's
    /// bound): the caller's built-in writer takes over.
    public var refusal: PaidCallAdmission?
    public var description: String { "\(code): \(message)" }

    init(code: ErrorCode, message: String, isPermanent: Bool, refusal: PaidCallAdmission? = nil) {
        self.code = code.rawValue
        self.message = message
        self.isPermanent = isPermanent
        self.refusal = refusal
    }

    /// The error of a call `meter` did not admit (`paid-call-refused`, permanent).
    static func refused(_ admission: PaidCallAdmission) -> ReportWriterError {
        ReportWriterError(
            code: .paidCallRefused,
            message: "the LLM call was not made (\(admission.refusalReason ?? "refused"))",
            isPermanent: true,
            refusal: admission
        )
    }
}

/// Token prices of the configured model, for the cost stored with each report.
public struct LLMPricing: Sendable, Hashable {
    public var inputPerMillionUSD: Decimal
    public var outputPerMillionUSD: Decimal

    public init(inputPerMillionUSD: Decimal = 0, outputPerMillionUSD: Decimal = 0) {
        self.inputPerMillionUSD = inputPerMillionUSD
        self.outputPerMillionUSD = outputPerMillionUSD
    }

    /// The price in USD of `prompt` input tokens and `completion` output tokens.
    public func cost(prompt: Int, completion: Int) -> Decimal {
        (Decimal(prompt) * inputPerMillionUSD + Decimal(completion) * outputPerMillionUSD) / 1_000_000
    }
}

extension PaidCallUsage {
    /// What one answered chat completion cost: the tokens the API counted, or estimates where it
    /// counted none (`estimatedPromptTokens`, and the answer's own length), priced by `pricing`;
    /// the model the API names, or `configuredModel`. The report and story writers meter every
    /// answer with it before checking it, since the call is paid whatever is done with the answer.
    public init(
        purpose: PaidPurpose,
        answer: ChatCompletion,
        estimatedPromptTokens: Int,
        configuredModel: String,
        pricing: LLMPricing
    ) {
        let prompt = answer.promptTokens ?? estimatedPromptTokens
        let completion = answer.completionTokens ?? ReportPrompt.estimateTokens(answer.content)
        self.init(
            purpose: purpose,
            model: answer.model ?? configuredModel,
            promptTokens: prompt,
            completionTokens: completion,
            costUSD: pricing.cost(prompt: prompt, completion: completion)
        )
    }
}

/// Writes reports through an OpenAI-compatible chat-completions endpoint, following the seed's
/// prompt templates. The answer is checked (finished, not truncated; 300–700 words; in the asked
/// language); a bad answer is asked for once more, then the report fails permanently.
public struct LLMReportWriter: Sendable {
    private let client: LLMClient
    private let model: String
    private let pricing: LLMPricing
    private let bases: [ReportLanguage: KnowledgeBase]
    private let phrases: [ReportLanguage: ReportPhrases]
    private let templates: [ReportLanguage: PromptTemplates]
    private let pairPhrases: [ReportLanguage: PairPhrases]
    private let pairOverlays: [ReportLanguage: PairOverlays]

    /// - Throws: `KnowledgeBaseError` when the shipped data is missing (a broken build).
    public init(client: LLMClient, model: String, pricing: LLMPricing = .init()) throws(KnowledgeBaseError) {
        self.client = client
        self.model = model
        self.pricing = pricing
        var bases: [ReportLanguage: KnowledgeBase] = [:]
        var phrases: [ReportLanguage: ReportPhrases] = [:]
        var templates: [ReportLanguage: PromptTemplates] = [:]
        var pairPhrases: [ReportLanguage: PairPhrases] = [:]
        var pairOverlays: [ReportLanguage: PairOverlays] = [:]
        for language in ReportLanguage.allCases {
            pairPhrases[language] = try PairPhrases.load(language)
            pairOverlays[language] = try PairOverlays.load(language)
            bases[language] = try KnowledgeBase.load(language)
            phrases[language] = try ReportPhrases.load(language)
            templates[language] = try PromptTemplates.load(language)
        }
        self.bases = bases
        self.phrases = phrases
        self.templates = templates
        self.pairPhrases = pairPhrases
        self.pairOverlays = pairOverlays
    }

    /// The words an answer must have: the prompt asks for 400–500; models miscount a little.
    public static let acceptedWords = 300...700

    /// Writes the report of `area` for `chart` in `language`.
    ///
    /// - Parameter meter: asked before each LLM call and told of each answer at once (nil: no
    ///   metering, as in tools and tests).
    /// - Throws: `ReportWriterError`; permanent for a rejected key or request and for an answer
    ///   that fails the checks twice, transient for rate limits, outages and timeouts;
    ///   `paid-call-refused` (with `refusal`) when the meter refused a call.
    public func write(
        chart: NatalChart,
        area: ReportArea,
        language: ReportLanguage,
        meter: (any PaidCallMeter)? = nil
    ) async throws(ReportWriterError) -> (WrittenReport, ReportUsage) {
        let prompt = ReportPrompt.build(
            chart: chart,
            area: area,
            language: language,
            base: bases[language]!,
            phrases: phrases[language]!,
            templates: templates[language]!
        )
        return try await complete(
            prompt,
            language: language,
            title: phrases[language]!.titles[area.rawValue] ?? area.rawValue,
            meter: meter
        )
    }

    /// Writes the relationships report of two people (A = the report's profile) from both charts,
    /// their synastry and compatibility score, with the pair prompt of `language`.
    ///
    /// - Throws: `ReportWriterError`, as `write(chart:area:language:meter:)`.
    public func writePair(
        chartA: NatalChart,
        chartB: NatalChart,
        synastry: Synastry,
        score: CompatibilityScore,
        couple: ReportCouple,
        language: ReportLanguage,
        meter: (any PaidCallMeter)? = nil
    ) async throws(ReportWriterError) -> (WrittenReport, ReportUsage) {
        let words = pairPhrases[language]!
        let prompt = ReportPrompt.buildPair(
            chartA: chartA,
            chartB: chartB,
            synastry: synastry,
            score: score,
            couple: couple,
            language: language,
            phrases: words,
            templates: templates[language]!,
            overlays: pairOverlays[language]!
        )
        return try await complete(
            prompt,
            language: language,
            title: words.fill(words.title, ["a": couple.nameA, "b": couple.nameB]),
            meter: meter
        )
    }

    /// Asks for the report (once more after a bad answer) and checks the answer.
    private func complete(
        _ prompt: ReportPrompt,
        language: ReportLanguage,
        title: String,
        meter: (any PaidCallMeter)?
    ) async throws(ReportWriterError) -> (WrittenReport, ReportUsage) {
        let request = ChatCompletionRequest(
            messages: [.system(prompt.system), .user(prompt.user)],
            maxTokens: 1400,
            temperature: 0.7
        )
        var promptTokens = 0
        var completionTokens = 0
        var problem = ""
        for _ in 0..<2 {
            if let meter {
                let admission = await meter.admit(.report)
                guard admission == .admitted else { throw .refused(admission) }
            }
            let completion: ChatCompletion
            do {
                completion = try await client.complete(request)
            } catch {
                throw ReportWriterError(
                    code: error.isTransient ? ErrorCode(rawValue: error.code) : .llm(error.code),
                    message: error.description,
                    isPermanent: !error.isTransient
                )
            }
            let call = PaidCallUsage(
                purpose: .report,
                answer: completion,
                estimatedPromptTokens: prompt.estimatedTokens,
                configuredModel: model,
                pricing: pricing
            )
            // Paid whatever is done with the answer: metered before it is checked.
            await meter?.record(call)
            promptTokens += call.promptTokens
            completionTokens += call.completionTokens
            let text = completion.content.trimmingCharacters(in: .whitespacesAndNewlines)
            let words = BuiltInReportWriter.countWords(text)
            if completion.finishReason != "stop" {
                problem = "the answer was cut off (finish_reason \(completion.finishReason ?? "none"))"
            } else if !Self.acceptedWords.contains(words) {
                problem = "the answer has \(words) words"
            } else if !Self.isWritten(in: language, text) {
                problem = "the answer is not in \(language == .en ? "English" : "Ukrainian")"
            } else {
                let usage = ReportUsage(
                    model: completion.model ?? model,
                    promptTokens: promptTokens,
                    completionTokens: completionTokens,
                    costUSD: pricing.cost(prompt: promptTokens, completion: completionTokens)
                )
                let report = WrittenReport(
                    title: title,
                    keyInfluences: "",
                    analysis: [],
                    recommendations: [],
                    text: text,
                    wordCount: words,
                    ruleKeys: [],
                    writer: "llm:\(usage.model)",
                    version: prompt.version
                )
                return (report, usage)
            }
        }
        throw ReportWriterError(code: .llmRejectedAnswer, message: problem + ", twice", isPermanent: true)
    }

    /// Whether `text` is in `language`. English: Latin letters; Ukrainian: Cyrillic with
    /// Ukrainian letters and none that only Russian has.
    public static func isWritten(in language: ReportLanguage, _ text: String) -> Bool {
        let letters = text.lowercased().unicodeScalars.filter { CharacterSet.letters.contains($0) }
        guard !letters.isEmpty else { return false }
        let cyrillic = letters.filter { (0x0400...0x04FF).contains($0.value) }.count
        let share = Double(cyrillic) / Double(letters.count)
        switch language {
        case .en:
            return share < 0.05
        case .uk:
            let lower = text.lowercased()
            return share > 0.8 && lower.contains { "іїє".contains($0) } && !lower.contains { "ыэъё".contains($0) }
        }
    }
}
