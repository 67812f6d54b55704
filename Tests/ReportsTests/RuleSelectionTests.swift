import AstroDomain
import Foundation
import Testing

@testable import Reports

@Suite struct RuleSelectionTests {
    static let chart: NatalChart = {
        let url = Bundle.module.url(forResource: "Fixtures/kyiv-1990-10-07", withExtension: "json")!
        return try! JSONCoding.decoder.decode(NatalChart.self, from: Data(contentsOf: url))
    }()

    @Test func theChartsFactorsAreEveryPlacementAspectAndAngle() {
        let factors = RuleSelection.factors(of: Self.chart)
        // 10 signs + 10 houses + 17 aspects + ascendant + midheaven.
        #expect(factors.count == 10 + 10 + Self.chart.aspects.count + 2)
        #expect(factors.contains(.angle(.ascendant, .capricorn)))
        #expect(factors.contains(.angle(.midheaven, .scorpio)))
        #expect(factors.contains(.planetInHouse(.saturn, house: 1)))
    }

    @Test(arguments: ReportLanguage.allCases, ReportArea.allCases)
    func tenRulesThatSpeakToTheAreaStrongestFirst(language: ReportLanguage, area: ReportArea) throws {
        let base = try KnowledgeBase.load(language)
        let selected = RuleSelection.select(chart: Self.chart, area: area, base: base)
        #expect(selected.count == 10)
        #expect(zip(selected, selected.dropFirst()).allSatisfy { $0.score >= $1.score })
        #expect(Set(selected.map(\.factor.key)).count == 10)
        for rule in selected where area != .general {
            #expect(rule.rule.areas.contains(area), "\(rule.factor.key) does not speak to \(area)")
        }
        // The same input, the same list.
        #expect(RuleSelection.select(chart: Self.chart, area: area, base: base) == selected)
    }

    @Test func eachAreaReadsItsOwnHousesAndAngles() throws {
        let base = try KnowledgeBase.load(.en)
        let career = RuleSelection.select(chart: Self.chart, area: .career, base: base).map(\.factor)
        #expect(career.contains(.angle(.midheaven, .scorpio)))
        let general = RuleSelection.select(chart: Self.chart, area: .general, base: base).map(\.factor)
        #expect(general.contains { if case .planetInSign(.sun, .libra, _) = $0 { true } else { false } })
        #expect(general.contains(.angle(.ascendant, .capricorn)))
        let relationships = RuleSelection.select(chart: Self.chart, area: .relationships, base: base).map(\.factor)
        // Jupiter sits in the 7th house of this chart.
        #expect(relationships.contains(.planetInHouse(.jupiter, house: 7)))
        #expect(Set(career) != Set(relationships))
    }

    @Test func aTighterAspectScoresHigher() throws {
        let base = try KnowledgeBase.load(.en)
        var exact = Self.chart
        var loose = Self.chart
        let index = try #require(exact.aspects.firstIndex { $0.planet1 == .sun && $0.planet2 == .mars })
        exact.aspects[index].orb = 0
        loose.aspects[index].orb = 6.9
        func score(_ chart: NatalChart) -> Double? {
            RuleSelection.select(chart: chart, area: .general, base: base, count: 100)
                .first {
                    if case .aspect(let pair, .trine, _) = $0.factor { pair.description == "Sun-Mars" } else { false }
                }?
                .score
        }
        let tight = try #require(score(exact))
        if let wide = score(loose) { #expect(tight > wide * 1.3) }
    }
}
