import AstroDomain
import Foundation

/// The words a report for two is assembled with, per language (data:
/// `KnowledgeBase/<lang>/pair-phrases.json`). Ukrainian names a point's owner in brackets
/// ("Венера (Анна)"), so no name is ever declined.
public struct PairPhrases: Sendable, Decodable {
    struct Headings: Sendable, Decodable {
        var opening: String
        var contacts: String
        var closing: String
    }
    var title: String
    var headings: Headings
    var opening: String
    var score: String
    var strongest: String
    var noAspects: String
    /// A point with its owner: `{name}'s {point}`, `{point} ({name})`.
    var owned: String
    /// An inter-aspect's heading: `{first} – {second}: {aspect} (orb {orb})`.
    var heading: String
    /// An inter-aspect inside a sentence, per aspect type.
    var parts: [String: String]
    var aspects: [String: String]
    var points: [String: String]
    var closing: String

    /// Loads the shipped phrases of a language.
    ///
    /// - Throws: `KnowledgeBaseError` naming the file (a broken build).
    public static func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> PairPhrases {
        guard
            let url = Bundle.module.url(forResource: "KnowledgeBase", withExtension: nil)?
                .appendingPathComponent(language.rawValue).appendingPathComponent("pair-phrases.json")
        else {
            throw KnowledgeBaseError(message: "the KnowledgeBase resource folder is missing from the Reports bundle")
        }
        let phrases: PairPhrases
        do {
            phrases = try JSONDecoder().decode(PairPhrases.self, from: Data(contentsOf: url))
        } catch {
            throw KnowledgeBaseError(message: "\(language.rawValue)/pair-phrases.json is not valid: \(error)")
        }
        for type in AspectType.allCases
        where phrases.parts[type.rawValue] == nil || phrases.aspects[type.rawValue] == nil {
            throw KnowledgeBaseError(
                message: "\(language.rawValue)/pair-phrases.json lacks the aspect \(type.rawValue)"
            )
        }
        for point in RelationshipPoint.all where phrases.points[point.rawValue] == nil {
            throw KnowledgeBaseError(
                message: "\(language.rawValue)/pair-phrases.json lacks the point \(point.rawValue)"
            )
        }
        return phrases
    }

    func fill(_ template: String, _ values: [String: String]) -> String {
        // One pass over the template: a value is never scanned again, so a profile named
        // "{b}" or "{score}" stays as it was typed instead of being filled in itself.
        var text = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            text += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}"),
                let value = values[String(rest[rest.index(after: open)..<close])]
            else {
                text.append("{")
                rest = rest[rest.index(after: open)...]
                continue
            }
            text += value
            rest = rest[rest.index(after: close)...]
        }
        text += rest
        return text
    }

    /// A point with its owner's name.
    func owned(_ point: RelationshipPoint, by name: String) -> String {
        fill(owned, ["point": points[point.rawValue] ?? point.rawValue, "name": name])
    }
}

/// The two people of a report for two: A is the report's profile, B the partner; their names
/// are the profiles' names.
public struct ReportCouple: Sendable, Hashable {
    public var nameA: String
    public var nameB: String

    /// Names as shown: control characters become spaces, and at most 50 characters are kept
    /// (a profile name's limit in the schema).
    public init(nameA: String, nameB: String) {
        self.nameA = Self.clean(nameA)
        self.nameB = Self.clean(nameB)
    }

    static func clean(_ name: String) -> String {
        let scalars = name.unicodeScalars.map { CharacterSet.controlCharacters.contains($0) ? " " : Character($0) }
        let text = String(scalars).trimmingCharacters(in: .whitespaces)
        return String((text.isEmpty ? "?" : text).prefix(50))
    }

    /// The name of a side's owner.
    public func name(_ side: SynastrySide) -> String { side == .a ? nameA : nameB }
}

/// An inter-aspect chosen for a report for two, with its reading and rank.
public struct SelectedInterAspect: Sendable, Hashable {
    public var aspect: InterAspect
    public var rule: KnowledgeRule
    /// The knowledge base's weight × how tight the orb is (1 exact … 0 at the edge of the orb).
    public var score: Double
    /// `synastry A:Venus B:Mars Trine`.
    public var key: String
}

