import AstroDomain
import Foundation
import Testing

@testable import Reports

@Suite struct ReportPromptTests {
    static let chart: NatalChart = {
        let url = Bundle.module.url(forResource: "Fixtures/kyiv-1990-10-07", withExtension: "json")!
        return try! JSONCoding.decoder.decode(NatalChart.self, from: Data(contentsOf: url))
    }()

    static func prompt(_ area: ReportArea, _ language: ReportLanguage) throws -> ReportPrompt {
        ReportPrompt.build(
            chart: chart,
            area: area,
            language: language,
            base: try KnowledgeBase.load(language),
            phrases: try ReportPhrases.load(language),
            templates: try PromptTemplates.load(language)
        )
    }

    @Test(arguments: ReportArea.allCases, ReportLanguage.allCases)
    func promptsStayUnderTheTokenBudget(area: ReportArea, language: ReportLanguage) throws {
        let prompt = try Self.prompt(area, language)
        #expect(prompt.estimatedTokens <= ReportPrompt.tokenBudget, "\(area) \(language): \(prompt.estimatedTokens)")
        #expect(prompt.estimatedTokens > 300)
        // The chart, the language, the length and the area's rules are all in it.
        #expect(prompt.user.contains("Sun Lib H8"))
        #expect(prompt.user.contains("400") && prompt.user.contains("500"))
        #expect(prompt.user.contains(language == .en ? "in English" : "українською"))
        #expect(prompt.user.contains("1. ") && prompt.user.contains("3. "))
        #expect(!prompt.system.isEmpty)
        #expect(prompt.version == "prompts-\(language.rawValue)-v1")
    }

    @Test func eachAreaHasItsOwnPersona() throws {
        let systems = Set(try ReportArea.allCases.map { try Self.prompt($0, .en).system })
        #expect(systems.count == ReportArea.allCases.count)
        #expect(try Self.prompt(.health, .en).system.contains("never diagnose"))
        #expect(try Self.prompt(.career, .uk).user.contains("Середина неба (MC) у Скорпіоні"))
    }

    @Test func theEstimateIsConservative() {
        // 100 English words of 5 letters: about 125 real tokens; the estimate may not be lower.
        let english = Array(repeating: "words", count: 100).joined(separator: " ")
        #expect(ReportPrompt.estimateTokens(english) >= 140)
        // Cyrillic costs more per character than Latin.
        #expect(ReportPrompt.estimateTokens("слово слово слово") > ReportPrompt.estimateTokens("words words words"))
    }
}
