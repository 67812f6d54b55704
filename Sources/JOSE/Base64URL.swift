import Foundation

/// Base64url without padding (RFC 7515 §2), strict: only the URL-safe alphabet, no padding, no
/// whitespace, no length that unpadded base64 cannot have, and no set bit in what the last
/// character leaves unused (so one byte string has one spelling).
///
/// The package's one base64url: JWS segments (access tokens, the App Store's signed data and
/// bearer tokens), refresh tokens and list cursors.
///
/// Byte by byte, on every authenticated request (an access token is three parts): Foundation's
/// base64 with `replacingOccurrences` for the alphabet was the largest cost of a request after
/// the signature check.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
    )

    /// Each byte's 6-bit value, or 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    /// Whether `byte` is a character of the base64url alphabet (`A-Z a-z 0-9 - _`).
    public static func isAlphabet(_ byte: UInt8) -> Bool { values[Int(byte)] != 0xFF }

    /// Encodes `bytes` as unpadded base64url.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let input = Array(bytes)
        var output = [UInt8]()
        output.reserveCapacity((input.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= input.count {
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
            output.append(alphabet[Int(chunk >> 18)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
            output.append(alphabet[Int(chunk & 63)])
            index += 3
        }
        switch input.count - index {
        case 1:
            let chunk = UInt32(input[index]) << 16
            output.append(alphabet[Int(chunk >> 18)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
        case 2:
            let chunk = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8
            output.append(alphabet[Int(chunk >> 18)])
            output.append(alphabet[Int(chunk >> 12 & 63)])
            output.append(alphabet[Int(chunk >> 6 & 63)])
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes unpadded base64url text; `nil` for anything else.
    public static func decode(_ text: some StringProtocol) -> Data? {
        decode(bytes: text.utf8)
    }

    /// Decodes unpadded base64url given as its UTF-8 bytes (e.g. one segment of a token's
    /// `utf8` view); `nil` for anything else.
    public static func decode(bytes: some Collection<UInt8>) -> Data? {
        if let decoded = bytes.withContiguousStorageIfAvailable({ decode($0) }) { return decoded }
        return Array(bytes).withUnsafeBufferPointer { decode($0) }
    }

    private static func decode(_ input: UnsafeBufferPointer<UInt8>) -> Data? {
        let remainder = input.count % 4
        guard remainder != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(input.count / 4 * 3 + 2)
        var accumulator: UInt32 = 0
        var count = 0
        for character in input {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            count += 1
            if count == 4 {
                output.append(UInt8(accumulator >> 16))
                output.append(UInt8(accumulator >> 8 & 0xFF))
                output.append(UInt8(accumulator & 0xFF))
                accumulator = 0
                count = 0
            }
        }
        switch count {
        case 2:
            // 12 bits: one byte, and 4 bits that must be zero.
            guard accumulator & 0xF == 0 else { return nil }
            output.append(UInt8(accumulator >> 4))
        case 3:
            // 18 bits: two bytes, and 2 bits that must be zero.
            guard accumulator & 0x3 == 0 else { return nil }
            output.append(UInt8(accumulator >> 10))
            output.append(UInt8(accumulator >> 2 & 0xFF))
        default:
            break
        }
        return Data(output)
    }
}
