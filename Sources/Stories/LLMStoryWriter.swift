import AstroDomain
import Foundation
import LLMClient
import Reports

/// The LLM story prompt of one language (data: `StoryKnowledgeBase/<lang>/prompt.json`): the
/// system message, the user message template, the note sent with a second request, and the
/// words the templates use for themes and growth categories. Versioned: a story records the
/// version it was written with.
public struct StoryPromptTemplates: Sendable, Decodable {
    public var version: String
    var language: String
    /// How the user template names the language (`English`, `українською мовою`).
    var languageName: String
    var system: String
    var user: String
    /// The note appended when an answer is asked for again; `{problem}` says what was wrong.
    var retry: String
    /// Theme keys of the knowledge base → the theme in words.
    var themes: [String: String]
    /// Growth categories → in words.
    var growthCategories: [String: String]

    /// What the user template may fill in.
    static let userPlaceholders: Set<String> = [
        "language", "childName", "mainCharacter", "ageGroup", "theme", "growthCategory", "pageCount", "minWords",
        "maxWords", "maxSentenceWords",
    ]
    /// What the user template must mention for the answer checks to be fair.
    static let requiredPlaceholders: Set<String> = ["language", "childName", "mainCharacter", "pageCount"]

    /// Loads the shipped prompt of `base`'s language and checks it against `base`.
    ///
    /// - Throws: `StoryKnowledgeBaseError` naming the file when it is missing or malformed, is
    ///   for another language, lacks words for a theme or growth category of `base`, or has an
    ///   unknown or missing placeholder (a broken build).
    public static func load(for base: StoryKnowledgeBase) throws(StoryKnowledgeBaseError) -> StoryPromptTemplates {
        let language = base.language.rawValue
        guard
            let url = Bundle.module.url(forResource: "StoryKnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language).appendingPathComponent("prompt.json")
        else {
            throw StoryKnowledgeBaseError("the StoryKnowledgeBase resource folder is missing from the Stories bundle")
        }
        let templates = try StoryKnowledgeBaseError.decode(
            StoryPromptTemplates.self,
            from: url,
            as: "a story prompt file"
        )
        guard templates.language == language else {
            throw StoryKnowledgeBaseError("\(language)/prompt.json is for language \(templates.language)")
        }
        if let theme = base.themes.keys.sorted().first(where: { templates.themes[$0] == nil }) {
            throw StoryKnowledgeBaseError("\(language)/prompt.json has no words for the theme \(theme)")
        }
        if let category = StoryKnowledgeBase.growthCategories.sorted().first(where: {
            templates.growthCategories[$0] == nil
        }) {
            throw StoryKnowledgeBaseError("\(language)/prompt.json has no words for the growth category \(category)")
        }
        let used = StoryPrompt.placeholders(in: templates.user)
        guard used.isSubset(of: userPlaceholders), requiredPlaceholders.isSubset(of: used) else {
            throw StoryKnowledgeBaseError(
                "\(language)/prompt.json: the user template uses {\(used.sorted().joined(separator: "}, {"))}; "
                    + "it must use {\(requiredPlaceholders.sorted().joined(separator: "}, {"))} and no others"
            )
        }
        guard StoryPrompt.placeholders(in: templates.retry) == ["problem"] else {
            throw StoryKnowledgeBaseError("\(language)/prompt.json: the retry note must use {problem} and no other")
        }
        return templates
    }
}

/// A story prompt for an LLM: the system and user messages, and their estimated size.
public struct StoryPrompt: Sendable, Hashable {
    public var system: String
    public var user: String
    public var version: String
    /// An upper estimate of the prompt's tokens (`ReportPrompt.estimateTokens`).
    public var estimatedTokens: Int

    /// The most a story prompt may cost; names are capped at 50 characters, so the templates
    /// alone decide whether it holds (a test checks every theme, age group and language).
    public static let tokenBudget = 1000

    /// `template` with each `{key}` of `values` replaced in one pass, so a name that itself
    /// contains `{pageCount}` stays as typed. Braces that name no key (the JSON example) stay.
    static func fill(_ template: String, _ values: [String: String]) -> String {
        var result = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            result += rest[..<open]
            let afterOpen = rest.index(after: open)
            if let close = rest[afterOpen...].firstIndex(of: "}"), let value = values[String(rest[afterOpen..<close])] {
                result += value
                rest = rest[rest.index(after: close)...]
            } else {
                result.append("{")
                rest = rest[afterOpen...]
            }
        }
        return result + rest
    }

    /// The `{word}` placeholders of `template` (letters only, so a JSON example is not one).
    static func placeholders(in template: String) -> Set<String> {
        var found: Set<String> = []
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            rest = rest[rest.index(after: open)...]
            if let close = rest.firstIndex(where: { !$0.isLetter }), rest[close] == "}", close > rest.startIndex {
                found.insert(String(rest[..<close]))
            }
        }
        return found
    }
}

