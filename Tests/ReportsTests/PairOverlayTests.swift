import AstroDomain
import ChartEngine
import Foundation
import Testing

@testable import Reports

@Suite struct PairOverlayTests {
    static let writer = PairReportWriterTests.writer
    static let charts = PairReportWriterTests.charts

    /// A's Venus in B's 7th house.
    static let venusInSeventh = HouseOverlay(
        point: SynastryPointReference(chart: .a, point: .planet(.venus), longitude: 10),
        houseChart: .b,
        house: 7
    )

    @Test func headingsSayWhosePlanetIsInWhoseHouse() {
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let en = Self.writer.overlays(.en)
        let uk = Self.writer.overlays(.uk)
        #expect(
            en.heading(Self.venusInSeventh, couple: couple, pairPhrases: Self.writer.phrases(.en))
                == "Anna's Venus in Oleh's 7th house"
        )
        #expect(
            uk.heading(Self.venusInSeventh, couple: couple, pairPhrases: Self.writer.phrases(.uk))
                == "Венера (Anna) у 7-му будинку (Oleh)"
        )
        var mirrored = Self.venusInSeventh
        mirrored.point.chart = .b
        mirrored.houseChart = .a
        mirrored.house = 1
        #expect(
            en.heading(mirrored, couple: couple, pairPhrases: Self.writer.phrases(.en))
                == "Oleh's Venus in Anna's 1st house"
        )
        #expect(
            uk.heading(
                mirrored,
                couple: ReportCouple(nameA: "Олег", nameB: "Анна"),
                pairPhrases: Self.writer.phrases(.uk)
            )
                == "Венера (Анна) у 1-му будинку (Олег)"
        )
    }

    @Test(arguments: ReportLanguage.allCases)
    func theReportHasTheStrongestOverlaysBeforeTheClosing(language: ReportLanguage) throws {
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let overlays = Self.writer.overlays(language)
        let words = Self.writer.phrases(language)
        for (a, b) in [(Self.charts[0], Self.charts[1]), (Self.charts[1], Self.charts[2])] {
            let (report, synastry) = try PairReportWriterTests.report(a, b, couple, language)
            let selected = overlays.select(synastry, count: PairOverlays.maximumInReport)
            #expect(selected.count == PairOverlays.maximumInReport)
            // Strongest first, and nothing left out is stronger than what was chosen.
            #expect(zip(selected, selected.dropFirst()).allSatisfy { $0.rule.weight >= $1.rule.weight })
            let all = overlays.select(synastry, count: 100)
            #expect(all.count == 20)
            #expect(all.dropFirst(selected.count).allSatisfy { $0.rule.weight <= selected.last!.rule.weight })
            // The section sits between the inter-aspects and the closing.
            let section = try #require(report.text.range(of: "\n" + overlays.phrases.section + "\n"))
            let contacts = try #require(report.text.range(of: "\n" + words.headings.contacts + "\n"))
            let closing = try #require(report.text.range(of: "\n" + words.headings.closing + "\n"))
            #expect(contacts.upperBound <= section.lowerBound && section.upperBound <= closing.lowerBound)
            let sectionText = String(report.text[section.upperBound..<closing.lowerBound])
            for chosen in selected {
                let heading = overlays.heading(chosen.overlay, couple: couple, pairPhrases: words)
                #expect(sectionText.contains(heading + "\n" + chosen.rule.text), "\(chosen.key)")
                #expect(chosen.rule == overlays.knowledge.rule(planet: chosen.planet, house: chosen.overlay.house))
            }
            #expect(report.wordCount <= PairReportWriter.wordLimit)
            // The inter-aspect part is unchanged in shape: its paragraphs and keys only.
            #expect(report.analysis.allSatisfy { !$0.contains(overlays.phrases.section) })
            #expect(report.ruleKeys.allSatisfy { $0.hasPrefix("synastry ") })
            #expect(report.version.contains("+overlays-\(language.rawValue)-"))
        }
    }

    @Test(arguments: ReportLanguage.allCases)
    func swappingThePeopleKeepsEachPlanetWithItsOwner(language: ReportLanguage) throws {
        let (a, b) = (Self.charts[0], Self.charts[2])
        let overlays = Self.writer.overlays(language)
        let words = Self.writer.phrases(language)
        let anna = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let swapped = ReportCouple(nameA: "Oleh", nameB: "Anna")
        let (forward, synastry) = try PairReportWriterTests.report(a, b, anna, language)
        let (backward, reversed) = try PairReportWriterTests.report(b, a, swapped, language)
        let chosenForward = overlays.select(synastry, count: PairOverlays.maximumInReport)
        let chosenBackward = overlays.select(reversed, count: PairOverlays.maximumInReport)
        // The same placements, with the sides' letters swapped…
        let mirrored = chosenForward.map { chosen in
            "overlay \(chosen.overlay.point.chart.other.rawValue):\(chosen.planet.rawValue) "
                + "\(chosen.overlay.houseChart.other.rawValue):\(chosen.overlay.house)"
        }
        #expect(Set(mirrored) == Set(chosenBackward.map(\.key)))
        for chosen in chosenForward {
            // …and the same heading in both reports: the planet still named with its owner.
            let heading = overlays.heading(chosen.overlay, couple: anna, pairPhrases: words)
            #expect(forward.text.contains(heading), "\(chosen.key)")
            #expect(backward.text.contains(heading), "\(chosen.key)")
            let owner = chosen.overlay.point.chart == .a ? "Anna" : "Oleh"
            #expect(heading.hasPrefix(words.owned(.planet(chosen.planet), by: owner)))
            // The planet is the owner's chart's planet.
            let chart = chosen.overlay.point.chart == .a ? a : b
            let planet = try #require(chart.planets.first { $0.name == chosen.planet })
            #expect(abs(planet.longitude - chosen.overlay.point.longitude) < 1e-9)
        }
    }

    @Test(arguments: ReportLanguage.allCases)
    func thePairPromptCarriesTheOverlays(language: ReportLanguage) throws {
        let (a, b) = (Self.charts[0], Self.charts[1])
        let synastry = try ChartEngine.synastry(a, b)
        let couple = ReportCouple(nameA: "Anna", nameB: "Oleh")
        let overlays = Self.writer.overlays(language)
        let words = Self.writer.phrases(language)
        let prompt = ReportPrompt.buildPair(
            chartA: a,
            chartB: b,
            synastry: synastry,
            score: CompatibilityScoring.score(synastry),
            couple: couple,
            language: language,
            phrases: words,
            templates: try PromptTemplates.load(language),
            overlays: overlays
        )
        #expect(prompt.user.contains(overlays.phrases.prompt))
        let listed = overlays.select(synastry, count: PairOverlays.maximumInPrompt)
        #expect(listed.count == PairOverlays.maximumInPrompt)
        for (index, chosen) in listed.enumerated() {
            #expect(
                prompt.user.contains(
                    "\(index + 1). " + overlays.heading(chosen.overlay, couple: couple, pairPhrases: words)
                )
            )
        }
        #expect(!prompt.user.contains("{"))
        #expect(prompt.estimatedTokens <= ReportPrompt.tokenBudget)
        // Without overlays the prompt is the inter-aspect prompt alone.
        let plain = ReportPrompt.buildPair(
            chartA: a,
            chartB: b,
            synastry: synastry,
            score: CompatibilityScoring.score(synastry),
            couple: couple,
            language: language,
            phrases: words,
            templates: try PromptTemplates.load(language)
        )
        #expect(!plain.user.contains(overlays.phrases.prompt))
    }
}
