import AstroDomain
import Foundation
import Testing

@testable import Reports

@Suite struct KnowledgeBaseTests {
    static let bases: [ReportLanguage: KnowledgeBase] = Dictionary(
        uniqueKeysWithValues: ReportLanguage.allCases.map { ($0, try! KnowledgeBase.load($0)) }
    )

    @Test(arguments: ReportLanguage.allCases)
    func isCompleteInEveryLanguage(language: ReportLanguage) throws {
        let base = try #require(Self.bases[language])
        #expect(base.missingEntries() == [])
        // 10×12 signs + 10×12 houses + 45 pairs × 5 aspects + 2 angles × 12 signs.
        #expect(base.allRules.count == 120 + 120 + 225 + 24)
        #expect(base.language == language)
    }

    @Test(arguments: ReportLanguage.allCases)
    func everyRuleIsWellFormed(language: ReportLanguage) throws {
        let base = try #require(Self.bases[language])
        var texts = Set<String>()
        for (key, rule) in base.allRules {
            let words = rule.text.split(whereSeparator: \.isWhitespace).count
            #expect((25...95).contains(words), "\(language) \(key): \(words) words")
            #expect((1...3).contains(rule.areas.count), "\(language) \(key): \(rule.areas)")
            #expect(Set(rule.areas).count == rule.areas.count, "\(language) \(key): repeated area")
            #expect((0.1...1.0).contains(rule.weight), "\(language) \(key): weight \(rule.weight)")
            #expect(texts.insert(rule.text).inserted, "\(language) \(key): the same text as another rule")
        }
        // Weights are judged, not all alike.
        #expect(Set(base.allRules.map(\.rule.weight)).count >= 5)
    }

    @Test func englishIsLatinAndUkrainianIsUkrainian() throws {
        let english = try #require(Self.bases[.en])
        let ukrainian = try #require(Self.bases[.uk])
        let cyrillic = Character("а")...Character("я")
        for (key, rule) in english.allRules {
            #expect(!rule.text.lowercased().contains { cyrillic.contains($0) }, "en \(key) has Cyrillic")
        }
        var corpus = ""
        for (key, rule) in ukrainian.allRules {
            let lower = rule.text.lowercased()
            let letters = lower.filter(\.isLetter)
            let cyrillicShare =
                Double(letters.filter { cyrillic.contains($0) || "іїєґ".contains($0) }.count)
                / Double(max(letters.count, 1))
            #expect(cyrillicShare > 0.9, "uk \(key) is not Ukrainian text")
            // Letters Ukrainian does not have: a sign of Russian text or a bad transliteration.
            #expect(!lower.contains { "ыэъё".contains($0) }, "uk \(key) has a non-Ukrainian letter")
            // Nearly every Ukrainian sentence has і, ї or є.
            #expect(lower.contains { "іїє".contains($0) }, "uk \(key) has no і, ї or є")
            corpus += lower
        }
        for letter in ["і", "ї", "є", "ґ"] { #expect(corpus.contains(letter), "no \(letter) in the whole base") }
    }

    @Test(arguments: ReportLanguage.allCases)
    func areasFollowTheHousesAndBodiesTheyAreAbout(language: ReportLanguage) throws {
        let base = try #require(Self.bases[language])
        for planet in PlanetName.allCases {
            for (house, area) in [
                (2, ReportArea.finances), (8, .finances), (10, .career), (7, .relationships), (6, .health),
            ] {
                let rule = try #require(base.rule(planet, inHouse: house))
                #expect(rule.areas.contains(area), "\(language) \(planet.rawValue) in house \(house): \(rule.areas)")
            }
        }
        for sign in ZodiacSign.allCases {
            #expect(base.rule(.sun, in: sign)?.areas.contains(.general) == true, "\(language) Sun in \(sign)")
            #expect(base.rule(.ascendant, in: sign)?.areas.contains(.general) == true, "\(language) Asc in \(sign)")
            #expect(base.rule(.midheaven, in: sign)?.areas.contains(.career) == true, "\(language) MC in \(sign)")
        }
    }

    @Test func versionsAreStableAndDifferByLanguage() throws {
        let again = try KnowledgeBase.load(.en)
        #expect(again.version == Self.bases[.en]?.version)
        #expect(Self.bases[.en]?.version != Self.bases[.uk]?.version)
        #expect(Self.bases[.en]?.version.hasPrefix("kb-en-") == true)
    }

    @Test func lookupsTakePairsInEitherOrder() throws {
        let base = try #require(Self.bases[.en])
        #expect(base.rule(.square, between: .moon, and: .sun) == base.rule(.square, between: .sun, and: .moon))
        #expect(base.rule(.trine, between: .mars, and: .mars) == nil)
        #expect(PlanetPair.all.count == 45)
        #expect(PlanetPair(.pluto, .sun)?.description == "Sun-Pluto")
    }

    @Test func aMalformedFolderNamesTheFileAndKey() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kb-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let rule = #"{"text": "x", "areas": ["general"], "weight": 0.5}"#
        try Data(#"{"Sun": {"Aries": \#(rule)}}"#.utf8).write(to: folder.appendingPathComponent("planet-in-sign.json"))
        try Data(#"{"Vulcan": {"1": \#(rule)}}"#.utf8).write(to: folder.appendingPathComponent("planet-in-house.json"))
        do {
            _ = try KnowledgeBase.load(language: .en, directory: folder)
            Issue.record("loaded an unknown planet")
        } catch {
            #expect(error.message.contains("planet-in-house.json"))
            #expect(error.message.contains("Vulcan"))
        }
    }
}
