import Foundation
import Testing

@testable import Postgres

@Suite struct EncodingTests {
    @Test func encodesScalars() {
        #expect("héllo 'x'".postgresParameter == PostgresParameter(text: "héllo 'x'", typeOID: 0))
        #expect(42.postgresParameter == PostgresParameter(text: "42", typeOID: 20))
        #expect(Int64.min.postgresParameter.text == "-9223372036854775808")
        #expect(Int32(-7).postgresParameter == PostgresParameter(text: "-7", typeOID: 23))
        #expect(true.postgresParameter == PostgresParameter(text: "true", typeOID: 16))
        #expect(false.postgresParameter.text == "false")
        #expect(1.5.postgresParameter == PostgresParameter(text: "1.5", typeOID: 701))
        #expect(Double.nan.postgresParameter.text == "NaN")
        #expect((-Double.infinity).postgresParameter.text == "-Infinity")
        #expect(Double(0.1).postgresParameter.text == "0.1")
    }

    @Test func encodesDecimal() throws {
        let value = try #require(
            Decimal(string: "-12345678901234567890.000123", locale: Locale(identifier: "en_US_POSIX"))
        )
        #expect(value.postgresParameter == PostgresParameter(text: "-12345678901234567890.000123", typeOID: 1700))
        #expect(Decimal.nan.postgresParameter.text == "NaN")
    }

    @Test func encodesUUIDLowercase() throws {
        let id = try #require(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(id.postgresParameter == PostgresParameter(text: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", typeOID: 2950))
    }

    @Test func encodesDatesInUTCWithMicroseconds() {
        // 2026-11-22 10:00:00 UTC = 1795341600 s since 1970.
        let date = Date(timeIntervalSince1970: 1_795_341_600.123456)
        #expect(date.postgresParameter == PostgresParameter(text: "2026-11-22 10:00:00.123456+00", typeOID: 1184))
        #expect(Date(timeIntervalSince1970: 0).postgresParameter.text == "1970-01-01 00:00:00.000000+00")
        #expect(Date(timeIntervalSince1970: -0.5).postgresParameter.text == "1969-12-31 23:59:59.500000+00")
        #expect(Date(timeIntervalSince1970: 951_782_400).postgresParameter.text == "2000-02-29 00:00:00.000000+00")
    }

    /// `bytea` travels in binary format, the bytes as they are: no hex text twice their size.
    @Test func encodesByteaAsBinary() {
        let bytes = Data([0x00, 0x0F, 0xA0, 0xFF])
        #expect(bytes.postgresParameter == PostgresParameter(binary: bytes, typeOID: 17))
        #expect(bytes.postgresParameter.value == .binary(bytes))
        #expect(bytes.postgresParameter.text == nil)
        #expect(Data().postgresParameter.value == .binary(Data()))
        #expect(Data?.none.postgresParameter == PostgresParameter(text: nil, typeOID: 17))
        #expect(PostgresParameter(text: "x").value == .text("x"))
    }

    @Test func encodesNilAsTypedNull() throws {
        let none: Int? = nil
        #expect(none.postgresParameter == PostgresParameter(text: nil, typeOID: 20))
        let some: String? = "x"
        #expect(some.postgresParameter.text == "x")
        let date: Date? = nil
        #expect(try date.makePostgresParameter() == PostgresParameter(text: nil, typeOID: 1184))
    }

    struct Payload: Codable, Sendable, Equatable {
        var zeta: Int
        var alpha: String
        var when: Date
    }

    @Test func encodesJSONWithSortedKeysAndISODates() throws {
        let payload = Payload(zeta: 1, alpha: "a\"b", when: Date(timeIntervalSince1970: 0))
        let parameter = try PostgresJSON(payload).makePostgresParameter()
        #expect(parameter.typeOID == 3802)
        #expect(parameter.text == #"{"alpha":"a\"b","when":"1970-01-01T00:00:00Z","zeta":1}"#)
        #expect(PostgresRawJSON(#"{"a":1}"#).postgresParameter == PostgresParameter(text: #"{"a":1}"#, typeOID: 3802))
    }

    @Test func jsonEncodingFailureIsAnEncodingError() {
        let bad = PostgresJSON([Double.nan])
        #expect {
            try bad.makePostgresParameter()
        } throws: { error in
            (error as? PostgresError)?.kind == .encoding
        }
        let wrapped: PostgresJSON<[Double]>? = bad
        #expect(throws: PostgresError.self) { try wrapped.makePostgresParameter() }
    }

    @Test func sqlLiteralAndUnsafeSQL() {
        let literal: SQL = "SELECT $1"
        #expect(literal.text == "SELECT $1")
        let table = "users"
        let assembled = SQL(unsafeSQL: "SELECT * FROM " + table)
        #expect(assembled.text == "SELECT * FROM users")
        #expect(SQL(unsafeSQL: "SELECT $1") == literal)
    }
}

