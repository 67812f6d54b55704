/// zlib streams (RFC 1950) of deflate data (RFC 1951), written with no library: stored blocks, or
/// one block of fixed Huffman codes over an LZ77 search of the last 32 KiB.
///
/// Fixed codes cost a little over dynamic ones, but need no code tables in the stream: on the
/// flat-coloured, row-filtered pictures we write, long repeated runs are where the bytes go.
public enum Zlib {
    /// A zlib stream of `data` in stored blocks: no compression, for tiny or throwaway output.
    public static func stored(_ data: [UInt8]) -> [UInt8] {
        // CMF 0x78 (deflate, 32 KiB window), FLG 0x01: 0x7801 is a multiple of 31, as required.
        var stream: [UInt8] = [0x78, 0x01]
        stream.reserveCapacity(data.count + data.count / 65_535 * 5 + 11)
        var offset = 0
        repeat {
            let length = min(65_535, data.count - offset)
            let isFinal = offset + length == data.count
            stream.append(isFinal ? 1 : 0)
            stream.append(contentsOf: [UInt8(length & 0xFF), UInt8(length >> 8)])
            stream.append(contentsOf: [UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)])
            stream.append(contentsOf: data[offset..<(offset + length)])
            offset += length
        } while offset < data.count
        stream.appendBigEndian(Adler32.checksum(data))
        return stream
    }

    /// A zlib stream of `data` compressed: LZ77 matches (hash chains of up to `chainLimit` links)
    /// coded with deflate's fixed Huffman codes.
    public static func compressed(_ data: [UInt8], chainLimit: Int = 24) -> [UInt8] {
        // CMF 0x78, FLG 0x9C (default level): 0x789C is a multiple of 31.
        var bits = BitWriter(capacity: data.count / 8 + 64)
        bits.bytes.append(contentsOf: [0x78, 0x9C])
        // BFINAL = 1, BTYPE = 01 (fixed Huffman codes).
        bits.write(1, count: 1)
        bits.write(1, count: 2)
        data.withUnsafeBufferPointer { input in
            encodeFixed(input, chainLimit: max(1, chainLimit), into: &bits)
        }
        bits.write(FixedCodes.literal[256].code, count: FixedCodes.literal[256].length)
        bits.flush()
        var stream = bits.bytes
        stream.appendBigEndian(Adler32.checksum(data))
        return stream
    }

    private static let windowSize = 32_768
    private static let hashBits = 15
    private static let minMatch = 3
    private static let maxMatch = 258

    private static func encodeFixed(_ input: UnsafeBufferPointer<UInt8>, chainLimit: Int, into bits: inout BitWriter) {
        let count = input.count
        let hashSize = 1 << hashBits
        var head = [Int32](repeating: -1, count: hashSize)
        var previous = [Int32](repeating: -1, count: windowSize)
        head.withUnsafeMutableBufferPointer { head in
            previous.withUnsafeMutableBufferPointer { previous in
                FixedCodes.literal.withUnsafeBufferPointer { literal in
                    // The hash of the three bytes at a position: fixed multiplicative hashing.
                    @inline(__always) func hash(_ position: Int) -> Int {
                        let value =
                            Int(input[position]) << 16 | Int(input[position + 1]) << 8 | Int(input[position + 2])
                        return (value &* 0x9E37_79B1) >> (32 - hashBits) & (hashSize - 1)
                    }
                    var position = 0
                    while position < count {
                        var bestLength = 0
                        var bestDistance = 0
                        if position + minMatch <= count {
                            var candidate = Int(head[hash(position)])
                            var links = chainLimit
                            let limit = min(maxMatch, count - position)
                            while candidate >= 0, position - candidate <= windowSize, links > 0 {
                                if input[candidate + bestLength] == input[position + bestLength] || bestLength == 0 {
                                    var length = 0
                                    while length < limit, input[candidate + length] == input[position + length] {
                                        length += 1
                                    }
                                    if length > bestLength {
                                        bestLength = length
                                        bestDistance = position - candidate
                                        if length == limit { break }
                                    }
                                }
                                let next = Int(previous[candidate & (windowSize - 1)])
                                // Chains only go back; an older entry overwritten by a newer one ends the chain.
                                if next >= candidate { break }
                                candidate = next
                                links -= 1
                            }
                        }
                        // Every position of a short match is hashed; of a long one (a run) only its
                        // ends, as zlib's faster levels do: runs are found again from their ends.
                        let length = bestLength >= minMatch ? bestLength : 1
                        let last = min(position + length, count - minMatch + 1)
                        var index = position
                        while index < last {
                            let key = hash(index)
                            previous[index & (windowSize - 1)] = head[key]
                            head[key] = Int32(index)
                            index += length > 16 && index == position + 3 ? max(length - 6, 1) : 1
                        }
                        if bestLength >= minMatch {
                            writeLength(bestLength, literal: literal, into: &bits)
                            writeDistance(bestDistance, into: &bits)
                        } else {
                            let code = literal[Int(input[position])]
                            bits.write(code.code, count: code.length)
                        }
                        position += length
                    }
                }
            }
        }
    }

    private static func writeLength(
        _ length: Int,
        literal: UnsafeBufferPointer<(code: UInt32, length: Int)>,
        into bits: inout BitWriter
    ) {
        let index = FixedCodes.lengthIndex[length]
        let code = literal[257 + index]
        bits.write(code.code, count: code.length)
        let extra = FixedCodes.lengthExtra[index]
        if extra > 0 { bits.write(UInt32(length - FixedCodes.lengthBase[index]), count: extra) }
    }

    private static func writeDistance(_ distance: Int, into bits: inout BitWriter) {
        var index = FixedCodes.distanceBase.count - 1
        while FixedCodes.distanceBase[index] > distance { index -= 1 }
        // Distance codes are 5-bit Huffman codes: written most significant bit first.
        bits.write(FixedCodes.reversed(UInt32(index), bits: 5), count: 5)
        let extra = FixedCodes.distanceExtra[index]
        if extra > 0 { bits.write(UInt32(distance - FixedCodes.distanceBase[index]), count: extra) }
    }
}

