import AstroDomain
import Foundation

/// The words a report is assembled with, per language (data: `KnowledgeBase/<lang>/phrases.json`):
/// headings, how placements are named, and the practical recommendations of each area.
public struct ReportPhrases: Sendable, Decodable {
    struct Headings: Sendable, Decodable {
        var keyInfluences: String
        var analysis: String
        var recommendations: String
    }
    var areaNames: [String: String]
    var titles: [String: String]
    var headings: Headings
    var keyIntro: String
    var keyClosing: String
    var planets: [String: String]
    /// Ukrainian aspects take the second planet in the instrumental case ("з Сатурном").
    var planetsInstrumental: [String: String]?
    var signs: [String: String]
    var houses: [String]
    var planetInSign: String
    var planetInHouse: String
    var aspects: [String: String]
    var angles: [String: String]
    var recommendations: [String: [String]]

    /// Loads the shipped phrases of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> ReportPhrases {
        guard
            let url = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue).appendingPathComponent("phrases.json")
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        do {
            return try JSONDecoder().decode(ReportPhrases.self, from: Data(contentsOf: url))
        } catch {
            throw KnowledgeBaseError(message: "\(language.rawValue)/phrases.json is not valid: \(error)")
        }
    }

    /// How the report names a chart factor: `Saturn in Capricorn`, `Сатурн у Козерозі`.
    func name(_ factor: ChartFactor) -> String {
        switch factor {
        case .planetInSign(let planet, let sign, _):
            return fill(planetInSign, ["planet": planets[planet.rawValue] ?? planet.rawValue], sign: sign)
        case .planetInHouse(let planet, let house):
            // A house number read back from a stored chart: anything outside 1…12 is shown as it is.
            let ordinal = house >= 1 && house <= houses.count ? houses[house - 1] : "\(house)"
            return fill(planetInHouse, ["planet": planets[planet.rawValue] ?? planet.rawValue, "house": ordinal])
        case .aspect(let pair, let type, _):
            let second =
                planetsInstrumental?[pair.second.rawValue] ?? planets[pair.second.rawValue] ?? pair.second.rawValue
            return fill(
                aspects[type.rawValue] ?? "{first} {second}",
                ["first": planets[pair.first.rawValue] ?? pair.first.rawValue, "second": second]
            )
        case .angle(let angle, let sign):
            return fill(angles[angle.rawValue] ?? angle.rawValue, [:], sign: sign)
        }
    }

    private func fill(_ template: String, _ values: [String: String], sign: ZodiacSign? = nil) -> String {
        var values = values
        if let sign { values["sign"] = signs[sign.rawValue] ?? sign.rawValue }
        var text = template
        for (key, value) in values { text = text.replacingOccurrences(of: "{\(key)}", with: value) }
        // Ukrainian alternates у/в for euphony: "в" after a vowel or before one, "у" between consonants.
        while let range = text.range(of: "{in}") {
            let before = text[..<range.lowerBound].trimmingCharacters(in: .whitespaces).last
            let after = text[range.upperBound...].trimmingCharacters(in: .whitespaces).first
            let vowels = "аеєиіїоуюяАЕЄИІЇОУЮЯ"
            let preposition =
                (after.map { vowels.contains($0) } ?? false) || (before.map { vowels.contains($0) } ?? false)
                ? "в" : "у"
            text.replaceSubrange(range, with: preposition)
        }
        return text
    }
}

/// A report as written: its three sections and the full text.
public struct WrittenReport: Sendable, Hashable {
    public var title: String
    /// Two or three sentences.
    public var keyInfluences: String
    /// One paragraph per interpreted placement.
    public var analysis: [String]
    /// Three or four practical recommendations.
    public var recommendations: [String]
    /// Title, the three headed sections and their content, as stored and shown.
    public var text: String
    public var wordCount: Int
    /// The knowledge-base keys the report was written from, strongest first.
    public var ruleKeys: [String]
    /// `built-in`.
    public var writer: String
    /// The knowledge base's version: same chart, area, language and version, same report.
    public var version: String
}

/// The embedded report writer (no network): composes a 400–500 word report in the seed's three
/// sections from the rules `RuleSelection` picks, naming the chart's actual placements.
/// Deterministic for the same chart, area, language and knowledge-base version.
public struct BuiltInReportWriter: Sendable {
    public static let wordRange = 400...500
    private let bases: [ReportLanguage: KnowledgeBase]
    private let phrases: [ReportLanguage: ReportPhrases]

    /// Loads the knowledge base and phrases of every language.
    ///
    /// - Throws: `KnowledgeBaseError` when a shipped file is missing or malformed.
    public init() throws(KnowledgeBaseError) {
        var bases: [ReportLanguage: KnowledgeBase] = [:]
        var phrases: [ReportLanguage: ReportPhrases] = [:]
        for language in ReportLanguage.allCases {
            bases[language] = try KnowledgeBase.load(language)
            phrases[language] = try ReportPhrases.load(language)
        }
        self.bases = bases
        self.phrases = phrases
    }

    /// The knowledge base of a language (loaded at init).
    public func knowledgeBase(_ language: ReportLanguage) -> KnowledgeBase { bases[language]! }

