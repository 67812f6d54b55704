import AstroDomain
import Foundation
import Testing

@testable import Reports

@Suite struct BuiltInReportWriterTests {
    static let writer = try! BuiltInReportWriter()
    static let charts: [String: NatalChart] = Dictionary(
        uniqueKeysWithValues: ["kyiv-1990-10-07", "sao-paulo-1985-03-21", "kathmandu-2001-12-24"].map { name in
            let url = Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "json")!
            return (name, try! JSONCoding.decoder.decode(NatalChart.self, from: Data(contentsOf: url)))
        }
    )

    @Test(arguments: ReportArea.allCases, ReportLanguage.allCases)
    func reportsHaveTheSeedsShapeAndLength(area: ReportArea, language: ReportLanguage) throws {
        let headings =
            language == .en
            ? ["Key influences", "Detailed analysis", "Practical recommendations"]
            : ["Ключові впливи", "Детальний аналіз", "Практичні рекомендації"]
        for (name, chart) in Self.charts {
            let report = Self.writer.write(chart: chart, area: area, language: language)
            #expect(
                BuiltInReportWriter.wordRange.contains(report.wordCount),
                "\(name) \(area) \(language): \(report.wordCount) words"
            )
            #expect(report.wordCount == BuiltInReportWriter.countWords(report.text))
            var position = report.text.startIndex
            for heading in headings {
                let found = report.text.range(of: "\n" + heading + "\n", range: position..<report.text.endIndex)
                #expect(found != nil, "\(name) \(area) \(language): no \(heading) (in order)")
                position = found?.upperBound ?? position
            }
            let sentences = report.keyInfluences.split(whereSeparator: { ".!?".contains($0) })
                .filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            #expect((2...3).contains(sentences.count), "\(name) \(area) \(language): \(sentences.count) sentences")
            #expect((3...4).contains(report.recommendations.count))
            #expect(report.analysis.count >= 4)
            #expect(report.writer == "built-in")
        }
    }

    @Test func theReportNamesTheChartsActualPlacements() throws {
        let chart = try #require(Self.charts["kyiv-1990-10-07"])
        let english = Self.writer.write(chart: chart, area: .career, language: .en)
        #expect(english.text.contains("Midheaven in Scorpio"))
        let ukrainian = Self.writer.write(chart: chart, area: .career, language: .uk)
        #expect(ukrainian.text.contains("Середина неба (MC) у Скорпіоні"))
        // Every paragraph of the analysis opens with the placement it reads, as the chart has it.
        let base = Self.writer.knowledgeBase(.en)
        let selected = RuleSelection.select(chart: chart, area: .career, base: base)
        for paragraph in english.analysis {
            #expect(selected.contains { paragraph.contains($0.rule.text) })
        }
        let general = Self.writer.write(chart: chart, area: .general, language: .en)
        #expect(general.text.contains("The Sun in Libra") || general.text.contains("the Sun in Libra"))
    }

    @Test func ukrainianIsUkrainian() throws {
        for chart in Self.charts.values {
            for area in ReportArea.allCases {
                let text = Self.writer.write(chart: chart, area: area, language: .uk).text.lowercased()
                #expect(!text.contains { "ыэъё".contains($0) })
                #expect(text.contains("і") && text.contains("ї") && text.contains("є"))
                let latin = text.filter { ("a"..."z").contains(String($0)) }.count
                #expect(latin <= 4, "Latin letters in a Ukrainian report: \(latin)")
            }
        }
    }

    @Test func theSameInputGivesTheSameReport() throws {
        let chart = try #require(Self.charts["sao-paulo-1985-03-21"])
        let again = try BuiltInReportWriter()
        for area in ReportArea.allCases {
            #expect(
                Self.writer.write(chart: chart, area: area, language: .uk)
                    == again.write(chart: chart, area: area, language: .uk)
            )
        }
        let kyiv = try #require(Self.charts["kyiv-1990-10-07"])
        #expect(
            Self.writer.write(chart: chart, area: .career, language: .en).text
                != Self.writer.write(chart: kyiv, area: .career, language: .en).text
        )
    }

    @Test func ukrainianPrepositionsFollowEuphony() throws {
        let phrases = try ReportPhrases.load(.uk)
        #expect(phrases.name(.planetInSign(.sun, .aries, retrograde: false)) == "Сонце в Овні")
        #expect(phrases.name(.planetInSign(.mars, .capricorn, retrograde: false)) == "Марс у Козерозі")
        #expect(phrases.name(.planetInHouse(.venus, house: 8)) == "Венера в 8-му будинку")
        #expect(phrases.name(.aspect(PlanetPair(.sun, .saturn)!, .square, orb: 1)) == "Сонце в квадраті з Сатурном")
        #expect(
            phrases.name(.aspect(PlanetPair(.mars, .pluto)!, .conjunction, orb: 1)) == "Марс у з'єднанні з Плутоном"
        )
    }

    /// The word counter reads Unicode scalars for speed; it must count as a reader does: runs
    /// between whitespace (Characters) that hold a letter or a digit.
    @Test(arguments: ReportLanguage.allCases)
    func theFastWordCountMatchesTheCharacterDefinition(language: ReportLanguage) {
        func reference(_ text: String) -> Int {
            text.split(whereSeparator: \.isWhitespace).filter { $0.contains { $0.isLetter || $0.isNumber } }.count
        }
        let base = Self.writer.knowledgeBase(language)
        var texts = base.planetInSign.values.flatMap(\.values).map(\.text)
        texts += base.planetInHouse.values.flatMap(\.values).map(\.text)
        texts += base.aspects.values.flatMap(\.values).map(\.text)
        texts += base.angles.values.flatMap(\.values).map(\.text)
        texts += ["", "  ", "— 1. ok", "п'ять ʼслів — і 2024 рік\n\tкінець", "a\u{00A0}b", "x\u{2003}y z"]
        for text in texts {
            #expect(BuiltInReportWriter.countWords(text) == reference(text), "\(text.prefix(60))")
        }
    }
}
