import AstroDomain
import Foundation

/// The prompt templates of one language (data: `KnowledgeBase/<lang>/prompts.json`): a system
/// message per area (the astrologer persona) and the user message template. Versioned: a report
/// records the version it was written with.
public struct PromptTemplates: Sendable, Decodable {
    public var version: String
    var system: [String: String]
    var user: String
    /// The persona and user message of a relationships report for two (issue 20, part 7).
    var pairSystem: String
    var pairUser: String

    /// Loads the shipped templates of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> PromptTemplates {
        guard
            let url = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue).appendingPathComponent("prompts.json")
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        do {
            return try JSONDecoder().decode(PromptTemplates.self, from: Data(contentsOf: url))
        } catch {
            throw KnowledgeBaseError(message: "\(language.rawValue)/prompts.json is not valid: \(error)")
        }
    }
}

/// A prompt for an LLM: the system and user messages, and their estimated size.
public struct ReportPrompt: Sendable, Hashable {
    public var system: String
    public var user: String
    public var version: String
    /// An upper estimate of the prompt's tokens (see `estimateTokens`).
    public var estimatedTokens: Int

    /// The most a prompt may cost (the seed's budget).
    public static let tokenBudget = 1500

    /// Builds the prompt for a chart, area and language: the area's persona, a compact chart
    /// summary, the top rules (placement and the first sentence of our reading), the language
    /// and the length. Rules are dropped from the end until the estimate fits the budget.
    public static func build(
        chart: NatalChart,
        area: ReportArea,
        language: ReportLanguage,
        base: KnowledgeBase,
        phrases: ReportPhrases,
        templates: PromptTemplates
    ) -> ReportPrompt {
        let system = templates.system[area.rawValue] ?? ""
        let selected = RuleSelection.select(chart: chart, area: area, base: base)
        var lines = selected.enumerated().map { index, rule in
            "\(index + 1). \(phrases.name(rule.factor)): \(firstSentence(rule.rule.text))"
        }
        func user(_ lines: [String]) -> String {
            templates.user
                .replacingOccurrences(of: "{area}", with: phrases.areaNames[area.rawValue] ?? area.rawValue)
                .replacingOccurrences(of: "{minWords}", with: "400")
                .replacingOccurrences(of: "{maxWords}", with: "500")
                .replacingOccurrences(of: "{chart}", with: summary(chart))
                .replacingOccurrences(of: "{rules}", with: lines.joined(separator: "\n"))
        }
        var text = user(lines)
        while estimateTokens(system) + estimateTokens(text) > tokenBudget, lines.count > 3 {
            lines.removeLast()
            text = user(lines)
        }
        return ReportPrompt(
            system: system,
            user: text,
            version: templates.version,
            estimatedTokens: estimateTokens(system) + estimateTokens(text)
        )
    }

    /// The chart in one compact line: `Sun Lib H8, Moon Tau H4, … Asc Cap, MC Sco; Sun tri Mars 0.6°, …`.
    public static func summary(_ chart: NatalChart) -> String {
        func abbreviation(_ text: String) -> String { String(text.prefix(3)) }
        let planets = chart.planets.map { planet in
            "\(planet.name.rawValue) \(abbreviation(planet.sign.rawValue)) H\(planet.house)"
                + (planet.isRetrograde ? " R" : "")
        }
        let angles = [
            "Asc \(abbreviation(ZodiacSign(longitude: chart.ascendant).rawValue))",
            "MC \(abbreviation(ZodiacSign(longitude: chart.midheaven).rawValue))",
        ]
        let aspects = chart.aspects.sorted { $0.orb < $1.orb }.prefix(12).map { aspect in
            "\(aspect.planet1.rawValue) \(abbreviation(aspect.type.rawValue).lowercased()) \(aspect.planet2.rawValue) "
                + String(format: "%.1f°", aspect.orb)
        }
        return (planets + angles).joined(separator: ", ") + "; " + aspects.joined(separator: ", ")
    }

    /// A deliberately high estimate of a text's tokens for GPT-style tokenizers: about four
    /// characters per token for Latin text and two for Cyrillic (which tokenizes worse), and
    /// never fewer than 1.4 per word.
    public static func estimateTokens(_ text: String) -> Int {
        var latin = 0
        var cyrillic = 0
        for scalar in text.unicodeScalars {
            if (0x0400...0x04FF).contains(scalar.value) { cyrillic += 1 } else { latin += 1 }
        }
        let byCharacters = Double(latin) / 4 + Double(cyrillic) / 2
        let byWords = Double(text.split(whereSeparator: \.isWhitespace).count) * 1.4
        return Int(max(byCharacters, byWords).rounded(.up))
    }

    static func firstSentence(_ text: String) -> String {
        guard let end = text.firstIndex(where: { ".!?".contains($0) }) else { return text }
        return String(text[...end])
    }
}
