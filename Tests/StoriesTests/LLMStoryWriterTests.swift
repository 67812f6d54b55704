import AstroDomain
import Foundation
import LLMClient
import LLMFake
import Reports
import Testing

@testable import Stories

/// Stories written through an OpenAI-compatible endpoint (the local fake): the request checks,
/// the prompt, the answer checks with one more request for a bad answer, API errors, usage and
/// cost. Good answers are built-in stories as JSON: they pass every check by construction.
@Suite(.timeLimit(.minutes(1)))
struct LLMStoryWriterTests {
    static let key = "sk-test-\(UUID().uuidString)"
    static let model = "test-model"
    static let pricing = LLMPricing(inputPerMillionUSD: 2, outputPerMillionUSD: 8)
    static let builtIn = try! BuiltInStoryWriter()

    static let requests: [ReportLanguage: StoryRequestDetails] = [
        .en: StoryRequestDetails(
            childName: "Mia",
            ageGroup: .preschool,
            theme: "courage",
            mainCharacter: "Felix the Fox",
            language: .en
        ),
        .uk: StoryRequestDetails(
            childName: "Оленка",
            ageGroup: .elementary,
            theme: "friendship",
            mainCharacter: "Лисичка Фрося",
            language: .uk
        ),
    ]

    /// A well-formed answer: the built-in story for `details`, as the JSON the prompt asks for.
    static func answer(_ details: StoryRequestDetails, edit: (inout WrittenStory) -> Void = { _ in }) -> String {
        var story = try! builtIn.write(details)
        edit(&story)
        let object: [String: Any] = ["title": story.title, "pages": story.pages]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// A fake whose unscripted answers are `answer`.
    static func fake(answering answer: String) throws -> OpenAIFake {
        try OpenAIFake(apiKey: key, defaultResponder: { _ in answer })
    }

    static func writer(_ fake: OpenAIFake, attempts: Int = 1) throws -> LLMStoryWriter {
        let configuration = try LLMConfiguration(
            baseURL: fake.baseURL,
            model: model,
            apiKey: key,
            requestTimeout: .seconds(30),
            retryPolicy: .init(
                maxAttempts: attempts,
                baseDelay: .milliseconds(10),
                maxDelay: .milliseconds(40),
                deadline: .seconds(60)
            )
        )
        return try LLMStoryWriter(client: LLMClient(configuration: configuration), model: model, pricing: pricing)
    }

    /// The error `write` threw, or nil when it wrote a story.
    static func writeError(_ writer: LLMStoryWriter, _ details: StoryRequestDetails) async -> StoryWriterError? {
        do {
            _ = try await writer.write(details)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: ReportLanguage.allCases)
    func aGoodAnswerIsTheStoryWithItsTokensAndCost(language: ReportLanguage) async throws {
        let details = Self.requests[language]!
        let answer = Self.answer(details)
        let fake = try Self.fake(answering: answer)
        defer { fake.stop() }
        let writer = try Self.writer(fake)
        let (story, usage) = try await writer.write(details)

        let expected = try Self.builtIn.write(details)
        #expect(story.title == expected.title)
        #expect(story.pages == expected.pages)
        #expect(story.pages.count == Self.builtIn.knowledgeBase(language).ageRules[details.ageGroup]!.defaultPages)
        #expect(story.writer == "llm:test-model")
        #expect(story.version == "story-prompt-\(language.rawValue)-v1")

        #expect(fake.requestCount == 1)
        let prompt = try writer.prompt(for: details)
        #expect(fake.lastRequestMessages == [.system(prompt.system), .user(prompt.user)])
        // Room for the longest pages the age group allows at two tokens a word.
        let rules = Self.builtIn.knowledgeBase(language).ageRules[details.ageGroup]!
        #expect((fake.lastRequestMaxTokens ?? 0) >= story.pages.count * rules.maxWordsPerPage * 2)
        #expect(usage.model == "test-model")
        #expect(usage.promptTokens == OpenAIFake.estimatedPromptTokens(fake.lastRequestMessages))
        #expect(usage.completionTokens == OpenAIFake.estimatedTokens(answer))
        #expect(usage.costUSD == (Decimal(usage.promptTokens) * 2 + Decimal(usage.completionTokens) * 8) / 1_000_000)
        #expect(usage.costUSD > 0)
    }

    @Test func anAnswerFencedAsJSONIsAccepted() async throws {
        let details = Self.requests[.en]!
        let fake = try Self.fake(answering: "```json\n\(Self.answer(details))\n```")
        defer { fake.stop() }
        let (story, _) = try await Self.writer(fake).write(details)
        #expect(story.pages == (try Self.builtIn.write(details)).pages)
        #expect(fake.requestCount == 1)
    }

    @Test func theWrongPageCountIsAskedForAgainWithANoteAndTheTokensAreSummed() async throws {
        let details = Self.requests[.en]!
        let good = Self.answer(details)
        let short = Self.answer(details) { $0.pages.removeLast() }
        let fake = try Self.fake(answering: good)
        defer { fake.stop() }
        fake.enqueue(.success(content: short))
        let writer = try Self.writer(fake)
        let (story, usage) = try await writer.write(details)

        #expect(story.pages.count == 5)
        #expect(fake.requestCount == 2)
        let prompt = try writer.prompt(for: details)
        let second = fake.lastRequestMessages
        #expect(second.map(\.role) == ["system", "user", "user"])
        #expect(Array(second.prefix(2)) == [.system(prompt.system), .user(prompt.user)])
        #expect(second.last?.content.contains("the story has 4 pages, not 5") == true)
        let first = Array(second.prefix(2))
        #expect(
            usage.promptTokens == OpenAIFake.estimatedPromptTokens(first) + OpenAIFake.estimatedPromptTokens(second)
        )
        #expect(usage.completionTokens == OpenAIFake.estimatedTokens(short) + OpenAIFake.estimatedTokens(good))
        #expect(usage.costUSD == (Decimal(usage.promptTokens) * 2 + Decimal(usage.completionTokens) * 8) / 1_000_000)
    }

    @Test func twoBadAnswersAreARejectedAnswerForGood() async throws {
        let fake = try Self.fake(answering: "Once upon a time there was a fox. The end.")
        defer { fake.stop() }
        let error = await Self.writeError(try Self.writer(fake), Self.requests[.en]!)
        #expect(error?.code == "llm-rejected-answer")
        #expect(error?.isPermanent == true)
        #expect(error?.message.contains("not the JSON object") == true)
        #expect(fake.requestCount == 2)
    }

    @Test func aStoryWithoutTheMainCharacterIsRejected() async throws {
        let details = Self.requests[.en]!
        let renamed = Self.answer(details) { story in
            story.title = story.title.replacingOccurrences(of: "Felix the Fox", with: "Bruno the Bear")
            story.pages = story.pages.map { $0.replacingOccurrences(of: "Felix the Fox", with: "Bruno the Bear") }
        }
        let fake = try Self.fake(answering: renamed)
        defer { fake.stop() }
        let error = await Self.writeError(try Self.writer(fake), details)
        #expect(error?.code == "llm-rejected-answer")
        #expect(error?.message.contains("never names the main character Felix the Fox") == true)
        #expect(fake.requestCount == 2)
    }

    @Test func aBlockedWordIsRejected() async throws {
        let details = Self.requests[.en]!
        let fake = try Self.fake(answering: Self.answer(details) { $0.title += " and the Ghost" })
        defer { fake.stop() }
        let error = await Self.writeError(try Self.writer(fake), details)
        #expect(error?.code == "llm-rejected-answer")
        #expect(error?.isPermanent == true)
        #expect(error?.message.contains(#"the title contains "ghost""#) == true)
        // The note asking again said what was wrong.
        #expect(fake.lastRequestMessages.last?.content.contains(#""ghost""#) == true)
        #expect(fake.requestCount == 2)
    }

    @Test func anEnglishAnswerToAUkrainianRequestIsRejected() async throws {
        var details = Self.requests[.uk]!
        details.language = .en
        // The same names and length, in English: only the language is wrong.
        let english = Self.answer(details)
        details.language = .uk
        let fake = try Self.fake(answering: english)
        defer { fake.stop() }
        let error = await Self.writeError(try Self.writer(fake), details)
        #expect(error?.code == "llm-rejected-answer")
        #expect(error?.message.contains("not in Ukrainian") == true)
        #expect(fake.requestCount == 2)
    }

    @Test func aTruncatedAnswerIsAskedForAgain() async throws {
        let details = Self.requests[.uk]!
        let good = Self.answer(details)
        let fake = try Self.fake(answering: good)
        defer { fake.stop() }
        fake.enqueue(.truncated(content: String(good.prefix(200))))
        let (story, usage) = try await Self.writer(fake).write(details)
        #expect(story.pages == (try Self.builtIn.write(details)).pages)
        #expect(fake.requestCount == 2)
        #expect(fake.lastRequestMessages.last?.content.contains("finish_reason length") == true)
        #expect(
            usage.completionTokens == OpenAIFake.estimatedTokens(String(good.prefix(200)))
                + OpenAIFake.estimatedTokens(good)
        )
    }

