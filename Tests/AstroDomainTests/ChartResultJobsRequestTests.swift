import AstroDomain
import Foundation
import Testing

/// The chart result jobs' bodies: what they accept, their canonical parameters, and the code
/// each refusal carries.
@Suite struct ChartResultJobsRequestTests {
    let ids: [String: JSONValue] = [
        "jobId": "9b2f0a52-4a1f-4c4e-9d35-0a6b0e7c1111", "userId": "4c1a0a52-4a1f-4c4e-9d35-0a6b0e7c2222",
        "profileId": "5d2b0a52-4a1f-4c4e-9d35-0a6b0e7c3333",
    ]
    let partner: JSONValue = "6e3c0a52-4a1f-4c4e-9d35-0a6b0e7c4444"

    func body(_ extra: [String: JSONValue]) -> Data {
        JSONValue.object(ids.merging(extra) { _, new in new }).jsonData()
    }

    /// The code of the refusal, `nil` when accepted, `not-a-ChartJobError` for any other error.
    func code(_ decode: () throws -> Any) -> String? {
        do {
            _ = try decode()
            return nil
        } catch let error as ChartJobError {
            return error.code.rawValue
        } catch {
            return "not-a-ChartJobError"
        }
    }

    @Test func instantsAreDatesOrUTCInstantsWrittenBackCanonically() throws {
        #expect(ChartJobInstant.parse("2026-03-01").map(ChartJobInstant.text) == "2026-03-01T00:00:00Z")
        #expect(ChartJobInstant.parse("2026-03-01T12:34Z").map(ChartJobInstant.text) == "2026-03-01T12:34:00Z")
        #expect(ChartJobInstant.parse("2026-03-01T12:34:56.789Z").map(ChartJobInstant.text) == "2026-03-01T12:34:56Z")
        #expect(ChartJobInstant.parse("2026-03-01T02:00:00+02:00").map(ChartJobInstant.text) == "2026-03-01T00:00:00Z")
        #expect(ChartJobInstant.parse("1899-12-31T23:00:00-01:30").map(ChartJobInstant.text) == "1900-01-01T00:30:00Z")
        #expect(ChartJobInstant.parse("2024-02-29") != nil)
        for bad in [
            "2026-02-29", "2026-13-01", "2026-03-01T24:00Z", "2026-03-01T12:00", "2026-3-1", "",
            "2026-03-01T12:00:00ZZ",
            "2026-03-01 12:00:00Z", String(repeating: "2", count: 100),
        ] {
            #expect(ChartJobInstant.parse(bad) == nil, "\(bad)")
        }
        #expect(ChartJobInstant.date(year: 1970, month: 1, day: 1).timeIntervalSince1970 == 0)
        #expect(ChartJobInstant.text(ChartResultLimits.latest) == "2101-01-01T00:00:00Z")
    }