/// Writes children's stories through an OpenAI-compatible chat-completions endpoint, from a
/// versioned prompt. The request is checked first, exactly as the built-in writer checks it.
/// The answer is checked (finished, the JSON asked for, the page count, the age group's lengths
/// and blocklist, the main character named, the asked language); a bad answer is asked for once
/// more with a note of what was wrong, then the story fails permanently.
public struct LLMStoryWriter: Sendable {
    private let client: LLMClient
    private let model: String
    private let pricing: LLMPricing
    private let bases: [ReportLanguage: StoryKnowledgeBase]
    private let templates: [ReportLanguage: StoryPromptTemplates]

    /// - Parameters:
    ///   - client: the chat-completions client (its retries cover rate limits and outages).
    ///   - model: the model the client asks, for `WrittenStory.writer` when the API names none.
    ///   - pricing: token prices, for the cost in `ReportUsage`.
    /// - Throws: `StoryKnowledgeBaseError` when the shipped knowledge base or prompt is missing
    ///   or incomplete (a broken build).
    public init(client: LLMClient, model: String, pricing: LLMPricing = .init()) throws(StoryKnowledgeBaseError) {
        self.client = client
        self.model = model
        self.pricing = pricing
        var bases: [ReportLanguage: StoryKnowledgeBase] = [:]
        var templates: [ReportLanguage: StoryPromptTemplates] = [:]
        for language in ReportLanguage.allCases {
            let base = try StoryKnowledgeBase.load(language)
            bases[language] = base
            templates[language] = try StoryPromptTemplates.load(for: base)
        }
        self.bases = bases
        self.templates = templates
    }

    /// The prompt `write` would send first for `details`.
    ///
    /// - Throws: `StoryWriterError` (permanent) for a request the built-in writer refuses too.
    public func prompt(for details: StoryRequestDetails) throws(StoryWriterError) -> StoryPrompt {
        prompt(details, try details.checked(against: bases[details.language]!))
    }

    /// Writes the story `details` asks for.
    ///
    /// - Returns: the story (`writer` is `llm:<model>`, `version` the prompt's) and the tokens
    ///   and cost of every request made for it.
    /// - Throws: `StoryWriterError`: the built-in writer's codes for a bad request (no request
    ///   is sent); `llm-<client code>` (permanent) for a refused key or request;
    ///   `llm-rejected-answer` (permanent) when two answers fail the checks; the client's code
    ///   (`rate-limited`, `server-error`, `timeout`, …, not permanent) when the API stays
    ///   unavailable after the client's retries; `paid-call-refused` when `meter` refused a call
    ///   (`StoryWriterError.paidCallRefused`: the built-in writer takes over).
    /// - Parameter meter: asked before each call and told of each answer at once (nil: none).
    public func write(
        _ details: StoryRequestDetails,
        meter: (any PaidCallMeter)? = nil
    ) async throws(StoryWriterError) -> (WrittenStory, ReportUsage) {
        let base = bases[details.language]!
        let checked = try details.checked(against: base)
        let prompt = self.prompt(details, checked)
        // Generous: Ukrainian costs up to about three tokens a word; the cap only stops a
        // runaway answer, and a cut-off one is asked for again.
        let maxTokens = checked.pageCount * checked.rules.maxWordsPerPage * 3 + 200
        var request = ChatCompletionRequest(
            messages: [.system(prompt.system), .user(prompt.user)],
            maxTokens: maxTokens,
            temperature: 0.8
        )
        var promptTokens = 0
        var completionTokens = 0
        var problem = ""
        for attempt in 0..<2 {
            if attempt > 0 {
                // The model never sees its rejected answer again: the note alone is cheaper and
                // a fresh story is wanted, not an edit of a bad one.
                request.messages.append(
                    .user(StoryPrompt.fill(templates[details.language]!.retry, ["problem": problem]))
                )
            }
            if let meter {
                let admission = await meter.admit(.story)
                guard admission == .admitted else {
                    throw StoryWriterError(
                        code: .paidCallRefused,
                        message: "the LLM call was not made (\(admission.refusalReason ?? "refused"))"
                    )
                }
            }
            let completion: ChatCompletion
            do {
                completion = try await client.complete(request)
            } catch {
                throw StoryWriterError(
                    code: error.isTransient ? ErrorCode(rawValue: error.code) : .llm(error.code),
                    message: error.description,
                    isPermanent: !error.isTransient
                )
            }
            let call = PaidCallUsage(
                purpose: .story,
                answer: completion,
                estimatedPromptTokens: request.messages.reduce(0) { $0 + ReportPrompt.estimateTokens($1.content) },
                configuredModel: model,
                pricing: pricing
            )
            // Paid whatever is done with the answer: metered before it is checked.
            await meter?.record(call)
            promptTokens += call.promptTokens
            completionTokens += call.completionTokens
            switch Self.check(completion, details: details, checked: checked, base: base) {
            case .failure(let rejection):
                problem = rejection.reason
            case .success(let answer):
                let usage = ReportUsage(
                    model: completion.model ?? model,
                    promptTokens: promptTokens,
                    completionTokens: completionTokens,
                    costUSD: pricing.cost(prompt: promptTokens, completion: completionTokens)
                )
                let story = WrittenStory(
                    title: answer.title,
                    pages: answer.pages,
                    writer: "llm:\(usage.model)",
                    version: prompt.version
                )
                return (story, usage)
            }
        }
        throw StoryWriterError(
            code: .llmRejectedAnswer,
            message: "two answers rejected; the last: \(problem)",
            isPermanent: true
        )
    }

