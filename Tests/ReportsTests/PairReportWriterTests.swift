import AstroDomain
import ChartEngine
import Foundation
import Testing

@testable import Reports

/// A complete synastry knowledge base written to a temporary folder: placeholder texts that name
/// their key, so a test can tell which entry a report used. Only for tests (the shipped texts
/// are written by people, W1 and W2 of issue 20).
struct SynastryFixture {
    let directory: URL

    /// The placeholder text of an entry.
    static func text(_ pair: PointPair, _ type: AspectType, _ language: ReportLanguage) -> String {
        language == .en
            ? "Reading of \(pair) \(type.rawValue) for the two of you."
            : "Тлумачення зв'язку номер \(pair.first.index)-\(pair.second.index)-\(type.angle) для вас обох."
    }

    /// Weights that differ per entry, so ranking is observable.
    static func weight(_ pair: PointPair, _ type: AspectType) -> Double {
        let personal = pair.first.index <= 4 && pair.second.index <= 4
        return personal ? 0.9 - Double(type.angle) / 1800 : 0.2
    }

    /// The two files' tables of a language: W1's pairs (first point Sun…Venus) and W2's.
    static func tables(
        _ language: ReportLanguage
    ) -> (personal: [String: [String: KnowledgeRule]], outer: [String: [String: KnowledgeRule]]) {
        var personal: [String: [String: KnowledgeRule]] = [:]
        var outer: [String: [String: KnowledgeRule]] = [:]
        for pair in PointPair.all {
            var entries: [String: KnowledgeRule] = [:]
            for type in AspectType.allCases {
                entries[type.rawValue] = KnowledgeRule(
                    text: text(pair, type, language),
                    areas: [.relationships],
                    weight: weight(pair, type)
                )
            }
            if pair.first.index <= 3 { personal[pair.description] = entries } else { outer[pair.description] = entries }
        }
        return (personal, outer)
    }

    /// Writes both files of `language` (after `change` edits the tables) into a new folder.
    init(
        _ language: ReportLanguage,
        change: (inout [String: [String: KnowledgeRule]], inout [String: [String: KnowledgeRule]]) -> Void = { _, _ in }
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("synastry-kb-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var (personal, outer) = Self.tables(language)
        change(&personal, &outer)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try encoder.encode(personal).write(to: directory.appendingPathComponent("synastry-personal.json"))
        try encoder.encode(outer).write(to: directory.appendingPathComponent("synastry-outer.json"))
    }

    func load(_ language: ReportLanguage) throws(KnowledgeBaseError) -> SynastryKnowledgeBase {
        try SynastryKnowledgeBase.load(language: language, directory: directory)
    }

    static func writer() throws -> PairReportWriter {
        var bases: [ReportLanguage: SynastryKnowledgeBase] = [:]
        for language in ReportLanguage.allCases { bases[language] = try SynastryFixture(language).load(language) }
        return try PairReportWriter(bases: bases)
    }
}

@Suite struct SynastryKnowledgeBaseTests {
    @Test func thereAre78PairsInKeyOrder() {
        #expect(PointPair.all.count == 78)
        #expect(SynastryKnowledgeBase.requiredCount == 390)
        #expect(Set(PointPair.all).count == 78)
        #expect(PointPair(.planet(.mars), .planet(.sun)).description == "Sun-Mars")
        #expect(PointPair(.midheaven, .planet(.venus)).description == "Venus-MC")
        #expect(PointPair(.ascendant, .ascendant).description == "ASC-ASC")
        #expect(PointPair.all.filter { $0.first.index <= 3 }.count == 42)
    }

    @Test(arguments: ReportLanguage.allCases)
    func aCompleteFixtureLoadsMerged(language: ReportLanguage) throws {
        let base = try SynastryFixture(language).load(language)
        #expect(base.missingEntries().isEmpty)
        #expect(base.entries.values.reduce(0) { $0 + $1.count } == 390)
        // Either order of the points finds the entry.
        #expect(
            base.rule(.trine, between: .planet(.mars), and: .planet(.venus))?.text
                == SynastryFixture.text(PointPair(.planet(.venus), .planet(.mars)), .trine, language)
        )
        #expect(base.version.hasPrefix("kb-synastry-\(language.rawValue)-"))
    }

