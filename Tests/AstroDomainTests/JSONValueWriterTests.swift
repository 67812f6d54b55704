import AstroDomain
import Foundation
import Testing

/// The hand-written JSON writer says what Foundation's encoder says.
@Suite struct JSONValueWriterTests {
    /// A deterministic variety of values: every kind, nested, with the strings that need
    /// escaping and numbers of every shape.
    static func values(count: Int) -> [JSONValue] {
        var state: UInt64 = 0x1234_5678
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        let strings = [
            "", "plain", "quote \" and backslash \\", "line\nbreak\ttab\r", "slash / stays", "\u{0}\u{1}\u{1F}\u{7F}",
            "Київ — ґанок", "emoji 🦊 and é", "\u{8}\u{C}",
        ]
        let numbers: [Double] = [
            0, -0.0, 1, -1, 42, 0.1, -2.5, 1e-7, 123_456.789, 9_007_199_254_740_992, 1.5e300, 3.14159,
        ]
        func value(depth: Int) -> JSONValue {
            switch next() % (depth > 2 ? 4 : 6) {
            case 0: return .null
            case 1: return .bool(next() % 2 == 0)
            case 2: return .number(numbers[Int(next() % UInt64(numbers.count))])
            case 3: return .string(strings[Int(next() % UInt64(strings.count))])
            case 4: return .array((0..<Int(next() % 4)).map { _ in value(depth: depth + 1) })
            default:
                var members: [String: JSONValue] = [:]
                for _ in 0..<Int(next() % 5) {
                    members[strings[Int(next() % UInt64(strings.count))] + "k\(next() % 3)"] = value(depth: depth + 1)
                }
                return .object(members)
            }
        }
        return (0..<count).map { _ in value(depth: 0) }
    }

    @Test func itReadsBackAsWhatFoundationWrites() throws {
        for value in Self.values(count: 500) {
            let ours = value.jsonData()
            let foundation = try JSONCoding.encoder.encode(value)
            let fromOurs = try JSONDecoder().decode(JSONValue.self, from: ours)
            let fromFoundation = try JSONDecoder().decode(JSONValue.self, from: foundation)
            #expect(fromOurs == fromFoundation, "\(String(decoding: ours, as: UTF8.self))")
        }
    }

    @Test func eventsKeepTheirExactShape() throws {
        let value: JSONValue = [
            "jobId": "0b6e8c1e-0000-4000-8000-000000000001", "count": 3, "ratio": 0.5, "ok": true,
            "list": [1, "two", nil], "path": "a/b", "text": "say \"hi\"\n",
        ]
        #expect(
            value.jsonString()
                == #"{"count":3,"jobId":"0b6e8c1e-0000-4000-8000-000000000001","list":[1,"two",null],"ok":true,"path":"a/b","ratio":0.5,"text":"say \"hi\"\n"}"#
        )
        // Byte for byte what Foundation's encoder writes for such a value.
        #expect(value.jsonData() == (try JSONCoding.encoder.encode(value)))
        #expect(JSONValue.number(.infinity).jsonString() == "null")
    }

    @Test func theParserReadsWhatFoundationReads() throws {
        for value in Self.values(count: 500) {
            let foundation = try JSONCoding.encoder.encode(value)
            #expect(try JSONValue.parse(foundation) == JSONDecoder().decode(JSONValue.self, from: foundation))
            #expect(try JSONValue.parse(value.jsonData()) == JSONDecoder().decode(JSONValue.self, from: foundation))
        }
        let spaced = Data(#"  { "a" : [ 1 , -2.5e3 , true , null ] , "b" : "\u00e9\ud83e\udd8a\/\n" }  "#.utf8)
        #expect(try JSONValue.parse(spaced) == ["a": [1, -2500, true, nil], "b": "é🦊/\n"])
    }

    @Test(arguments: [
        "", "{", "[1,]", #"{"a":}"#, "tru", "01", "1.", "-", #""\x""#, "\"\u{1}\"", "{} x", #""\ud800""#,
        #"{"a" 1}"#, "[1 2]", "1e", #"{1:2}"#, String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
    ])
    func theParserRefusesWhatIsNotJSON(text: String) {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Data(text.utf8)) }
        // Foundation refuses it too — except a trailing comma, which it lets through, and the
        // depth limit, which is ours.
        if !text.hasPrefix("[[["), text != "[1,]" {
            #expect(throws: (any Error).self) { try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) }
        }
    }
}
