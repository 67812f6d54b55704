/// Writes 8-bit RGB PNG files (ISO/IEC 15948) with no image library.
public enum PNGEncoder {
    /// The eight bytes every PNG file starts with.
    public static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// How the pixel rows are stored.
    public enum Compression: Sendable {
        /// Stored deflate blocks, rows unfiltered: for tiny pictures.
        case stored
        /// Each row filtered (the PNG filter of least absolute sum, the usual heuristic), then
        /// deflated with LZ77 and fixed Huffman codes.
        case deflate
    }

    /// A PNG of `rgb` (`width × height × 3` bytes, rows top to bottom) with `text` as tEXt
    /// chunks (Latin-1 keywords of 1–79 characters; other keywords and non-Latin-1 values are left
    /// out, as tEXt cannot hold them).
    /// - Precondition: `rgb.count == width * height * 3`, both sides from 1 to 65535.
    public static func encode(
        width: Int,
        height: Int,
        rgb: [UInt8],
        text: [(keyword: String, value: String)] = [],
        compression: Compression = .deflate
    ) -> [UInt8] {
        precondition((1...65_535).contains(width) && (1...65_535).contains(height) && rgb.count == width * height * 3)
        var header: [UInt8] = []
        header.appendBigEndian(UInt32(width))
        header.appendBigEndian(UInt32(height))
        // Bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace.
        header.append(contentsOf: [8, 2, 0, 0, 0])
        var png = signature
        appendChunk("IHDR", header, to: &png)
        for (keyword, value) in text {
            guard (1...79).contains(keyword.unicodeScalars.count),
                keyword.unicodeScalars.allSatisfy({ (32...126).contains($0.value) }),
                value.unicodeScalars.allSatisfy({ $0.value <= 255 && $0.value != 0 })
            else { continue }
            let bytes =
                keyword.unicodeScalars.map { UInt8($0.value) } + [0] + value.unicodeScalars.map { UInt8($0.value) }
            appendChunk("tEXt", bytes, to: &png)
        }
        switch compression {
        case .stored:
            var rows: [UInt8] = []
            rows.reserveCapacity(height * (1 + width * 3))
            for row in 0..<height {
                rows.append(0)
                rows.append(contentsOf: rgb[(row * width * 3)..<((row + 1) * width * 3)])
            }
            appendChunk("IDAT", Zlib.stored(rows), to: &png)
        case .deflate:
            appendChunk("IDAT", Zlib.compressed(filtered(width: width, height: height, rgb: rgb)), to: &png)
        }
        appendChunk("IEND", [], to: &png)
        return png
    }

    /// The tEXt entries of a PNG, in order; empty when `png` is not a PNG or holds none.
    public static func textEntries(_ png: [UInt8]) -> [(keyword: String, value: String)] {
        guard png.starts(with: signature) else { return [] }
        var entries: [(keyword: String, value: String)] = []
        var offset = 8
        while offset + 12 <= png.count {
            let length =
                Int(png[offset]) << 24 | Int(png[offset + 1]) << 16 | Int(png[offset + 2]) << 8 | Int(png[offset + 3])
            let type = String(decoding: png[(offset + 4)..<(offset + 8)], as: UTF8.self)
            let start = offset + 8
            guard length >= 0, start + length + 4 <= png.count else { break }
            if type == "tEXt", let zero = png[start..<(start + length)].firstIndex(of: 0) {
                let latin1 = { (bytes: ArraySlice<UInt8>) in
                    String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
                }
                entries.append((latin1(png[start..<zero]), latin1(png[(zero + 1)..<(start + length)])))
            }
            if type == "IDAT" || type == "IEND" { break }
            offset = start + length + 4
        }
        return entries
    }

    /// Appends a chunk: length, type, data, and the CRC-32 of type and data.
    public static func appendChunk(_ type: String, _ data: [UInt8], to png: inout [UInt8]) {
        let typeAndData = Array(type.utf8) + data
        png.appendBigEndian(UInt32(data.count))
        png.append(contentsOf: typeAndData)
        png.appendBigEndian(CRC32.checksum(typeAndData))
    }

    /// Each row as its filter type byte then the filtered bytes: of Sub, Up and Paeth, the one
    /// whose bytes have the least absolute sum (the usual heuristic; None and Average seldom win on
    /// flat-coloured pictures and would cost two more passes).
    static func filtered(width: Int, height: Int, rgb: [UInt8]) -> [UInt8] {
        let stride = width * 3
        var output = [UInt8](repeating: 0, count: height * (stride + 1))
        let zeros = [UInt8](repeating: 0, count: stride)
        rgb.withUnsafeBufferPointer { pixels in
            output.withUnsafeMutableBufferPointer { output in
                zeros.withUnsafeBufferPointer { zeros in
                    let base = pixels.baseAddress!
                    for row in 0..<height {
                        let line = base + row * stride
                        let above = row == 0 ? zeros.baseAddress! : base + (row - 1) * stride
                        var sums = (sub: 0, up: 0, paeth: 0)
                        for index in 0..<stride {
                            let left = index >= 3 ? line[index - 3] : 0
                            let upLeft = index >= 3 ? above[index - 3] : 0
                            let sub = line[index] &- left
                            let up = line[index] &- above[index]
                            let paeth = line[index] &- Self.paeth(left, above[index], upLeft)
                            sums.sub += sub < 128 ? Int(sub) : 256 - Int(sub)
                            sums.up += up < 128 ? Int(up) : 256 - Int(up)
                            sums.paeth += paeth < 128 ? Int(paeth) : 256 - Int(paeth)
                        }
                        let filter: UInt8 =
                            sums.sub <= sums.up && sums.sub <= sums.paeth ? 1 : sums.up <= sums.paeth ? 2 : 4
                        let target = output.baseAddress! + row * (stride + 1)
                        target[0] = filter
                        for index in 0..<stride {
                            let left = index >= 3 ? line[index - 3] : 0
                            switch filter {
                            case 1: target[1 + index] = line[index] &- left
                            case 2: target[1 + index] = line[index] &- above[index]
                            default:
                                let upLeft = index >= 3 ? above[index - 3] : 0
                                target[1 + index] = line[index] &- Self.paeth(left, above[index], upLeft)
                            }
                        }
                    }
                }
            }
        }
        return output
    }

    private static func paeth(_ a: UInt8, _ b: UInt8, _ c: UInt8) -> UInt8 {
        let estimate = Int(a) + Int(b) - Int(c)
        let distanceA = abs(estimate - Int(a))
        let distanceB = abs(estimate - Int(b))
        let distanceC = abs(estimate - Int(c))
        if distanceA <= distanceB && distanceA <= distanceC { return a }
        return distanceB <= distanceC ? b : c
    }
}
