import Foundation

extension UUID {
    /// The canonical text in lower case (`8-4-4-4-12` hex digits), as PostgreSQL prints a
    /// `uuid` and our JSON carries ids: the same string as `uuidString.lowercased()`.
    ///
    /// Written here rather than through Foundation, whose formatting goes through `sprintf`
    /// and a second string for the case change: ids are written a dozen times per job.
    public var lowercasedText: String {
        withUnsafeBytes(of: uuid) { raw in
            String(unsafeUninitializedCapacity: 36) { text in
                var position = 0
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    text[position] = UUIDText.hexDigits[Int(byte >> 4)]
                    text[position + 1] = UUIDText.hexDigits[Int(byte & 0x0F)]
                    position += 2
                }
                return position
            }
        }
    }

    /// Parses the canonical text (`8-4-4-4-12` hex digits, either case): what `UUID(uuidString:)`
    /// accepts, without its `sscanf`. `nil` for anything else (other lengths, braces, missing
    /// or misplaced hyphens, non-hex characters).
    public init?(text: some StringProtocol) {
        var parsed: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let valid = withUnsafeMutableBytes(of: &parsed) { output -> Bool in
            let scan = { (input: UnsafeBufferPointer<UInt8>) -> Bool in UUIDText.parse(input, into: output) }
            if let result = text.utf8.withContiguousStorageIfAvailable(scan) { return result }
            return Array(text.utf8).withUnsafeBufferPointer(scan)
        }
        guard valid else { return nil }
        self.init(uuid: parsed)
    }
}

enum UUIDText {
    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The value of a hex digit in either case, or nil.
    @inline(__always)
    static func nibble(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// Reads 36 characters of canonical text into 16 bytes.
    static func parse(_ input: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableRawBufferPointer) -> Bool {
        guard input.count == 36 else { return false }
        var position = 0
        for index in 0..<16 {
            if index == 4 || index == 6 || index == 8 || index == 10 {
                guard input[position] == UInt8(ascii: "-") else { return false }
                position += 1
            }
            guard let high = nibble(input[position]), let low = nibble(input[position + 1]) else { return false }
            output[index] = high << 4 | low
            position += 2
        }
        return true
    }
}