    @Test func aRefusedKeyIsPermanentAfterOneRequest() async throws {
        let fake = try Self.fake(answering: Self.answer(Self.requests[.en]!))
        defer { fake.stop() }
        fake.enqueue(.unauthorized)
        let error = await Self.writeError(try Self.writer(fake, attempts: 3), Self.requests[.en]!)
        #expect(error?.code == "llm-unauthorized")
        #expect(error?.isPermanent == true)
        #expect(fake.requestCount == 1)
    }

    @Test func rateLimitsBeyondTheClientsRetriesAreTransient() async throws {
        let fake = try Self.fake(answering: Self.answer(Self.requests[.en]!))
        defer { fake.stop() }
        fake.enqueue(.rateLimited(retryAfter: nil), count: 2)
        let error = await Self.writeError(try Self.writer(fake, attempts: 2), Self.requests[.en]!)
        #expect(error?.code == "rate-limited")
        #expect(error?.isPermanent == false)
        #expect(fake.requestCount == 2)
    }

    @Test func anInvalidRequestFailsWithoutAnyRequest() async throws {
        let fake = try Self.fake(answering: Self.answer(Self.requests[.en]!))
        defer { fake.stop() }
        let writer = try Self.writer(fake)
        var unknownTheme = Self.requests[.en]!
        unknownTheme.theme = "dragons"
        var tooLong = Self.requests[.en]!
        tooLong.pageCount = 12
        var blockedName = Self.requests[.uk]!
        blockedName.mainCharacter = "Зомбі Петро"
        let cases = [
            (unknownTheme, "unknown-theme"), (tooLong, "invalid-page-count"), (blockedName, "unsuitable-content"),
        ]
        for (details, code) in cases {
            let error = await Self.writeError(writer, details)
            #expect(error?.code == code)
            #expect(error?.isPermanent == true)
        }
        #expect(fake.requestCount == 0)
    }