/// The embedded writer of a relationships report for two (no network): an opening naming both
/// people with the compatibility score and its strongest parts, the strongest inter-aspects with
/// headings that say whose point is whose, the strongest house overlays (whose planet falls in
/// whose house, read from the overlay knowledge base, not the natal planet-in-house readings,
/// which speak of the reader's own planets), and a closing. Deterministic for the same charts,
/// names, language and knowledge bases.
public struct PairReportWriter: Sendable {
    /// At most this many inter-aspects are interpreted.
    public static let maximumAspects = 8
    /// Inter-aspects are added, strongest first, while the report stays within this many words
    /// (at least one is always kept); the natal reports are 400–500.
    public static let wordLimit = 600
    private let bases: [ReportLanguage: SynastryKnowledgeBase]
    private let phrases: [ReportLanguage: PairPhrases]
    private let overlays: [ReportLanguage: PairOverlays]

    /// Loads the synastry knowledge base and pair phrases of every language.
    ///
    /// - Throws: `KnowledgeBaseError` when a shipped file is missing, malformed or incomplete.
    public init() throws(KnowledgeBaseError) {
        var bases: [ReportLanguage: SynastryKnowledgeBase] = [:]
        for language in ReportLanguage.allCases { bases[language] = try SynastryKnowledgeBase.load(language) }
        try self.init(bases: bases)
    }

    /// A writer with the given knowledge bases (tests) and the shipped phrases; the shipped
    /// house-overlay texts unless `overlays` are given.
    ///
    /// - Throws: `KnowledgeBaseError` when a base of a language is missing or the phrases or
    ///   overlay texts are broken.
    public init(
        bases: [ReportLanguage: SynastryKnowledgeBase],
        overlays givenOverlays: [ReportLanguage: PairOverlays]? = nil
    ) throws(KnowledgeBaseError) {
        var phrases: [ReportLanguage: PairPhrases] = [:]
        var overlays: [ReportLanguage: PairOverlays] = [:]
        for language in ReportLanguage.allCases {
            guard bases[language] != nil else {
                throw KnowledgeBaseError(message: "no synastry knowledge base for \(language.rawValue)")
            }
            phrases[language] = try PairPhrases.load(language)
            if let given = givenOverlays?[language] {
                overlays[language] = given
            } else {
                overlays[language] = try PairOverlays.load(language)
            }
        }
        self.bases = bases
        self.phrases = phrases
        self.overlays = overlays
    }

    /// The synastry knowledge base of a language.
    public func knowledgeBase(_ language: ReportLanguage) -> SynastryKnowledgeBase { bases[language]! }

    /// The phrases of a language.
    public func phrases(_ language: ReportLanguage) -> PairPhrases { phrases[language]! }

    /// The house-overlay texts and phrases of a language.
    public func overlays(_ language: ReportLanguage) -> PairOverlays { overlays[language]! }

    /// The strongest inter-aspects with a reading, strongest first: ranked by the reading's
    /// weight × (1 − orb / maximum orb), ties by key, each reading at most once, at most `count`.
    public static func select(
        _ synastry: Synastry,
        base: SynastryKnowledgeBase,
        count: Int = maximumAspects
    ) -> [SelectedInterAspect] {
        var candidates: [SelectedInterAspect] = []
        for aspect in synastry.aspects {
            guard let rule = base.rule(aspect.type, between: aspect.a.point, and: aspect.b.point) else { continue }
            let tightness = aspect.maxOrb > 0 ? max(0, 1 - aspect.orb / aspect.maxOrb) : 1
            candidates.append(
                SelectedInterAspect(
                    aspect: aspect,
                    rule: rule,
                    score: rule.weight * tightness,
                    key: "synastry A:\(aspect.a.point) B:\(aspect.b.point) \(aspect.type.rawValue)"
                )
            )
        }
        candidates.sort { $0.score != $1.score ? $0.score > $1.score : $0.key < $1.key }
        // A's Sun square B's Mercury and A's Mercury square B's Sun share one reading: only the
        // stronger is kept, so no text is printed twice.
        var readings: Set<String> = []
        let distinct = candidates.filter { chosen in
            readings.insert("\(PointPair(chosen.aspect.a.point, chosen.aspect.b.point)) \(chosen.aspect.type.rawValue)")
                .inserted
        }
        return Array(distinct.prefix(max(0, count)))
    }