    @Test func synastryNeedsTwoProfilesAndABoundedOrb() throws {
        let request = try ChartSynastryRequest.decode(from: body(["partnerProfileId": partner, "angleMaxOrb": 2.5]))
        #expect(request.parameters == ["partnerProfileId": partner, "angleMaxOrb": 2.5])
        #expect(try ChartSynastryRequest(json: request.json) == request)
        #expect(code { try ChartSynastryRequest.decode(from: body([:])) } == "missing-field")
        #expect(
            code { try ChartSynastryRequest.decode(from: body(["partnerProfileId": ids["profileId"]!])) }
                == "same-profile"
        )
        #expect(
            code { try ChartSynastryRequest.decode(from: body(["partnerProfileId": partner, "angleMaxOrb": 9])) }
                == "invalid-orb"
        )
        #expect(code { try ChartSynastryRequest.decode(from: body(["partnerProfileId": "nope"])) } == "invalid-id")
        #expect(code { try ChartSynastryRequest.decode(from: Data("[1]".utf8)) } == "invalid-json")
        #expect(code { try ChartSynastryRequest.decode(from: body(["partnerProfileId": 7])) } == "invalid-field-type")
    }

    @Test func transitRangesAreAtMost366DaysInside1900To2101() throws {
        let year = try ChartTransitsRequest.decode(from: body(["from": "2024-01-01", "to": "2025-01-01"]))
        #expect(year.parameters == ["from": "2024-01-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"])
        #expect(try ChartTransitsRequest(json: year.json) == year)
        for (from, to) in [
            ("2024-01-01", "2025-01-02"), ("2026-01-02", "2026-01-01"), ("2026-01-01", "2026-01-01"),
            ("1899-12-31", "1900-02-01"), ("2100-12-01", "2101-01-01T00:00:01Z"),
        ] {
            #expect(
                code { try ChartTransitsRequest.decode(from: body(["from": .string(from), "to": .string(to)])) }
                    == "invalid-range",
                "\(from) \(to)"
            )
        }
        #expect(
            code { try ChartTransitsRequest.decode(from: body(["from": "yesterday", "to": "2026-01-01"])) }
                == "invalid-date"
        )
        #expect(
            try ChartTransitsRequest.decode(from: body(["from": "2100-01-01", "to": "2101-01-01"])).to
                == ChartResultLimits.latest
        )
    }

    @Test func returnsTakeTheirOwnFieldsOnly() throws {
        let solar = try ChartReturnRequest.decode(
            from: body([
                "kind": "solar-return", "year": 2027,
                "place": ["latitude": 48.85, "longitude": -0, "timezone": "Europe/Paris", "locationName": " Paris "],
            ])
        )
        #expect(
            solar.place
                == ChartReturnPlace(latitude: 48.85, longitude: 0, timezone: "Europe/Paris", locationName: "Paris")
        )
        #expect(solar.parameters["place"]?["longitude"] == 0)
        #expect(try ChartReturnRequest(json: solar.json) == solar)
        let progressed = try ChartReturnRequest.decode(from: body(["kind": "progressed", "date": "2030-05-01"]))
        #expect(progressed.parameters == ["kind": "progressed", "date": "2030-05-01T00:00:00Z"])
        let cases: [([String: JSONValue], String)] = [
            (["kind": "lunar"], "invalid-kind"),
            (["kind": "solar-return"], "invalid-year"),
            (["kind": "solar-return", "year": 1899], "invalid-year"),
            (["kind": "solar-return", "year": 2027.5], "invalid-year"),
            (["kind": "solar-return", "year": 2027, "date": "2027-01-01"], "invalid-date"),
            (["kind": "solar-return", "year": 2027, "place": ["latitude": 91, "longitude": 0]], "invalid-place"),
            (["kind": "solar-return", "year": 2027, "place": ["latitude": 0]], "invalid-place"),
            (
                [
                    "kind": "solar-return", "year": 2027,
                    "place": ["latitude": 0, "longitude": 0, "timezone": "Mars/Base"],
                ], "invalid-place"
            ),
            (
                [
                    "kind": "solar-return", "year": 2027,
                    "place": ["latitude": 0, "longitude": 0, "locationName": "a\u{1B}b"],
                ], "invalid-place"
            ),
            (["kind": "solar-return", "year": 2027, "place": "Paris"], "invalid-json"),
            (["kind": "progressed"], "missing-field"),
            (["kind": "progressed", "date": "2101-01-01"], "invalid-range"),
            (["kind": "progressed", "date": "2030-01-01", "year": 2030], "invalid-year"),
            (["kind": "progressed", "date": "2030-01-01", "place": ["latitude": 0, "longitude": 0]], "invalid-place"),
        ]
        for (extra, expected) in cases {
            #expect(code { try ChartReturnRequest.decode(from: body(extra)) } == expected, "\(extra)")
        }
    }

    @Test func wheelsNameTheirPartnerThemeAndInstant() throws {
        let natal = try ChartRenderRequest.decode(from: body(["wheel": "natal", "partnerProfileId": partner]))
        #expect(natal.partnerProfileID == nil && natal.theme == .light)
        #expect(natal.parameters == ["wheel": "natal", "theme": "light"])
        let transits = try ChartRenderRequest.decode(
            from: body(["wheel": "transits", "at": "2026-11-24T18:00:00Z", "theme": "dark"])
        )
        #expect(transits.parameters == ["wheel": "transits", "theme": "dark", "at": "2026-11-24T18:00:00Z"])
        #expect(try ChartRenderRequest(json: transits.json) == transits)
        #expect(code { try ChartRenderRequest.decode(from: body(["wheel": "synastry"])) } == "missing-field")
        #expect(
            code {
                try ChartRenderRequest.decode(from: body(["wheel": "synastry", "partnerProfileId": ids["profileId"]!]))
            } == "same-profile"
        )
        #expect(
            code { try ChartRenderRequest.decode(from: body(["wheel": "natal", "theme": "blue"])) } == "invalid-theme"
        )
        #expect(code { try ChartRenderRequest.decode(from: body(["wheel": "moon"])) } == "invalid-wheel")
        #expect(
            code { try ChartRenderRequest.decode(from: body(["wheel": "transits", "at": "2101-01-01"])) }
                == "invalid-range"
        )
    }
}
