import Foundation

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