    /// An orb as degrees and arcminutes: `0°42′`.
    public static func formatOrb(_ orb: Double) -> String {
        let minutes = Int((max(0, orb) * 60).rounded())
        let arcminutes = minutes % 60
        return "\(minutes / 60)°" + (arcminutes < 10 ? "0" : "") + "\(arcminutes)′"
    }

    /// The heading of an inter-aspect: A's point with A's name, B's with B's, the aspect and orb.
    public func heading(_ aspect: InterAspect, couple: ReportCouple, language: ReportLanguage) -> String {
        let words = phrases[language]!
        return words.fill(
            words.heading,
            [
                "first": words.owned(aspect.a.point, by: couple.name(aspect.a.chart)),
                "second": words.owned(aspect.b.point, by: couple.name(aspect.b.chart)),
                "aspect": words.aspects[aspect.type.rawValue] ?? aspect.type.rawValue,
                "orb": Self.formatOrb(aspect.orb),
            ]
        )
    }

    /// Writes the relationships report of two people from their synastry (A = the report's
    /// profile) and its compatibility score.
    public func write(
        synastry: Synastry,
        score: CompatibilityScore,
        couple: ReportCouple,
        language: ReportLanguage
    ) -> WrittenReport {
        let base = bases[language]!
        let words = phrases[language]!
        let names = ["a": couple.nameA, "b": couple.nameB]
        let title = words.fill(words.title, names)
        let selected = Self.select(synastry, base: base)

        var opening = [words.fill(words.opening, names), words.fill(words.score, ["score": "\(score.score)"])]
        let strongest = score.parts.filter { $0.kind == .aspect }.prefix(3).compactMap { part -> String? in
            guard let other = part.otherPoint, let type = part.aspect else { return nil }
            return words.fill(
                words.parts[type.rawValue] ?? "{first} {second}",
                [
                    "first": words.owned(part.point.point, by: couple.name(part.point.chart)),
                    "second": words.owned(other.point, by: couple.name(other.chart)),
                ]
            )
        }
        if strongest.isEmpty {
            opening.append(words.noAspects)
        } else {
            opening.append(words.fill(words.strongest, ["parts": strongest.joined(separator: "; ")]))
        }
        let keyInfluences = opening.joined(separator: " ")
        // The overlay section is short and fixed in size, so it is counted before the
        // inter-aspects fill what is left of the word limit.
        let overlaySection = overlays[language]!.section(synastry, couple: couple, pairPhrases: words)
        let fixedWords =
            BuiltInReportWriter.countWords(
                [
                    title, words.headings.opening, keyInfluences, words.headings.contacts, words.headings.closing,
                    words.closing,
                ]
                .joined(separator: "\n")
            )
            + (overlaySection.paragraphs.isEmpty
                ? 0
                : BuiltInReportWriter.countWords(
                    ([overlaySection.heading] + overlaySection.paragraphs).joined(separator: "\n")
                ))
        var total = fixedWords
        var analysis: [String] = []
        var used: [SelectedInterAspect] = []
        for chosen in selected {
            let paragraph = heading(chosen.aspect, couple: couple, language: language) + "\n" + chosen.rule.text
            let paragraphWords = BuiltInReportWriter.countWords(paragraph)
            if !used.isEmpty, total + paragraphWords > Self.wordLimit { break }
            analysis.append(paragraph)
            used.append(chosen)
            total += paragraphWords
        }

        var sections = [title, "", words.headings.opening, keyInfluences, "", words.headings.contacts]
        for (index, paragraph) in analysis.enumerated() {
            if index > 0 { sections.append("") }
            sections.append(paragraph)
        }
        if !overlaySection.paragraphs.isEmpty {
            sections += ["", overlaySection.heading]
            for (index, paragraph) in overlaySection.paragraphs.enumerated() {
                if index > 0 { sections.append("") }
                sections.append(paragraph)
            }
        }
        sections += ["", words.headings.closing, words.closing]
        let text = sections.joined(separator: "\n")
        return WrittenReport(
            title: title,
            keyInfluences: keyInfluences,
            analysis: analysis,
            recommendations: [words.closing],
            text: text,
            wordCount: BuiltInReportWriter.countWords(text),
            ruleKeys: used.map(\.key),
            writer: "built-in",
            version: base.version + "+" + overlays[language]!.knowledge.version
        )
    }
}