@Suite struct DecodingTests {
    private func row(_ values: [String: (String?, UInt32)]) -> PostgresRow {
        let names = values.keys.sorted()
        return PostgresRow(
            columns: PostgresColumns(names: names, typeOIDs: names.map { values[$0]!.1 }),
            values: names.map { values[$0]!.0.map(PostgresCell.text) }
        )
    }

    private func binaryRow(_ values: [String: (Data?, UInt32)]) -> PostgresRow {
        let names = values.keys.sorted()
        return PostgresRow(
            columns: PostgresColumns(names: names, typeOIDs: names.map { values[$0]!.1 }),
            values: names.map { values[$0]!.0.map(PostgresCell.binary) }
        )
    }

    @Test func decodesTimestamps() throws {
        let utc = try Date.decode(postgresText: "2026-11-22 10:00:00.123456+00", typeOID: 1184)
        #expect(abs(utc.timeIntervalSince1970 - 1_795_341_600.123456) < 0.000_001)
        let nepal = try Date.decode(postgresText: "2026-11-22 15:45:00+05:45", typeOID: 1184)
        #expect(nepal.timeIntervalSince1970 == 1_795_341_600)
        let negative = try Date.decode(postgresText: "2026-11-22 05:30:00.5-04:30", typeOID: 1184)
        #expect(negative.timeIntervalSince1970 == 1_795_341_600.5)
        let plain = try Date.decode(postgresText: "2026-11-22 10:00:00", typeOID: 1114)
        #expect(plain.timeIntervalSince1970 == 1_795_341_600)
        let iso = try Date.decode(postgresText: "2026-11-22T10:00:00Z", typeOID: 1184)
        #expect(iso.timeIntervalSince1970 == 1_795_341_600)
        let day = try Date.decode(postgresText: "2026-11-22", typeOID: 1082)
        #expect(day.timeIntervalSince1970 == 1_795_305_600)
        let historic = try Date.decode(postgresText: "1901-12-13 20:45:52+00:00:20", typeOID: 1184)
        #expect(historic.timeIntervalSince1970 == -2_147_483_668)
        for bad in ["2026-13-01 00:00:00+00", "22/11/2026", "2026-11-22 10:00", "2026-11-22 10:00:00+", "infinity", ""]
        {
            #expect(throws: PostgresError.self) { try Date.decode(postgresText: bad, typeOID: 1184) }
        }
    }

