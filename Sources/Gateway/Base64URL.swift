import Foundation

/// Base64url without padding (RFC 7515 §2), strict: only the URL-safe alphabet, no padding, no
/// whitespace, and no length that unpadded base64 cannot have.
enum Base64URL {
    /// Encodes `bytes` as unpadded base64url.
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Decodes unpadded base64url; `nil` for anything else.
    static func decode(_ text: Substring) -> Data? {
        guard text.utf8.count % 4 != 1 else { return nil }
        var base64 = ""
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                base64.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "-"): base64.append("+")
            case UInt8(ascii: "_"): base64.append("/")
            default: return nil
            }
        }
        while base64.utf8.count % 4 != 0 { base64.append("=") }
        guard let data = Data(base64Encoded: base64) else { return nil }
        // Unused low bits of the last character must be zero, so one token has one spelling.
        guard encode(data) == text else { return nil }
        return data
    }
}
