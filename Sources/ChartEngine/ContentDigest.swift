import AstroDomain
import Foundation

/// SHA-256 (FIPS 180-4), written out here so that digests and content-derived ids need no
/// crypto dependency and are the same on every platform.
///
/// It runs once per chart (the input digest), so it works on fixed-size scratch space: one
/// padded copy of the message and a 64-word schedule on the stack, no per-block allocation.
struct SHA256 {
    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The 32-byte digest of `bytes`.
    static func hash<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        var message = Array(bytes)
        let bitLength = UInt64(message.count) &* 8
        let paddedCount = (message.count + 8) / 64 * 64 + 64
        message.reserveCapacity(paddedCount)
        message.append(0x80)
        message.append(contentsOf: repeatElement(0, count: paddedCount - 8 - message.count))
        for shift in stride(from: 56, through: 0, by: -8) {
            message.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }

        var h0: UInt32 = 0x6a09_e667
        var h1: UInt32 = 0xbb67_ae85
        var h2: UInt32 = 0x3c6e_f372
        var h3: UInt32 = 0xa54f_f53a
        var h4: UInt32 = 0x510e_527f
        var h5: UInt32 = 0x9b05_688c
        var h6: UInt32 = 0x1f83_d9ab
        var h7: UInt32 = 0x5be0_cd19
        roundConstants.withUnsafeBufferPointer { constants in
            message.withUnsafeBufferPointer { message in
                withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
                    for blockStart in stride(from: 0, to: message.count, by: 64) {
                        for index in 0..<16 {
                            let base = blockStart + index * 4
                            schedule[index] =
                                UInt32(message[base]) << 24 | UInt32(message[base + 1]) << 16
                                | UInt32(message[base + 2]) << 8 | UInt32(message[base + 3])
                        }
                        for index in 16..<64 {
                            let w15 = schedule[index - 15]
                            let w2 = schedule[index - 2]
                            let s0 = rotate(w15, 7) ^ rotate(w15, 18) ^ (w15 >> 3)
                            let s1 = rotate(w2, 17) ^ rotate(w2, 19) ^ (w2 >> 10)
                            schedule[index] = schedule[index - 16] &+ s0 &+ schedule[index - 7] &+ s1
                        }
                        var a = h0
                        var b = h1
                        var c = h2
                        var d = h3
                        var e = h4
                        var f = h5
                        var g = h6
                        var h = h7
                        for index in 0..<64 {
                            let sum1 = rotate(e, 6) ^ rotate(e, 11) ^ rotate(e, 25)
                            let choice = (e & f) ^ (~e & g)
                            let temp1 = h &+ sum1 &+ choice &+ constants[index] &+ schedule[index]
                            let sum0 = rotate(a, 2) ^ rotate(a, 13) ^ rotate(a, 22)
                            let majority = (a & b) ^ (a & c) ^ (b & c)
                            let temp2 = sum0 &+ majority
                            h = g
                            g = f
                            f = e
                            e = d &+ temp1
                            d = c
                            c = b
                            b = a
                            a = temp1 &+ temp2
                        }
                        h0 &+= a
                        h1 &+= b
                        h2 &+= c
                        h3 &+= d
                        h4 &+= e
                        h5 &+= f
                        h6 &+= g
                        h7 &+= h
                    }
                }
            }
        }
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for word in [h0, h1, h2, h3, h4, h5, h6, h7] {
            digest.append(UInt8(truncatingIfNeeded: word >> 24))
            digest.append(UInt8(truncatingIfNeeded: word >> 16))
            digest.append(UInt8(truncatingIfNeeded: word >> 8))
            digest.append(UInt8(truncatingIfNeeded: word))
        }
        return digest
    }

    /// The digest of the UTF-8 bytes of `text`, as 64 lowercase hex digits.
    static func hex(_ text: String) -> String { hex(hash(text.utf8)) }

    /// 64 lowercase hex digits of a digest.
    static func hex(_ digest: [UInt8]) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(digest.count * 2)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    @inline(__always)
    private static func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 {
        (value >> count) | (value << (32 - count))
    }
}