    @Test func oneMissingEntryIsALoadErrorNamingIt() throws {
        let fixture = try SynastryFixture(.en) { _, outer in outer["Saturn-Pluto"]?["Square"] = nil }
        do {
            _ = try fixture.load(.en)
            Issue.record("an incomplete base loaded")
        } catch {
            #expect(error.message.contains("lacks 1 of 390"))
            #expect(error.message.contains("synastry Saturn-Pluto Square"))
        }
        // missingEntries names it too.
        let complete = try SynastryFixture(.en).load(.en)
        var entries = complete.entries
        entries[PointPair(.planet(.sun), .planet(.moon))]?[.opposition] = nil
        let partial = SynastryKnowledgeBase(language: .en, entries: entries, version: "x")
        #expect(partial.missingEntries() == ["synastry Sun-Moon Opposition"])
    }

    @Test func aPairInBothFilesIsALoadError() throws {
        let fixture = try SynastryFixture(.uk) { personal, outer in outer["Sun-Moon"] = personal["Sun-Moon"] }
        #expect(throws: KnowledgeBaseError.self) { try fixture.load(.uk) }
        do {
            _ = try fixture.load(.uk)
        } catch {
            #expect(error.message.contains("Sun-Moon is also in uk/synastry-personal.json"))
        }
    }

    @Test func keysOutOfOrderUnknownOrOutOfRangeAreLoadErrors() throws {
        let reversed = try SynastryFixture(.en) { personal, _ in
            personal["Moon-Sun"] = personal.removeValue(forKey: "Sun-Moon")
        }
        #expect(throws: KnowledgeBaseError.self) { try reversed.load(.en) }
        let badAspect = try SynastryFixture(.en) { personal, _ in
            personal["Sun-Sun"]?["Quincunx"] = KnowledgeRule(text: "x", areas: [.relationships], weight: 0.5)
        }
        #expect(throws: KnowledgeBaseError.self) { try badAspect.load(.en) }
        let badWeight = try SynastryFixture(.en) { _, outer in outer["MC-MC"]?["Trine"]?.weight = 1.5 }
        #expect(throws: KnowledgeBaseError.self) { try badWeight.load(.en) }
        let noArea = try SynastryFixture(.en) { _, outer in outer["MC-MC"]?["Trine"]?.areas = [.career] }
        #expect(throws: KnowledgeBaseError.self) { try noArea.load(.en) }
        let missingFile = try SynastryFixture(.en)
        try FileManager.default.removeItem(at: missingFile.directory.appendingPathComponent("synastry-outer.json"))
        #expect(throws: KnowledgeBaseError.self) { try missingFile.load(.en) }
    }

    /// The shipped files (W1's and W2's) are complete in both languages, and keep the spec's
    /// rules: weights in range, "relationships" in every entry, texts of 2–4 sentences without
    /// line breaks, and no owner-specific wording.
    @Test(arguments: ReportLanguage.allCases)
    func theShippedBaseIsComplete(language: ReportLanguage) throws {
        let base = try SynastryKnowledgeBase.load(language)
        #expect(base.missingEntries().isEmpty)
        for (pair, entries) in base.entries {
            for (type, rule) in entries {
                #expect(!rule.text.contains("\n"), "\(pair) \(type)")
                let words = BuiltInReportWriter.countWords(rule.text)
                #expect((20...120).contains(words), "\(language) \(pair) \(type): \(words) words")
                if language == .en {
                    #expect(!rule.text.lowercased().contains("your venus"), "\(pair) \(type)")
                }
            }
        }
    }
}

