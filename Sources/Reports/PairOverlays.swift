import AstroDomain
import Foundation

/// The words of the house-overlay section of a report for two, per language (data:
/// `KnowledgeBase/<lang>/overlay-phrases.json`). Like the inter-aspect headings, a name is never
/// declined: English "Oleh's 7th house", Ukrainian "7-му будинку (Олег)".
public struct OverlayPhrases: Sendable, Decodable {
    /// The section's heading.
    var section: String
    /// An overlay's heading: `{planet} in {house}` (the planet named with its owner as the
    /// inter-aspect headings name a point).
    var heading: String
    /// A house with its owner: `{name}'s {ordinal} house`.
    var house: String
    /// "1"…"12" → the ordinal used in `house`.
    var ordinals: [String: String]
    /// The line that introduces the overlays in the LLM prompt.
    var prompt: String

    /// Loads the shipped phrases of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> OverlayPhrases {
        let file = "\(language.rawValue)/overlay-phrases.json"
        guard
            let url = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue).appendingPathComponent("overlay-phrases.json")
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        let phrases: OverlayPhrases
        do {
            phrases = try JSONDecoder().decode(OverlayPhrases.self, from: Data(contentsOf: url))
        } catch {
            throw KnowledgeBaseError(message: "\(file) is not valid: \(error)")
        }
        for house in 1...12 where phrases.ordinals[String(house)] == nil {
            throw KnowledgeBaseError(message: "\(file) lacks the ordinal of house \(house)")
        }
        return phrases
    }
}

/// A house overlay chosen for a report for two, with its reading.
public struct SelectedOverlay: Sendable, Hashable {
    public var overlay: HouseOverlay
    public var planet: PlanetName
    public var rule: KnowledgeRule
    /// `overlay A:Venus B:7`: A's Venus in B's 7th house.
    public var key: String
}

/// The house overlays of a report for two in one language: the overlay texts and the words
/// around them.
public struct PairOverlays: Sendable {
    /// At most this many overlays are interpreted in the built-in report.
    public static let maximumInReport = 3
    /// At most this many overlays are listed in the LLM prompt.
    public static let maximumInPrompt = 8

    public let knowledge: SynastryOverlayKnowledge
    public let phrases: OverlayPhrases

    public init(knowledge: SynastryOverlayKnowledge, phrases: OverlayPhrases) {
        self.knowledge = knowledge
        self.phrases = phrases
    }

    /// Loads the shipped overlay texts and phrases of a language.
    ///
    /// - Throws: `KnowledgeBaseError` when a file is missing, malformed or the texts incomplete.
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> PairOverlays {
        let knowledge: SynastryOverlayKnowledge
        do {
            knowledge = try SynastryOverlayKnowledge.load(language)
        } catch {
            throw KnowledgeBaseError(message: error.description)
        }
        let missing = knowledge.missingEntries()
        guard missing.isEmpty else {
            throw KnowledgeBaseError(
                message: "\(language.rawValue)/\(SynastryOverlayKnowledge.fileName) lacks \(missing.count) of 120 "
                    + "entries, first \(missing[0])"
            )
        }
        return PairOverlays(knowledge: knowledge, phrases: try OverlayPhrases.load(language))
    }

    /// Both charts' planets in the other's houses (ASC and MC are left out: their house is 1 or
    /// 10 of their own chart and the knowledge base reads planets), strongest reading first: by
    /// weight, ties by planet order, house, then the planet's longitude, so the choice does not
    /// depend on which person is A. At most `count`.
    public func select(_ synastry: Synastry, count: Int) -> [SelectedOverlay] {
        var chosen: [SelectedOverlay] = []
        for overlay in synastry.overlaysAInB + synastry.overlaysBInA {
            guard case .planet(let planet) = overlay.point.point,
                let rule = knowledge.rule(planet: planet, house: overlay.house)
            else { continue }
            let key =
                "overlay \(overlay.point.chart.rawValue):\(planet.rawValue) "
                + "\(overlay.houseChart.rawValue):\(overlay.house)"
            chosen.append(SelectedOverlay(overlay: overlay, planet: planet, rule: rule, key: key))
        }
        chosen.sort { lhs, rhs in
            if lhs.rule.weight != rhs.rule.weight { return lhs.rule.weight > rhs.rule.weight }
            if lhs.planet != rhs.planet { return lhs.planet.index < rhs.planet.index }
            if lhs.overlay.house != rhs.overlay.house { return lhs.overlay.house < rhs.overlay.house }
            return lhs.overlay.point.longitude < rhs.overlay.point.longitude
        }
        return Array(chosen.prefix(max(0, count)))
    }

    /// The heading of an overlay, in the inter-aspect headings' style: the planet with its owner's
    /// name, the house with the other's, e.g. "Anna's Venus in Oleh's 7th house".
    public func heading(_ overlay: HouseOverlay, couple: ReportCouple, pairPhrases: PairPhrases) -> String {
        let house = pairPhrases.fill(
            phrases.house,
            [
                "name": couple.name(overlay.houseChart),
                "ordinal": phrases.ordinals[String(overlay.house)] ?? String(overlay.house),
            ]
        )
        return pairPhrases.fill(
            phrases.heading,
            ["planet": pairPhrases.owned(overlay.point.point, by: couple.name(overlay.point.chart)), "house": house]
        )
    }

    /// The section of the built-in report: its heading and one paragraph per overlay (heading,
    /// line break, reading), strongest first.
    public func section(
        _ synastry: Synastry,
        couple: ReportCouple,
        pairPhrases: PairPhrases,
        count: Int = maximumInReport
    ) -> (heading: String, paragraphs: [String], keys: [String]) {
        let selected = select(synastry, count: count)
        return (
            phrases.section,
            selected.map { heading($0.overlay, couple: couple, pairPhrases: pairPhrases) + "\n" + $0.rule.text },
            selected.map(\.key)
        )
    }

    /// The overlays as data for the LLM prompt: the introducing line, then one numbered line per
    /// overlay (strongest first), or "" when there are none.
    public func promptBlock(_ synastry: Synastry, couple: ReportCouple, pairPhrases: PairPhrases) -> String {
        let selected = select(synastry, count: Self.maximumInPrompt)
        guard !selected.isEmpty else { return "" }
        let lines = selected.enumerated().map { index, chosen in
            "\(index + 1). \(heading(chosen.overlay, couple: couple, pairPhrases: pairPhrases))"
        }
        return ([phrases.prompt] + lines).joined(separator: "\n")
    }
}
