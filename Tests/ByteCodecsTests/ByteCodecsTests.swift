import ByteCodecs
import Foundation
import TestProcesses
import Testing

@Suite struct ByteCodecsTests {
    /// Known values: the check value of the CRC-32 catalogue and the empty input.
    @Test func crc32MatchesTheStandardCheckValues() {
        #expect(CRC32.checksum(Data("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum(Data()) == 0)
        #expect(CRC32.checksum(Data("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    }

    /// Known values of Adler-32 (RFC 1950), including a run long enough to need the modulo.
    @Test func adler32MatchesKnownValues() {
        #expect(Adler32.checksum(Array("Wikipedia".utf8)) == 0x11E6_0398)
        #expect(Adler32.checksum([]) == 1)
        // zlib.adler32(b"\xff" * 100000)
        #expect(Adler32.checksum([UInt8](repeating: 0xFF, count: 100_000)) == 0x149A_302C)
    }

    /// Python's zlib inflates what we deflate back to the same bytes (checking the Adler-32), for
    /// runs, text, noise, and the empty input; the compressed stream is smaller than stored.
    @Test func pythonInflatesOurDeflate() throws {
        var noise: [UInt8] = []
        var state: UInt32 = 12_345
        for _ in 0..<70_000 {
            state = state &* 1_103_515_245 &+ 12_345
            noise.append(UInt8(truncatingIfNeeded: state >> 16))
        }
        let inputs: [[UInt8]] = [
            [],
            [42],
            [UInt8](repeating: 7, count: 100_000),
            Array(String(repeating: "the fox and the owl by the river; ", count: 900).utf8),
            noise,
            (0..<200_000).map { UInt8(($0 / 3 + $0 % 7) & 0xFF) },
        ]
        for input in inputs {
            let compressed = Zlib.compressed(input)
            let stored = Zlib.stored(input)
            #expect(try Self.inflate(compressed) == input)
            #expect(try Self.inflate(stored) == input)
            if input.count > 1_000, input != noise {
                #expect(compressed.count < input.count / 4, "\(compressed.count)")
            }
        }
    }

    /// A PNG of a gradient with a few shapes: Python checks the signature, each chunk's CRC, the
    /// header, and inflates and unfilters the rows back to our pixels.
    @Test func pythonDecodesOurPNG() throws {
        let (width, height) = (97, 61)
        var rgb: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let inside = (x - 40) * (x - 40) + (y - 30) * (y - 30) < 400
                rgb += inside ? [230, 80, 60] : [UInt8(y * 4), UInt8(100 + x), 200]
            }
        }
        for compression in [PNGEncoder.Compression.deflate, .stored] {
            let png = PNGEncoder.encode(
                width: width,
                height: height,
                rgb: rgb,
                text: [("scene", "forest"), ("Пісня", "skipped: not Latin-1")],
                compression: compression
            )
            #expect(PNGEncoder.textEntries(png).map(\.keyword) == ["scene"])
            #expect(PNGEncoder.textEntries(png).first?.value == "forest")
            let decoded = try Self.decodePNG(png)
            #expect(decoded.width == width && decoded.height == height)
            #expect(decoded.rgb == rgb)
        }
    }

    /// A flipped bit breaks a chunk's CRC and Python's check says so: the check above can fail.
    @Test func aCorruptedPNGFailsPythonsCheck() throws {
        var png = PNGEncoder.encode(width: 4, height: 4, rgb: [UInt8](repeating: 9, count: 48))
        png[png.count - 20] ^= 0x10
        #expect(throws: (any Error).self) { try Self.decodePNG(png) }
    }

    static func inflate(_ stream: [UInt8]) throws -> [UInt8] {
        try PythonDecoder.inflate(stream)
    }

    static func decodePNG(_ png: [UInt8]) throws -> (width: Int, height: Int, rgb: [UInt8]) {
        try PythonDecoder.decodePNG(png)
    }
}