@Suite struct PairReportWriterTests {
    static let writer = try! SynastryFixture.writer()
    static let charts: [NatalChart] = ["kyiv-1990-10-07", "sao-paulo-1985-03-21", "kathmandu-2001-12-24"].map { name in
        let url = Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "json")!
        return try! JSONCoding.decoder.decode(NatalChart.self, from: Data(contentsOf: url))
    }

    static func report(
        _ a: NatalChart,
        _ b: NatalChart,
        _ couple: ReportCouple,
        _ language: ReportLanguage
    ) throws
        -> (WrittenReport, Synastry)
    {
        let synastry = try ChartEngine.synastry(a, b)
        let report = writer.write(
            synastry: synastry,
            score: CompatibilityScoring.score(synastry),
            couple: couple,
            language: language
        )
        return (report, synastry)
    }

    /// One hand-made aspect: A's Venus trine B's Mars, 0.7° (0°42′).
    static let venusTrineMars = InterAspect(
        a: SynastryPointReference(chart: .a, point: .planet(.venus), longitude: 10),
        b: SynastryPointReference(chart: .b, point: .planet(.mars), longitude: 130.7),
        type: .trine,
        orb: 0.7,
        maxOrb: 8,
        isApplying: false
    )

    @Test func headingsSayWhosePointIsWhose() throws {
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        #expect(
            Self.writer.heading(Self.venusTrineMars, couple: couple, language: .en)
                == "Anna's Venus – Oleh's Mars: trine (orb 0°42′)"
        )
        #expect(
            Self.writer.heading(Self.venusTrineMars, couple: couple, language: .uk)
                == "Венера (Anna) — Марс (Oleh): тригон, орб 0°42′"
        )
        let ukrainian = ReportCouple(nameA: "Олег", nameB: "Анна")
        #expect(
            Self.writer.heading(Self.venusTrineMars, couple: ukrainian, language: .uk)
                == "Венера (Олег) — Марс (Анна): тригон, орб 0°42′"
        )
        // A name that looks like a placeholder is printed as typed, not filled in.
        let braces = ReportCouple(nameA: "{name}", nameB: "{point} {b}")
        #expect(
            Self.writer.heading(Self.venusTrineMars, couple: braces, language: .en)
                == "{name}'s Venus – {point} {b}'s Mars: trine (orb 0°42′)"
        )
        let phrases = try PairPhrases.load(.en)
        #expect(phrases.fill("{a} and {b} {unknown} {", ["a": "{b}", "b": "B"]) == "{b} and B {unknown} {")
        #expect(PairReportWriter.formatOrb(0) == "0°00′")
        #expect(PairReportWriter.formatOrb(7.9999) == "8°00′")
        #expect(PairReportWriter.formatOrb(3.25) == "3°15′")
    }

    @Test(arguments: ReportLanguage.allCases)
    func swappingThePeopleSwapsTheOwners(language: ReportLanguage) throws {
        let (a, b) = (Self.charts[0], Self.charts[1])
        let (forward, synastry) = try Self.report(a, b, ReportCouple(nameA: "Anna", nameB: "Oleh"), language)
        let (backward, _) = try Self.report(b, a, ReportCouple(nameA: "Oleh", nameB: "Anna"), language)
        #expect(!forward.analysis.isEmpty)
        #expect(forward.analysis.count <= PairReportWriter.maximumAspects)
        // The same contacts, each with A's point named by A's name in one report and the same
        // point, still by its owner's name, second in the other.
        #expect(forward.analysis.count == backward.analysis.count)
        let words = Self.writer.phrases(language)
        for key in forward.ruleKeys {
            let parts = key.split(separator: " ")  // synastry A:Venus B:Mars Trine
            let pointA = try #require(RelationshipPoint(rawValue: String(parts[1].dropFirst(2))))
            let pointB = try #require(RelationshipPoint(rawValue: String(parts[2].dropFirst(2))))
            let type = try #require(AspectType(rawValue: String(parts[3])))
            let aspect = try #require(
                synastry.aspects.first { $0.a.point == pointA && $0.b.point == pointB && $0.type == type }
            )
            // The point named with Anna is at chart A's longitude of that point.
            let planetA = a.planets.first { RelationshipPoint.planet($0.name) == pointA }
            if let planetA { #expect(abs(planetA.longitude - aspect.a.longitude) < 1e-9) }
            let annas = words.owned(pointA, by: "Anna")
            let olehs = words.owned(pointB, by: "Oleh")
            #expect(forward.text.contains(annas), "\(key)")
            #expect(forward.text.contains(olehs), "\(key)")
            let mirrored = "synastry A:\(pointB) B:\(pointA) \(type.rawValue)"
            #expect(backward.ruleKeys.contains(mirrored), "\(mirrored)")
            let heading = Self.writer.heading(
                aspect,
                couple: ReportCouple(nameA: "Anna", nameB: "Oleh"),
                language: language
            )
            #expect(forward.analysis.contains { $0.hasPrefix(heading + "\n") })
            #expect(heading.hasPrefix(language == .en ? annas : String(annas)))
        }
        #expect(forward.text.contains("Anna") && forward.text.contains("Oleh"))
    }

    @Test(arguments: ReportLanguage.allCases)
    func theReportHasItsPartsAndIsDeterministic(language: ReportLanguage) throws {
        let couple = ReportCouple(nameA: "Марта", nameB: "Ігор")
        for (a, b) in [
            (Self.charts[0], Self.charts[1]), (Self.charts[1], Self.charts[2]), (Self.charts[2], Self.charts[0]),
        ] {
            let (first, synastry) = try Self.report(a, b, couple, language)
            let (second, _) = try Self.report(a, b, couple, language)
            #expect(first == second)
            let score = CompatibilityScoring.score(synastry)
            #expect(first.keyInfluences.contains("\(score.score)"))
            #expect(first.title.contains("Марта") && first.title.contains("Ігор"))
            #expect(first.wordCount == BuiltInReportWriter.countWords(first.text))
            let headings =
                language == .en
                ? ["The two of you", "The strongest contacts between your charts", "In closing"]
                : ["Ви двоє", "Найсильніші зв'язки між вашими картами", "Наостанок"]
            var position = first.text.startIndex
            for heading in headings {
                let found = first.text.range(of: "\n" + heading + "\n", range: position..<first.text.endIndex)
                #expect(found != nil, "no \(heading) in order")
                position = found?.upperBound ?? position
            }
            // Ranked by weight × tightness, strongest first, and each reading is its entry's text.
            let selected = PairReportWriter.select(synastry, base: Self.writer.knowledgeBase(language))
            #expect(Array(selected.map(\.key).prefix(first.ruleKeys.count)) == first.ruleKeys)
            #expect(!first.ruleKeys.isEmpty)
            #expect(first.wordCount <= PairReportWriter.wordLimit)
            #expect(zip(selected, selected.dropFirst()).allSatisfy { $0.score >= $1.score })
            // No reading twice (A's Sun – B's Mercury and A's Mercury – B's Sun share one).
            let readings = selected.map { "\(PointPair($0.aspect.a.point, $0.aspect.b.point)) \($0.aspect.type)" }
            #expect(Set(readings).count == readings.count)
            for (chosen, paragraph) in zip(selected, first.analysis) {
                let pair = PointPair(chosen.aspect.a.point, chosen.aspect.b.point)
                #expect(paragraph.hasSuffix("\n" + SynastryFixture.text(pair, chosen.aspect.type, language)))
            }
            // The strongest parts of the score are named in the opening.
            let strongest = try #require(score.parts.first { $0.kind == .aspect })
            #expect(
                first.keyInfluences.contains(Self.writer.phrases(language).owned(strongest.point.point, by: "Марта"))
            )
        }
    }

    /// The Ukrainian report has no Latin-script word except the people's names (here Latin ones).
    @Test func theUkrainianReportIsUkrainian() throws {
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let (report, _) = try Self.report(Self.charts[0], Self.charts[2], couple, .uk)
        let latinWords = Set(
            report.text.split(whereSeparator: { !$0.isLetter }).map(String.init).filter { word in
                word.unicodeScalars.contains { ("a"..."z").contains($0) || ("A"..."Z").contains($0) }
            }
        )
        #expect(latinWords.isSubset(of: ["Anna", "Oleh"]), "\(latinWords)")
        #expect(LLMReportWriter.isWritten(in: .uk, report.text))
        let (english, _) = try Self.report(Self.charts[0], Self.charts[2], couple, .en)
        #expect(LLMReportWriter.isWritten(in: .en, english.text))
    }

    /// With the shipped knowledge base: the Ukrainian reports have no Latin-script word but the
    /// (Latin) names, the English ones are English, and all stay within their length.
    @Test func theShippedReportsAreInTheirLanguage() throws {
        let shipped = try PairReportWriter()
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        for (a, b) in [
            (Self.charts[0], Self.charts[1]), (Self.charts[1], Self.charts[2]), (Self.charts[2], Self.charts[0]),
        ] {
            let synastry = try ChartEngine.synastry(a, b)
            let score = CompatibilityScoring.score(synastry)
            let uk = shipped.write(synastry: synastry, score: score, couple: couple, language: .uk)
            let latin = Set(
                uk.text.split(whereSeparator: { !$0.isLetter }).map(String.init).filter { word in
                    word.unicodeScalars.contains { ("a"..."z").contains($0) || ("A"..."Z").contains($0) }
                }
            )
            #expect(latin.isSubset(of: ["Anna", "Oleh"]), "\(latin)")
            let en = shipped.write(synastry: synastry, score: score, couple: couple, language: .en)
            #expect(LLMReportWriter.isWritten(in: .en, en.text))
            for report in [uk, en] {
                #expect(report.wordCount <= PairReportWriter.wordLimit)
                #expect(report.analysis.count >= 3, "\(report.ruleKeys)")
                #expect(report.version.hasPrefix("kb-synastry-"))
            }
        }
    }

    @Test func namesAreBoundedAndOnOneLine() {
        let couple = ReportCouple(nameA: "A\nB\u{7}", nameB: String(repeating: "я", count: 80))
        #expect(couple.nameA == "A B")
        #expect(couple.nameB.count == 50)
        #expect(ReportCouple(nameA: "  ", nameB: "x").nameA == "?")
    }

    @Test(arguments: ReportLanguage.allCases)
    func thePairPromptLabelsOwnersAndCarriesTheScore(language: ReportLanguage) throws {
        let (a, b) = (Self.charts[0], Self.charts[1])
        let synastry = try ChartEngine.synastry(a, b)
        let score = CompatibilityScoring.score(synastry)
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let prompt = ReportPrompt.buildPair(
            chartA: a,
            chartB: b,
            synastry: synastry,
            score: score,
            couple: couple,
            language: language,
            phrases: Self.writer.phrases(language),
            templates: try PromptTemplates.load(language)
        )
        #expect(!prompt.system.isEmpty)
        #expect(prompt.user.contains(ReportPrompt.summary(a)) && prompt.user.contains(ReportPrompt.summary(b)))
        #expect(prompt.user.contains("\(score.score)"))
        #expect(prompt.user.contains(score.method))
        #expect(!prompt.user.contains("{"))
        let tightest = try #require(synastry.aspects.min { $0.orb / $0.maxOrb < $1.orb / $1.maxOrb })
        let words = Self.writer.phrases(language)
        #expect(prompt.user.contains(words.owned(tightest.a.point, by: "Anna")))
        #expect(prompt.user.contains(words.owned(tightest.b.point, by: "Oleh")))
        #expect(prompt.user.contains(PairReportWriter.formatOrb(tightest.orb)))
        #expect(prompt.estimatedTokens <= ReportPrompt.tokenBudget)
    }
}