    /// The ends of PostgreSQL's range are encoded; anything past them is refused (a typed null
    /// error), never an overflow trap — even for the years just past 294276 where an Int64 sum
    /// of microseconds once overflowed.
    @Test func datesOutsidePostgresRangeAreRefusedNotTrapped() throws {
        // (A Double holds no microseconds out there: the last second comes out a little short.)
        let last = Date(timeIntervalSince1970: 9_224_318_015_999).postgresParameter.text
        #expect(last?.hasPrefix("294276-12-31 23:59:5") == true, "\(last ?? "nil")")
        #expect(
            Date(timeIntervalSince1970: -210_866_803_200).postgresParameter.text == "4714-11-24 00:00:00.000000+00 BC"
        )
        for seconds in [
            9_224_318_016_000.0, 9_224_318_016_000 + 978_307_200.0, 9.3e12, 1e300, -210_866_803_201, -1e300,
        ] {
            #expect(throws: PostgresError.self, "\(seconds)") {
                try Date(timeIntervalSince1970: seconds).makePostgresParameter()
            }
        }
    }

    @Test func timestampTextRoundTrips() throws {
        for seconds in [0.0, 1_795_341_600.123456, -1_000_000_000.000001, 4_102_444_799.999999] {
            let date = Date(timeIntervalSince1970: seconds)
            let text = try #require(date.postgresParameter.text)
            let back = try Date.decode(postgresText: text, typeOID: 1184)
            #expect(abs(back.timeIntervalSince1970 - seconds) < 0.000_001, "\(text)")
        }
    }

    @Test func decodesScalars() throws {
        #expect(try Int.decode(postgresText: "-42", typeOID: 20) == -42)
        #expect(try Int32.decode(postgresText: "2147483647", typeOID: 23) == .max)
        #expect(throws: PostgresError.self) { try Int32.decode(postgresText: "2147483648", typeOID: 20) }
        #expect(try Int64.decode(postgresText: "9223372036854775807", typeOID: 20) == .max)
        #expect(try Bool.decode(postgresText: "t", typeOID: 16))
        #expect(try !Bool.decode(postgresText: "f", typeOID: 16))
        #expect(throws: PostgresError.self) { try Bool.decode(postgresText: "yes", typeOID: 16) }
        #expect(try Double.decode(postgresText: "0.30000000000000004", typeOID: 701) == 0.1 + 0.2)
        #expect(try Double.decode(postgresText: "-Infinity", typeOID: 701) == -.infinity)
        #expect(try Double.decode(postgresText: "NaN", typeOID: 701).isNaN)
        #expect(try String.decode(postgresText: "x'y", typeOID: 25) == "x'y")
    }

    @Test func decodesNumericExactly() throws {
        let value = try Decimal.decode(postgresText: "12345678901234567890.000123", typeOID: 1700)
        #expect(value.description == "12345678901234567890.000123")
        #expect(try Decimal.decode(postgresText: "-0.5", typeOID: 1700) == Decimal(-0.5))
        #expect(try Decimal.decode(postgresText: "NaN", typeOID: 1700).isNaN)
        for bad in ["12abc", "", ".", "1e", "1.2.3", "--1"] {
            #expect(throws: PostgresError.self, "\(bad)") { try Decimal.decode(postgresText: bad, typeOID: 1700) }
        }
    }

    @Test func decodesUUIDAndBytea() throws {
        let id = try UUID.decode(postgresText: "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", typeOID: 2950)
        #expect(id.uuidString == "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        #expect(try Data.decode(postgresText: "\\x000fA0ff", typeOID: 17) == Data([0x00, 0x0F, 0xA0, 0xFF]))
        #expect(try Data.decode(postgresText: "\\x", typeOID: 17).isEmpty)
        #expect(throws: PostgresError.self) { try Data.decode(postgresText: "\\x0", typeOID: 17) }
        #expect(throws: PostgresError.self) { try Data.decode(postgresText: "abc\\000", typeOID: 17) }
    }

    /// What a `resultFormat: .binary` query reads: bytea as it is, text as UTF-8, big-endian
    /// integers, one-byte bool, 16-byte uuid, jsonb after its version byte; other types refused.
    @Test func decodesBinaryFormat() throws {
        let blob = Data((0..<300).map { UInt8($0 % 256) })
        let id = UUID()
        let row = binaryRow([
            "blob": (blob, 17), "empty": (Data(), 17), "text": (Data("Київ".utf8), 25),
            "i2": (Data([0xFF, 0xFE]), 21), "i4": (Data([0x80, 0, 0, 0]), 23),
            "i8": (Data([0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]), 20), "t": (Data([1]), 16),
            "f": (Data([0]), 16), "id": (withUnsafeBytes(of: id.uuid) { Data($0) }, 2950),
            "doc": (Data([1]) + Data(#"{"at": "2026-11-22T10:00:00Z", "name": "Kyiv"}"#.utf8), 3802),
            "none": (nil, 17), "f8": (Data(count: 8), 701),
        ])
        #expect(try row.decode(Data.self, "blob") == blob)
        #expect(try row.decode(Data.self, "empty").isEmpty)
        #expect(try row.decode(Data?.self, "none") == nil)
        #expect(try row.decode(String.self, "text") == "Київ")
        #expect(try row.decode(Int.self, "i2") == -2)
        #expect(try row.decode(Int32.self, "i4") == .min)
        #expect(try row.decode(Int64.self, "i8") == .max)
        #expect(throws: PostgresError.self) { try row.decode(Int32.self, "i8") }
        #expect(try row.decode(Bool.self, "t") && !row.decode(Bool.self, "f"))
        #expect(try row.decode(UUID.self, "id") == id)
        #expect(try row.decodeJSON(Payload.self, "doc").name == "Kyiv")
        #expect(row.rawText("text") == nil)
        let refused = #expect(throws: PostgresError.self) { try row.decode(Double.self, "f8") }
        #expect(refused?.kind == .decoding && refused?.message.contains("\"f8\"") == true)
        #expect(throws: PostgresError.self) { try row.decode(Data.self, "text") }
        #expect(throws: PostgresError.self) { try row.decode(String.self, "blob") }
        #expect(throws: PostgresError.self) { try row.decode(Int.self, "blob") }
        #expect(throws: PostgresError.self) { try row.decode(UUID.self, "i8") }
    }

    @Test func rowDecodingNamesColumnAndType() throws {
        let row = row(["n": ("7", 23), "missing": (nil, 25), "bad": ("x", 20)])
        #expect(try row.decode(Int.self, "n") == 7)
        #expect(try row.decode(Int?.self, "missing") == nil)
        #expect(try row.isNull("missing"))
        #expect(try !row.isNull("n"))
        #expect(row.rawText("n") == "7")
        #expect(row.rawText("nope") == nil)

        let nullError = #expect(throws: PostgresError.self) { try row.decode(String.self, "missing") }
        #expect(nullError?.kind == .decoding)
        #expect(nullError?.message.contains("\"missing\"") == true)
        #expect(nullError?.message.contains("NULL") == true)

        let unknown = #expect(throws: PostgresError.self) { try row.decode(Int.self, "nope") }
        #expect(unknown?.message.contains("\"nope\"") == true)

        let unparsable = #expect(throws: PostgresError.self) { try row.decode(Int.self, "bad") }
        #expect(unparsable?.message.contains("\"bad\"") == true)
        #expect(unparsable?.message.contains("int8") == true)
        #expect(unparsable?.message.contains("Int") == true)
        #expect(unparsable?.description.contains("\"x\"") == false)
    }

    struct Payload: Codable, Equatable {
        var name: String
        var at: Date
    }

    @Test func decodesJSONColumns() throws {
        let row = row([
            "doc": (#"{"at": "2026-11-22T10:00:00Z", "name": "Kyiv"}"#, 3802), "none": (nil, 3802),
            "wrong": (#"{"name": 5}"#, 3802),
        ])
        let payload = try row.decodeJSON(Payload.self, "doc")
        #expect(payload == Payload(name: "Kyiv", at: Date(timeIntervalSince1970: 1_795_341_600)))
        #expect(try row.decodeJSON(Payload?.self, "none") == nil)
        #expect(throws: PostgresError.self) { try row.decodeJSON(Payload.self, "none") }
        let error = #expect(throws: PostgresError.self) { try row.decodeJSON(Payload.self, "wrong") }
        #expect(error?.kind == .decoding)
        #expect(error?.message.contains("\"wrong\"") == true)
    }
}