    private func prompt(_ details: StoryRequestDetails, _ checked: CheckedStoryRequest) -> StoryPrompt {
        let templates = templates[details.language]!
        let user = StoryPrompt.fill(
            templates.user,
            [
                "language": templates.languageName,
                "childName": checked.childName,
                "mainCharacter": checked.mainCharacter,
                "ageGroup": checked.rules.label,
                "theme": templates.themes[details.theme] ?? details.theme,
                "growthCategory": templates.growthCategories[checked.theme.growthCategory]
                    ?? checked.theme.growthCategory,
                "pageCount": String(checked.pageCount),
                "minWords": String(checked.rules.minWordsPerPage),
                "maxWords": String(checked.rules.maxWordsPerPage),
                "maxSentenceWords": String(checked.rules.maxWordsPerSentence),
            ]
        )
        return StoryPrompt(
            system: templates.system,
            user: user,
            version: templates.version,
            estimatedTokens: ReportPrompt.estimateTokens(templates.system) + ReportPrompt.estimateTokens(user)
        )
    }

    // MARK: - Checking the answer

    /// The JSON the prompt asks for.
    private struct Answer: Decodable {
        var title: String
        var pages: [String]
    }

    /// Why an answer was not taken, in words for the note sent with the second request.
    private struct Rejection: Error {
        var reason: String
    }

    private static func check(
        _ completion: ChatCompletion,
        details: StoryRequestDetails,
        checked: CheckedStoryRequest,
        base: StoryKnowledgeBase
    ) -> Result<Answer, Rejection> {
        guard completion.finishReason == "stop" else {
            return .failure(
                Rejection(reason: "the answer was cut off (finish_reason \(completion.finishReason ?? "none"))")
            )
        }
        guard let parsed = parse(completion.content) else {
            return .failure(
                Rejection(reason: #"the answer is not the JSON object {"title": …, "pages": […]} asked for"#)
            )
        }
        let answer = Answer(
            title: parsed.title.trimmingCharacters(in: .whitespacesAndNewlines),
            pages: parsed.pages.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        )
        guard !answer.title.isEmpty, !answer.pages.contains(where: \.isEmpty) else {
            return .failure(Rejection(reason: "the title or a page is empty"))
        }
        guard answer.pages.count == checked.pageCount else {
            return .failure(Rejection(reason: "the story has \(answer.pages.count) pages, not \(checked.pageCount)"))
        }
        let text = ([answer.title] + answer.pages).joined(separator: "\n")
        guard LLMReportWriter.isWritten(in: details.language, text) else {
            return .failure(
                Rejection(reason: "the story is not in \(details.language == .en ? "English" : "Ukrainian")")
            )
        }
        guard names(checked.mainCharacter, in: text, language: details.language) else {
            return .failure(Rejection(reason: "the story never names the main character \(checked.mainCharacter)"))
        }
        let problems = StoryContentCheck.problems(
            title: answer.title,
            pages: answer.pages,
            ageGroup: details.ageGroup,
            base: base
        )
        guard problems.isEmpty else {
            // The first few are enough to steer the second answer and keep the note short.
            return .failure(Rejection(reason: problems.prefix(3).joined(separator: "; ")))
        }
        return .success(answer)
    }

    /// The answer's JSON; a ```json fence around it is tolerated (models add one even when told
    /// not to).
    private static func parse(_ content: String) -> Answer? {
        var text = content.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.hasPrefix("```") {
            text = String(text.drop(while: { !$0.isNewline }))
            if text.hasSuffix("```") { text.removeLast(3) }
        }
        return try? JSONDecoder().decode(Answer.self, from: Data(text.utf8))
    }

    /// Whether `text` names `name`. English keeps a name as typed (`Felix's` contains `Felix`);
    /// Ukrainian declines it (`Лисичка Фрося` → `Лисичку Фросю`, `Лисичці`), so there each word
    /// of the name must begin a word of the text without its last two letters.
    static func names(_ name: String, in text: String, language: ReportLanguage) -> Bool {
        let text = text.lowercased()
        let nameWords = name.lowercased().split(whereSeparator: { !$0.isLetter })
        guard language == .uk, !nameWords.isEmpty else { return text.contains(name.lowercased()) }
        let textWords = text.split(whereSeparator: { !$0.isLetter })
        return nameWords.allSatisfy { word in
            let stem = word.prefix(max(3, word.count - 2))
            return textWords.contains { $0.hasPrefix(stem) }
        }
    }
}
