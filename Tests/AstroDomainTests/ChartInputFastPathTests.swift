import Foundation
import Testing

@testable import AstroDomain

/// The shortcuts of the chart input path give what the plain Foundation calls give.
@Suite struct ChartInputFastPathTests {
    @Test func trimmingShortcutMatchesFoundation() {
        let texts = [
            "", " ", "\n", "Kyiv", " Kyiv", "Kyiv ", "\tKyiv\n", "Ky iv", "\u{A0}Kyiv\u{2003}", "Kyiv\u{2028}",
            "e\u{301}", "\u{301}e", "🪐", " 🪐 ", "\u{85}x", "x\u{85}", "\u{200B}x",
        ]
        for text in texts {
            #expect(
                BirthData.trimmed(text) == text.trimmingCharacters(in: .whitespacesAndNewlines),
                "\(text.debugDescription)"
            )
        }
    }

    @Test func timeZonesAreCachedAndStillChecked() throws {
        let first = try BirthData.timeZone(named: "Europe/Kyiv")
        let second = try BirthData.timeZone(named: "Europe/Kyiv")
        #expect(first == second && first.identifier == "Europe/Kyiv")
        for _ in 0..<2 {
            #expect(throws: ChartInputError.self) { try BirthData.timeZone(named: "Mars/Olympus") }
            #expect(throws: ChartInputError.self) { try BirthData.timeZone(named: "PST") }
            #expect(throws: ChartInputError.self) { try BirthData.timeZone(named: "europe/kyiv") }
        }
    }

    @Test func parsingDatesAndTimesWithoutCopies() {
        #expect(BirthDate(parsing: "1990-10-07") == BirthDate(year: 1990, month: 10, day: 7))
        #expect(BirthDate(parsing: "2001-02-29") == nil)
        #expect(BirthDate(parsing: "1990-1-07") == nil)
        #expect(BirthDate(parsing: "1990-10-0٧") == nil)
        #expect(BirthTime(parsing: "23:59") == BirthTime(hour: 23, minute: 59))
        #expect(BirthTime(parsing: "24:00") == nil)
        #expect(BirthTime(parsing: String("x12:30".dropFirst())) == BirthTime(hour: 12, minute: 30))
    }
}