    @Test(arguments: ReportLanguage.allCases)
    func everyPromptNamesTheChildTheCharacterAndThePagesWithinTheBudget(language: ReportLanguage) throws {
        let fake = try Self.fake(answering: "")
        defer { fake.stop() }
        let writer = try Self.writer(fake)
        // Names at the 50-character limit: the most a request can add to the templates.
        let child = String(String(repeating: language == .en ? "Annabelle " : "Соломійка ", count: 5).prefix(49)) + "X"
        let hero = String(String(repeating: language == .en ? "Bartholomew " : "Ведмедику ", count: 5).prefix(49)) + "Y"
        #expect(child.count == 50 && hero.count == 50)
        let base = Self.builtIn.knowledgeBase(language)
        #expect(base.themes.count == 8)
        var largest = 0
        for theme in base.themes.keys.sorted() {
            for age in StoryAgeGroup.allCases {
                let pages = base.ageRules[age]!.defaultPages
                let prompt = try writer.prompt(
                    for: StoryRequestDetails(
                        childName: child,
                        ageGroup: age,
                        theme: theme,
                        mainCharacter: hero,
                        language: language
                    )
                )
                let context = "\(language) \(theme) \(age)"
                #expect(prompt.user.contains(child) && prompt.user.contains(hero), "\(context)")
                let pageCount = language == .en ? "Exactly \(pages) pages" : "рівно \(pages)."
                #expect(prompt.user.contains(pageCount), "\(context)")
                #expect(StoryPrompt.placeholders(in: prompt.user).isEmpty, "\(context): a placeholder was left")
                #expect(prompt.user.contains(language == .en ? "in English" : "українською мовою"), "\(context)")
                #expect(
                    prompt.estimatedTokens
                        == ReportPrompt.estimateTokens(prompt.system) + ReportPrompt.estimateTokens(prompt.user)
                )
                #expect(prompt.estimatedTokens <= StoryPrompt.tokenBudget, "\(context): \(prompt.estimatedTokens)")
                largest = max(largest, prompt.estimatedTokens)
            }
        }
        #expect(largest > 200, "the estimate counts the whole prompt")
        #expect(fake.requestCount == 0)
    }

    @Test func namesAreFoundDeclinedInUkrainianAndAsTypedInEnglish() {
        #expect(LLMStoryWriter.names("Лисичка Фрося", in: "Оленка бачить Лисичку Фросю.", language: .uk))
        #expect(LLMStoryWriter.names("Лисичка Фрося", in: "Поруч із Лисичці Фросею", language: .uk))
        #expect(!LLMStoryWriter.names("Лисичка Фрося", in: "Оленка бачить Лисичку.", language: .uk))
        #expect(LLMStoryWriter.names("Felix the Fox", in: "felix the fox's lantern", language: .en))
        #expect(!LLMStoryWriter.names("Felix the Fox", in: "Felix runs.", language: .en))
    }

    @Test func aNameThatLooksLikeAPlaceholderStaysAsTyped() throws {
        let fake = try Self.fake(answering: "")
        defer { fake.stop() }
        var details = Self.requests[.en]!
        details.childName = "{pageCount}"
        let prompt = try Self.writer(fake).prompt(for: details)
        #expect(prompt.user.contains("Reader: {pageCount}, age group"))
    }
}
