import Foundation
import Testing

@testable import AstroDomain

/// Issue 29, F7: the quota's setting and Retry-After, and the compact transit form's reading.
@Suite struct ChartResultBoundsTests {
    @Test func theQuotaSetting() throws {
        #expect(try ChartResultQuota(setting: nil).limit == 50)
        #expect(try ChartResultQuota(setting: "").limit == 50)
        #expect(try ChartResultQuota(setting: "7").limit == 7)
        #expect(try ChartResultQuota(setting: "off").limit == nil)
        for bad in ["0", "-1", "100001", "1.5", "ten", "OFF", "9999999999"] {
            #expect(throws: ChartResultQuota.SettingError.self, "\(bad)") { try ChartResultQuota(setting: bad) }
        }
        let quota = ChartResultQuota(limit: 2)
        #expect(quota.allowsAnother(computed: 1) && !quota.allowsAnother(computed: 2))
        #expect(ChartResultQuota(limit: nil).allowsAnother(computed: 1_000_000))
        #expect(quota.refusal(retryAfter: 5).code.rawValue == "chart-quota-exceeded")
    }

    @Test func retryAfterIsWhenTheOldestLeavesTheWindow() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(ChartResultQuota.retryAfter(oldest: now.addingTimeInterval(-86_000), now: now) == 400)
        #expect(ChartResultQuota.retryAfter(oldest: now.addingTimeInterval(-86_400), now: now) == 1)
        #expect(ChartResultQuota.retryAfter(oldest: now, now: now) == 86_400)
        #expect(ChartResultQuota.retryAfter(oldest: nil, now: now) == 86_400)
    }

    static let report = TransitReport(
        from: Date(timeIntervalSince1970: 1_767_225_600),
        to: Date(timeIntervalSince1970: 1_769_817_600),
        orbRule: "seed",
        transits: [
            Transit(
                transiting: .moon,
                natal: .ascendant,
                aspect: .trine,
                angle: 240,
                orb: 7.5,
                entersOrb: Date(timeIntervalSince1970: 1_767_225_000.1234),
                leavesOrb: nil,
                hits: [
                    TransitHit(exact: Date(timeIntervalSince1970: 1_767_300_000.9996), isRetrograde: false),
                    TransitHit(exact: Date(timeIntervalSince1970: 1_767_400_000.002), isRetrograde: true),
                ]
            )
        ],
        ingresses: [
            TransitIngress(
                planet: .mars,
                kind: .house,
                instant: Date(timeIntervalSince1970: 1_767_500_000.5),
                sign: .cancer,
                house: 4,
                isRetrograde: true
            ),
            TransitIngress(
                planet: .sun,
                kind: .sign,
                instant: Date(timeIntervalSince1970: 1_767_600_000),
                sign: .aquarius,
                house: nil,
                isRetrograde: false
            ),
        ],
        engineVersion: "chart-engine/1",
        ephemerisVersion: "swisseph/2.10.03"
    )

    @Test func theCompactFormExpandsToTheFullDocument() throws {
        let compact = try Self.report.compactJSON()
        #expect(TransitReport.isCompact(compact))
        let full = String(decoding: try JSONCoding.encoder.encode(Self.report), as: UTF8.self)
        #expect(try TransitReport.expandedJSON(stored: compact.jsonString()) == full)
        // A row stored before the compact form is served as it is.
        #expect(try TransitReport.expandedJSON(stored: full) == full)
    }

    @Test func aDamagedCompactDocumentIsRefusedWithItsPath() throws {
        guard case .object(var members) = try Self.report.compactJSON() else { throw CancellationError() }
        members["transits"] = .array([.array([1, 99, 0, 0, 1, .null, .null, [], 0])])
        #expect(throws: TransitReport.CompactFormError.self) {
            try TransitReport(compactJSON: .object(members))
        }
        members["transits"] = .array([])
        members["ingresses"] = .array([.array([0, 4, 0, 1.5, 0])])
        do {
            _ = try TransitReport(compactJSON: .object(members))
            Issue.record("a fraction of a millisecond was accepted")
        } catch {
            #expect(error.message.hasPrefix("ingresses[0][3]"))
        }
    }
}
