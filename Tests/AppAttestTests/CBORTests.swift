import AppAttest
import Foundation
import Testing

@Suite struct CBORTests {
    let decoder = CBORDecoder()

    func decode(_ bytes: [UInt8], _ decoder: CBORDecoder = CBORDecoder()) throws(CBORError) -> CBORValue {
        try decoder.decode(Data(bytes))
    }

    func code(_ bytes: [UInt8], _ decoder: CBORDecoder = CBORDecoder()) -> CBORError.Code? {
        do {
            _ = try decoder.decode(Data(bytes))
            return nil
        } catch {
            return error.code
        }
    }

    @Test func decodesTheKindsAttestationObjectsUse() throws {
        // {"fmt": "apple-appattest", "n": [0, 23, 24, 65535, -1, -1000], "b": h'0102'}
        let value = CBORValue.map([
            CBORMapEntry(.text("fmt"), .text("apple-appattest")),
            CBORMapEntry(
                .text("n"),
                .array([.unsigned(0), .unsigned(23), .unsigned(24), .unsigned(65_535), .negative(0), .negative(999)])
            ),
            CBORMapEntry(.text("b"), .bytes(Data([1, 2]))),
            CBORMapEntry(.unsigned(1), .unsigned(UInt64.max)),
        ])
        let encoded = CBOREncoder.encode(value)
        #expect(try decoder.decode(encoded) == value)
        #expect(try decoder.decode(encoded)["fmt"]?.text == "apple-appattest")
        // Known encodings (RFC 8949 appendix A).
        #expect(try decode([0x18, 0x18]) == .unsigned(24))
        #expect(try decode([0x39, 0x03, 0xE7]) == .negative(999))
        #expect(try decode([0x43, 0x01, 0x02, 0x03]) == .bytes(Data([1, 2, 3])))
        #expect(try decode([0x62, 0xC3, 0xBC]) == .text("ü"))
        #expect(
            try decode([0x82, 0x01, 0x82, 0x02, 0x03]) == .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)])])
        )
    }

    @Test func refusesTruncatedInput() {
        #expect(code([]) == .truncated)
        #expect(code([0x19, 0x01]) == .truncated)
        #expect(code([0x43, 0x01, 0x02]) == .truncated)
        #expect(code([0x82, 0x01]) == .truncated)
        #expect(code([0xA1, 0x61, 0x61]) == .truncated)
        let encoded = CBOREncoder.encode(.map([CBORMapEntry(.text("a"), .bytes(Data(count: 100)))]))
        for cut in 0..<encoded.count {
            #expect(code(Array(encoded.prefix(cut))) == .truncated, "cut at \(cut)")
        }
    }

    @Test func refusesNestingDeeperThanTheLimit() {
        let deep = [UInt8](repeating: 0x81, count: 8) + [0x00]
        #expect(code(deep, CBORDecoder(maxDepth: 8)) == nil)
        #expect(code([0x81] + deep, CBORDecoder(maxDepth: 8)) == .tooDeep)
        // Far deeper than any stack could take recursively, refused at the limit.
        #expect(
            code([UInt8](repeating: 0x81, count: 100_000) + [0x00], CBORDecoder(maxInputBytes: 200_000)) == .tooDeep
        )
    }

    @Test func refusesHugeLengthsWithoutAllocating() {
        // A byte string, an array and a map claiming 2^64-1 elements in a few bytes.
        #expect(code([0x5B] + [UInt8](repeating: 0xFF, count: 8)) == .tooLarge)
        #expect(code([0x9B] + [UInt8](repeating: 0xFF, count: 8)) == .tooLarge)
        #expect(code([0xBB] + [UInt8](repeating: 0xFF, count: 8)) == .tooLarge)
        // A length the input cannot back is truncated input.
        #expect(code([0x59, 0x01, 0x00, 0x00]) == .truncated)
        // More elements than the count limit.
        #expect(code([0x98, 65] + [UInt8](repeating: 0, count: 65)) == .tooLarge)
        // Input over the size limit.
        #expect(code([UInt8](repeating: 0, count: 10), CBORDecoder(maxInputBytes: 9)) == .tooLarge)
    }

    @Test func refusesTrailingBytes() {
        #expect(code([0x01, 0x00]) == .trailingBytes)
        #expect(code(Array(CBOREncoder.encode(.text("x"))) + [0xFF]) == .trailingBytes)
    }

    @Test func refusesWhatAppAttestNeverUses() {
        #expect(code([0x5F, 0x41, 0x00, 0xFF]) == .unsupported)  // indefinite byte string
        #expect(code([0x9F, 0xFF]) == .unsupported)  // indefinite array
        #expect(code([0xC0, 0x00]) == .unsupported)  // tag
        #expect(code([0xF5]) == .unsupported)  // true
        #expect(code([0xFB] + [UInt8](repeating: 0, count: 8)) == .unsupported)  // double
        #expect(code([0x1C]) == .unsupported)  // reserved additional information
        #expect(code([0x62, 0xC3, 0x28]) == .invalidUTF8)
        #expect(code([0xA2, 0x61, 0x61, 0x00, 0x61, 0x61, 0x01]) == .duplicateKey)
    }

    /// Every prefix and every one-byte change of a real-shaped attestation object ends in a value
    /// or a CBORError, never a crash.
    @Test func survivesMutationsOfAnAttestationObject() throws {
        let authority = try DevAppAttest()
        let object = try authority.attest(device: .init(), challenge: Data("c".utf8), appID: "TEAM.app")
        var bytes = [UInt8](object)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let index = Int.random(in: 0..<bytes.count, using: &generator)
            let saved = bytes[index]
            bytes[index] = UInt8.random(in: 0...255, using: &generator)
            _ = try? decoder.decode(Data(bytes))
            bytes[index] = saved
        }
        #expect(try decoder.decode(object)["fmt"]?.text == "apple-appattest")
    }
}