/// Content-derived ids for the elements of one chart: one SHA-256 of the chart's input (its
/// digest) seeds them all, and each element's id is a cheap keyed mix of that seed with the
/// element's place in the chart (planet 3, house 7, aspect Sun–Moon), so a chart costs one hash
/// rather than one per element.
///
/// The same input gives the same digest and so the same ids; a different input gives a different
/// digest and, because the mix is a bijection of the seed for each element, different ids. The
/// ids are UUIDs of version 8 (RFC 9562, custom) with the RFC 9562 variant bits.
struct ElementIDSeed: Sendable, Hashable {
    private let high: UInt64
    private let low: UInt64
    private let key: UInt64

    /// A seed from a 32-byte SHA-256 digest.
    init(digest: [UInt8]) {
        precondition(digest.count == 32, "an element id seed needs a 32-byte digest")
        func word(_ start: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in start..<(start + 8) { value = value << 8 | UInt64(digest[index]) }
            return value
        }
        high = word(0)
        low = word(8)
        key = word(16) ^ word(24)
    }

    /// What an element is, folded into its id; distinct elements of one chart get distinct tags.
    enum Tag {
        case planet(PlanetName)
        case point(ChartPoint)
        case house(Int)
        case aspect(PlanetName, PlanetName)

        var value: UInt64 {
            switch self {
            case .planet(let name): 0x1_0000 | UInt64(name.ordinal)
            case .point(let point): 0x2_0000 | UInt64(point.ordinal)
            case .house(let number): 0x3_0000 | UInt64(truncatingIfNeeded: number & 0xFF)
            case .aspect(let first, let second): 0x4_0000 | UInt64(first.ordinal) << 8 | UInt64(second.ordinal)
            }
        }
    }

    /// The id of one element.
    func id(_ tag: Tag) -> ChartElementID {
        let tag = tag.value
        // Multiplying by an odd constant and adding keeps `high + tag·C` distinct per tag, and the
        // finalizer is a bijection: distinct tags (or seeds) give distinct 64-bit halves.
        let first = Self.finalize(high &+ tag &* 0x9E37_79B9_7F4A_7C15)
        let second = Self.finalize(low ^ Self.finalize(tag ^ key))
        var bytes:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8
            ) = (
                UInt8(truncatingIfNeeded: first >> 56), UInt8(truncatingIfNeeded: first >> 48),
                UInt8(truncatingIfNeeded: first >> 40), UInt8(truncatingIfNeeded: first >> 32),
                UInt8(truncatingIfNeeded: first >> 24), UInt8(truncatingIfNeeded: first >> 16),
                UInt8(truncatingIfNeeded: first >> 8), UInt8(truncatingIfNeeded: first),
                UInt8(truncatingIfNeeded: second >> 56), UInt8(truncatingIfNeeded: second >> 48),
                UInt8(truncatingIfNeeded: second >> 40), UInt8(truncatingIfNeeded: second >> 32),
                UInt8(truncatingIfNeeded: second >> 24), UInt8(truncatingIfNeeded: second >> 16),
                UInt8(truncatingIfNeeded: second >> 8), UInt8(truncatingIfNeeded: second)
            )
        bytes.6 = (bytes.6 & 0x0F) | 0x80  // version 8
        bytes.8 = (bytes.8 & 0x3F) | 0x80  // variant 0b10 (RFC 9562)
        return ChartElementID(UUID(uuid: bytes))
    }

    /// The 64-bit finalizer of MurmurHash3 (a bijection with full avalanche).
    @inline(__always)
    private static func finalize(_ value: UInt64) -> UInt64 {
        var value = value
        value ^= value >> 33
        value &*= 0xff51_afd7_ed55_8ccd
        value ^= value >> 33
        value &*= 0xc4ce_b9fe_1a85_ec53
        value ^= value >> 33
        return value
    }
}

extension PlanetName {
    /// The planet's place in `allCases` (Sun 0 … Pluto 9).
    var ordinal: Int {
        switch self {
        case .sun: 0
        case .moon: 1
        case .mercury: 2
        case .venus: 3
        case .mars: 4
        case .jupiter: 5
        case .saturn: 6
        case .uranus: 7
        case .neptune: 8
        case .pluto: 9
        }
    }
}

extension ChartPoint {
    /// The point's place in `allCases`.
    var ordinal: Int {
        switch self {
        case .meanNode: 0
        case .trueNode: 1
        case .chiron: 2
        case .meanLilith: 3
        }
    }
}
