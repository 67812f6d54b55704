import AstroDomain
import Foundation
import Testing

@testable import Reports

@Suite struct SynastryOverlayKnowledgeTests {
    @Test(arguments: ReportLanguage.allCases)
    func shippedFileIsCompleteInEveryLanguage(language: ReportLanguage) throws {
        let knowledge = try SynastryOverlayKnowledge.load(language)
        #expect(knowledge.language == language)
        #expect(knowledge.missingEntries() == [])
        #expect(knowledge.rules.count == 10)
        #expect(knowledge.rules.values.map(\.count).reduce(0, +) == 120)
        #expect(knowledge.version.hasPrefix("overlays-\(language.rawValue)-"))
        for planet in PlanetName.allCases {
            for house in 1...12 {
                let rule = try #require(knowledge.rule(planet: planet, house: house))
                let words = rule.text.split(whereSeparator: \.isWhitespace).count
                #expect((30...70).contains(words), "\(planet.rawValue)/\(house): \(words) words")
                #expect(rule.areas.contains(.relationships))
            }
        }
        #expect(knowledge.rule(planet: .venus, house: 0) == nil)
        #expect(knowledge.rule(planet: .venus, house: 13) == nil)
    }

    @Test func personalPlanetsInAngularHousesOutweighOuterPlanets() throws {
        let knowledge = try SynastryOverlayKnowledge.load(.en)
        for planet in [PlanetName.sun, .moon, .venus, .mars] {
            for house in [1, 4, 7, 10] {
                let personal = try #require(knowledge.rule(planet: planet, house: house)).weight
                let outer = try #require(knowledge.rule(planet: .neptune, house: house)).weight
                #expect(personal > outer, "\(planet.rawValue)/\(house)")
            }
        }
    }

    @Test func languagesAgreeOnWeightsAndAreas() throws {
        let en = try SynastryOverlayKnowledge.load(.en)
        let uk = try SynastryOverlayKnowledge.load(.uk)
        for planet in PlanetName.allCases {
            for house in 1...12 {
                let a = try #require(en.rule(planet: planet, house: house))
                let b = try #require(uk.rule(planet: planet, house: house))
                #expect(a.weight == b.weight, "\(planet.rawValue)/\(house)")
                #expect(Set(a.areas) == Set(b.areas), "\(planet.rawValue)/\(house)")
                #expect(a.text != b.text)
            }
        }
    }

    @Test func aRemovedEntryIsReportedAsMissing() throws {
        let directory = try Self.copyOfShippedFile(.uk) { table in
            table["Venus"]?.removeValue(forKey: "7")
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        let knowledge = try SynastryOverlayKnowledge.load(language: .uk, directory: directory)
        #expect(knowledge.missingEntries() == ["Venus/7"])
        #expect(knowledge.rule(planet: .venus, house: 7) == nil)
        #expect(knowledge.rule(planet: .venus, house: 8) != nil)
    }

    @Test func aBadEntryIsATypedErrorNamingFileAndKey() throws {
        let directory = try Self.copyOfShippedFile(.en) { table in
            table["Mars"]?["5"]?["weight"] = 3.0
        }
        defer { try? FileManager.default.removeItem(at: directory) }
        let error = try #require(Self.loadError(.en, directory))
        #expect(error.code == .invalidEntry)
        #expect(error.file == "en/synastry-overlays.json")
        #expect(error.key == "Mars/5")
        #expect(error.description.contains("overlay_kb_invalid_entry"))
    }

    @Test func anUnknownHouseOrPlanetIsATypedError() throws {
        let badHouse = try Self.copyOfShippedFile(.en) { table in
            let twelfth = table["Moon"]?["12"]
            table["Moon"]?["13"] = twelfth
        }
        defer { try? FileManager.default.removeItem(at: badHouse) }
        let houseError = try #require(Self.loadError(.en, badHouse))
        #expect(houseError.code == .unknownKey)
        #expect(houseError.key == "Moon/13")
        let badPlanet = try Self.copyOfShippedFile(.uk) { table in
            table["Chiron"] = table["Sun"]
        }
        defer { try? FileManager.default.removeItem(at: badPlanet) }
        let planetError = try #require(Self.loadError(.uk, badPlanet))
        #expect(planetError.code == .unknownKey)
        #expect(planetError.key == "Chiron")
        #expect(planetError.file == "uk/synastry-overlays.json")
    }

    @Test func aMissingFileIsUnreadable() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("overlays-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let error = try #require(Self.loadError(.uk, empty))
        #expect(error.code == .unreadable)
        #expect(error.file == "uk/synastry-overlays.json")
    }

    /// The error loading from `directory` throws, or `nil` when it loads.
    static func loadError(_ language: ReportLanguage, _ directory: URL) -> SynastryOverlayKnowledgeError? {
        do {
            _ = try SynastryOverlayKnowledge.load(language: language, directory: directory)
            return nil
        } catch {
            return error
        }
    }

    /// A temporary folder holding the shipped file of `language` after `edit` (on the JSON as
    /// nested dictionaries).
    static func copyOfShippedFile(
        _ language: ReportLanguage,
        edit: (inout [String: [String: [String: Any]]]) -> Void
    ) throws -> URL {
        let source = reportsKnowledgeBaseFolder()
            .appendingPathComponent(language.rawValue)
            .appendingPathComponent(SynastryOverlayKnowledge.fileName)
        let data = try Data(contentsOf: source)
        var table = try #require(JSONSerialization.jsonObject(with: data) as? [String: [String: [String: Any]]])
        edit(&table)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("overlays-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: table).write(
            to: directory.appendingPathComponent(SynastryOverlayKnowledge.fileName)
        )
        return directory
    }

    /// The shipped knowledge-base folder, found from this source file (the tests' own bundle holds
    /// only fixtures).
    static func reportsKnowledgeBaseFolder() -> URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources/Reports/Resources/KnowledgeBase")
    }
}