    /// Writes the report of `area` for `chart` in `language`.
    public func write(chart: NatalChart, area: ReportArea, language: ReportLanguage) -> WrittenReport {
        let base = bases[language]!
        let words = phrases[language]!
        let selected = RuleSelection.select(chart: chart, area: area, base: base)
        let names = selected.map { words.name($0.factor) }
        let title = words.titles[area.rawValue] ?? area.rawValue

        // Key influences: the three strongest placements and a closing line (the rules' own words
        // follow in the analysis, so none is quoted twice).
        var intro = words.keyIntro.replacingOccurrences(of: "{area}", with: words.areaNames[area.rawValue] ?? "")
        for (slot, name) in zip(["{first}", "{second}", "{third}"], names + ["", "", ""]) {
            intro = intro.replacingOccurrences(of: slot, with: name)
        }
        let keyInfluences = [intro, words.keyClosing].filter { !$0.isEmpty }.joined(separator: " ")

        // Recommendations: four of the area's six, a choice fixed by the chart itself.
        let pool = words.recommendations[area.rawValue] ?? []
        let start = pool.isEmpty ? 0 : Int(Self.chartSeed(chart) % UInt64(pool.count))
        let rotated = pool.isEmpty ? [] : (0..<pool.count).map { pool[(start + $0) % pool.count] }
        var recommendations = Array(rotated.prefix(4))

        // Detailed analysis: placement by placement, strongest first, as long as the report stays
        // within its length.
        func assemble(_ analysis: [String], _ recommendations: [String]) -> String {
            var sections = [title, "", words.headings.keyInfluences, keyInfluences, "", words.headings.analysis]
            for (index, paragraph) in analysis.enumerated() {
                if index > 0 { sections.append("") }
                sections.append(paragraph)
            }
            sections += ["", words.headings.recommendations]
            sections += recommendations.enumerated().map { "\($0.offset + 1). \($0.element)" }
            return sections.joined(separator: "\n")
        }
        // Word counts add up piece by piece (pieces are joined by line breaks), so each candidate
        // is counted without assembling and re-reading the whole report.
        let fixedWords = Self.countWords(
            [
                title, words.headings.keyInfluences, keyInfluences, words.headings.analysis,
                words.headings.recommendations,
            ]
            .joined(separator: "\n")
        )
        func recommendationWords(_ text: String, number: Int) -> Int { Self.countWords("\(number). \(text)") }
        var total = recommendations.enumerated().reduce(fixedWords) {
            $0 + recommendationWords($1.element, number: $1.offset + 1)
        }
        var analysis: [String] = []
        var used: [SelectedRule] = []
        for (rule, name) in zip(selected, names) {
            let paragraph = Self.capitalized(name) + " — " + rule.rule.text
            let paragraphWords = Self.countWords(paragraph)
            if total + paragraphWords > Self.wordRange.upperBound { continue }
            analysis.append(paragraph)
            used.append(rule)
            total += paragraphWords
        }
        // Short rules can leave the report under length: the remaining recommendations fill it.
        for extra in rotated.dropFirst(4) where total < 400 {
            let extraWords = recommendationWords(extra, number: recommendations.count + 1)
            if total + extraWords <= Self.wordRange.upperBound {
                recommendations.append(extra)
                total += extraWords
            }
        }
        let text = assemble(analysis, recommendations)
        return WrittenReport(
            title: title,
            keyInfluences: keyInfluences,
            analysis: analysis,
            recommendations: recommendations,
            text: text,
            wordCount: total,
            ruleKeys: used.map(\.factor.key),
            writer: "built-in",
            version: base.version
        )
    }

    /// Words as a reader counts them: runs of characters between spaces and line breaks,
    /// leaving out lone punctuation such as the dash between a placement and its reading.
    public static func countWords(_ text: String) -> Int {
        // Unicode scalars, not Characters: grapheme breaking made counting most of a report's
        // cost (measured with perf under `bench e2e --type report`). ASCII is decided inline.
        var count = 0
        var wordHasLetter = false
        for scalar in text.unicodeScalars {
            let value = scalar.value
            let isSpace: Bool
            let isLetterOrDigit: Bool
            if value < 0x80 {
                isSpace = value == 0x20 || (0x09...0x0D).contains(value)
                isLetterOrDigit =
                    (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value)
            } else {
                let properties = scalar.properties
                isSpace = properties.isWhitespace
                isLetterOrDigit = !isSpace && (properties.isAlphabetic || properties.numericType != nil)
            }
            if isSpace {
                if wordHasLetter { count += 1 }
                wordHasLetter = false
            } else if isLetterOrDigit {
                wordHasLetter = true
            }
        }
        return wordHasLetter ? count + 1 : count
    }

    static func capitalized(_ text: String) -> String {
        guard let first = text.first else { return text }
        return first.uppercased() + text.dropFirst()
    }

    /// A number fixed by the chart's moment and place (FNV-1a over them).
    static func chartSeed(_ chart: NatalChart) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let text = "\(chart.julianDayUT)|\(chart.latitude)|\(chart.longitude)"
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
