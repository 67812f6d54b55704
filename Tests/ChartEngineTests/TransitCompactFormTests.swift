import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Testing

/// Issue 29, F7: the compact stored form of a transit result holds the engine's report exactly
/// and takes a fraction of the bytes, for a month and for the longest range (366 days).
@Suite struct TransitCompactFormTests {
    static let engine: Result<ChartEngine, any Error> = Result { ChartEngine(ephemeris: try Ephemeris()) }

    @Test(arguments: [30, 366])
    func theCompactFormIsExactAndSmall(days: Int) async throws {
        let engine = try Self.engine.get()
        let birth = BirthData(
            name: "Me",
            birthDate: "1990-10-07",
            birthTime: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.4501,
            longitude: 30.5234,
            locationName: "Kyiv, Ukraine"
        )
        let natal = try await engine.chart(for: birth)
        let from = ChartJobInstant.date(year: 2025, month: 1, day: 1)
        let report = try await engine.transits(
            for: natal,
            from: from,
            to: from.addingTimeInterval(Double(days) * 86_400)
        )
        // What the chart-worker stored before (the report's JSON, one line), and what it stores now.
        let full = try JSONValue.parse(JSONCoding.encoder.encode(report)).jsonString()
        let compact = try report.compactJSON().jsonString()
        print("F7 transits, \(days) days: \(full.utf8.count) bytes as the full document, \(compact.utf8.count) compact")
        #expect(compact.utf8.count * 4 < full.utf8.count, "\(compact.utf8.count) of \(full.utf8.count)")
        // Expanded, it is the document the engine's report encodes to, byte for byte.
        let expanded = try TransitReport.expandedJSON(stored: compact)
        #expect(expanded == String(decoding: try JSONCoding.encoder.encode(report), as: UTF8.self))
        let back = try TransitReport(compactJSON: try JSONValue.parse(Data(compact.utf8)))
        #expect(back.transits.count == report.transits.count && back.ingresses.count == report.ingresses.count)
    }
}
