import Foundation

/// A JWS in compact serialization, split and base64url-decoded but not yet verified.
struct CompactJWS {
    /// The literal `header.payload` text: what the signature covers.
    var signingInput: Data
    var header: Data
    var payload: Data
    var signature: Data

    /// Splits and decodes a token.
    ///
    /// - Throws: `malformed-jws` unless there are exactly three segments of unpadded base64url.
    init(parsing token: String) throws(VerificationFailure) {
        let segments = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 3 else {
            throw VerificationFailure(
                .malformedJWS,
                "expected three dot-separated segments (header.payload.signature), found \(segments.count)"
            )
        }
        let names = ["header", "payload", "signature"]
        var decoded: [Data] = []
        for (segment, name) in zip(segments, names) {
            guard let data = Base64URL.decode(segment) else {
                throw VerificationFailure(.malformedJWS, "the \(name) segment is not unpadded base64url")
            }
            decoded.append(data)
        }
        signingInput = Data(token.utf8[..<segments[1].endIndex])
        header = decoded[0]
        payload = decoded[1]
        signature = decoded[2]
    }
}

/// Base64url without padding (RFC 7515 §2), strict: any other character, padding included, is
/// an error.
enum Base64URL {
    static func decode<Bytes: Collection<UInt8>>(_ text: Bytes) -> Data? {
        if text.count % 4 == 1 { return nil }
        var standard: [UInt8] = []
        standard.reserveCapacity(text.count + 3)
        for byte in text {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                standard.append(byte)
            case UInt8(ascii: "-"):
                standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"):
                standard.append(UInt8(ascii: "/"))
            default:
                return nil
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard))
    }

    static func encode(_ data: some DataProtocol) -> String {
        var text = Data(data).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}

/// The JOSE header fields verification reads, tolerant of wrong types so that each problem gets
/// its own reason.
struct JOSEHeader: Decodable {
    enum CertificateChain {
        case missing
        case notAnArrayOfStrings
        case certificates([String])
    }

    var algorithm: String?
    var certificateChain: CertificateChain

    private enum CodingKeys: String, CodingKey {
        case alg, x5c
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        algorithm = (try? container.decodeIfPresent(String.self, forKey: .alg)) ?? nil
        if !container.contains(.x5c) || (try? container.decodeNil(forKey: .x5c)) == true {
            certificateChain = .missing
        } else if let entries = try? container.decode([String].self, forKey: .x5c) {
            certificateChain = .certificates(entries)
        } else {
            certificateChain = .notAnArrayOfStrings
        }
    }
}

/// What verification needs from a payload before it knows what kind it is: that it is a JSON
/// object, its `signedDate`, and whether it is a notification.
struct PayloadProbe: Decodable {
    var signedDate: Date?
    var isNotification: Bool

    private enum CodingKeys: String, CodingKey {
        case signedDate, notificationType
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        signedDate = try container.decodeMillisecondsIfPresent(forKey: .signedDate)
        isNotification =
            container.contains(.notificationType) && (try? container.decodeNil(forKey: .notificationType)) == false
    }
}
