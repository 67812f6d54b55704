import AstroDomain
import Crypto
import Foundation

/// SHA-256 for digests and content-derived ids, through swift-crypto (BoringSSL, which uses the
/// CPU's SHA extensions where there are any): the same digest on every platform, at a fifth of
/// the cost of the portable Swift version this replaced (~1 µs per chart input of ~300 bytes,
/// measured with `astro-bench chart`).
enum SHA256 {
    /// The 32-byte digest of `bytes`.
    static func hash<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> [UInt8] {
        // The raw-buffer entry point: the generic `hash(data:)` costs dynamic casts per call.
        func digest(_ buffer: UnsafeBufferPointer<UInt8>) -> [UInt8] {
            var hasher = Crypto.SHA256()
            hasher.update(bufferPointer: UnsafeRawBufferPointer(buffer))
            return hasher.finalize().withUnsafeBytes { Array($0) }
        }
        if let hashed = bytes.withContiguousStorageIfAvailable(digest) { return hashed }
        return Array(bytes).withUnsafeBufferPointer(digest)
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