/// Deflate's fixed code tables (RFC 1951 § 3.2.5, § 3.2.6).
enum FixedCodes {
    static let lengthBase = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227,
        258,
    ]
    static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    static let distanceBase = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1_025, 1_537, 2_049, 3_073,
        4_097, 6_145, 8_193, 12_289, 16_385, 24_577,
    ]
    static let distanceExtra = [
        0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13,
    ]

    /// For each match length 0…258, the index of its length code (257 + index).
    static let lengthIndex: [Int] = (0...258).map { length in
        guard length >= 3 else { return 0 }
        if length == 258 { return 28 }
        var index = 27
        while lengthBase[index] > length { index -= 1 }
        return index
    }

    /// The literal/length alphabet's fixed codes, bit-reversed to be written least significant bit first.
    static let literal: [(code: UInt32, length: Int)] = (0..<288).map { symbol in
        switch symbol {
        case 0...143: return (reversed(UInt32(0x30 + symbol), bits: 8), 8)
        case 144...255: return (reversed(UInt32(0x190 + symbol - 144), bits: 9), 9)
        case 256...279: return (reversed(UInt32(symbol - 256), bits: 7), 7)
        default: return (reversed(UInt32(0xC0 + symbol - 280), bits: 8), 8)
        }
    }

    static func reversed(_ code: UInt32, bits: Int) -> UInt32 {
        var result: UInt32 = 0
        for bit in 0..<bits where code & (1 << UInt32(bit)) != 0 { result |= 1 << UInt32(bits - 1 - bit) }
        return result
    }
}

/// Packs bits least significant first, as deflate streams them.
struct BitWriter {
    var bytes: [UInt8] = []
    private var buffer: UInt64 = 0
    private var filled = 0

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    mutating func write(_ value: UInt32, count: Int) {
        buffer |= UInt64(value) << UInt64(filled)
        filled += count
        while filled >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: buffer))
            buffer >>= 8
            filled -= 8
        }
    }

    /// Writes the last partial byte, padded with zero bits.
    mutating func flush() {
        if filled > 0 { bytes.append(UInt8(truncatingIfNeeded: buffer)) }
        buffer = 0
        filled = 0
    }
}
