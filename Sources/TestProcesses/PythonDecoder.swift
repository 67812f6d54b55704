import Foundation

/// Decodes our zlib streams and PNGs with Python's standard library (no PIL), as an independent
/// check of the writers in ByteCodecs: every chunk CRC and the Adler-32 are verified, the rows
/// unfiltered.
public enum PythonDecoder {
    /// `stream` inflated by `zlib.decompress` (which checks the Adler-32).
    /// - Throws: `DecodeError` when Python refuses it.
    public static func inflate(_ stream: [UInt8]) throws -> [UInt8] {
        let hex = try python(
            "import sys,zlib; sys.stdout.write(zlib.decompress(bytes.fromhex(sys.stdin.read())).hex())",
            input: stream
        )
        return hexBytes(hex)
    }

    /// The PNG's size and RGB rows, decoded by Python with every CRC checked.
    /// - Throws: `DecodeError` when Python refuses the file.
    public static func decodePNG(_ png: [UInt8]) throws -> (width: Int, height: Int, rgb: [UInt8]) {
        let output = try python(Self.pngDecoder, input: png)
        let parts = output.split(separator: " ")
        guard parts.count == 3, let width = Int(parts[0]), let height = Int(parts[1]) else {
            throw DecodeError(message: output)
        }
        return (width, height, hexBytes(String(parts[2])))
    }

    /// Python refused the input, or its answer is not what was expected.
    public struct DecodeError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    static func python(_ script: String, input: [UInt8]) throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("codecs-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("input.hex")
        try Data(input.map { String(format: "%02x", $0) }.joined().utf8).write(to: file)
        let result = try ProcessRunner.runWaiting(
            "/usr/bin/env",
            ["python3", "-c", "import sys; sys.stdin = open(sys.argv[1]); exec(sys.argv[2])", file.path, script],
            timeout: .seconds(60)
        )
        guard result.status == 0 else { throw DecodeError(message: result.output + result.error) }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func hexBytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).map {
            UInt8(String(decoding: digits[$0...($0 + 1)], as: UTF8.self), radix: 16)!
        }
    }

    /// A PNG reader for 8-bit RGB: signature, chunk CRCs, IHDR, IDAT inflated, the five filters undone.
    static let pngDecoder = """
        import sys, zlib, struct
        data = bytes.fromhex(sys.stdin.read())
        assert data[:8] == b'\\x89PNG\\r\\n\\x1a\\n', 'signature'
        pos, idat, header, types = 8, b'', None, []
        while pos < len(data):
            length, kind = struct.unpack('>I4s', data[pos:pos + 8])
            body = data[pos + 8:pos + 8 + length]
            crc, = struct.unpack('>I', data[pos + 8 + length:pos + 12 + length])
            assert zlib.crc32(kind + body) == crc, 'bad CRC in ' + kind.decode()
            types.append(kind)
            if kind == b'IHDR': header = struct.unpack('>IIBBBBB', body)
            if kind == b'IDAT': idat += body
            pos += 12 + length
        assert types[0] == b'IHDR' and types[-1] == b'IEND', types
        width, height, depth, colour, method, filtering, interlace = header
        assert (depth, colour, method, filtering, interlace) == (8, 2, 0, 0, 0), header
        raw = zlib.decompress(idat)
        stride = width * 3
        assert len(raw) == height * (stride + 1), 'length'
        out, previous = bytearray(), bytearray(stride)
        for y in range(height):
            kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
            for i in range(stride):
                a = line[i - 3] if i >= 3 else 0
                b = previous[i]
                c = previous[i - 3] if i >= 3 else 0
                if kind == 0: p = 0
                elif kind == 1: p = a
                elif kind == 2: p = b
                elif kind == 3: p = (a + b) // 2
                elif kind == 4:
                    e = a + b - c
                    pa, pb, pc = abs(e - a), abs(e - b), abs(e - c)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                else: raise Exception('filter %d' % kind)
                line[i] = (line[i] + p) & 255
            out += line
            previous = line
        print(width, height, out.hex())
        """
}
