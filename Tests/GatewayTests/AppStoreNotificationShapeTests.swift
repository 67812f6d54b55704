import AstroDomain
import Foundation
import JOSE
import Testing

@testable import Gateway

@Suite("App Store notification shape")
struct AppStoreNotificationShapeTests {
    static func part(_ json: JSONValue) -> String { Base64URL.encode(json.jsonData()) }
    static let header = part(["alg": "ES256", "x5c": ["MIIB", "MIIC", "MIID"]])
    static let payload = part([
        "notificationType": "REFUND", "notificationUUID": "0e7f1c2a-0000-4000-8000-000000000001",
    ])
    static let signature = Base64URL.encode([UInt8](repeating: 7, count: 64))
    static let jws = "\(header).\(payload).\(signature)"

    static func body(_ signedPayload: JSONValue) -> Data {
        JSONValue.object(["signedPayload": signedPayload]).jsonData()
    }

    static func code(_ data: Data) -> String? {
        do {
            _ = try AppStoreNotificationShape(body: data)
            return nil
        } catch {
            return error.code.rawValue
        }
    }

    @Test func aWellShapedNotificationIsAcceptedAndItsClaimsRead() throws {
        var object: [String: JSONValue] = ["signedPayload": .string(Self.jws)]
        // Members Apple may add later are ignored, not refused.
        object["somethingNew"] = 1
        let shape = try AppStoreNotificationShape(body: JSONValue.object(object).jsonData())
        #expect(shape.signedPayload == Self.jws)
        #expect(shape.claimedType == "REFUND")
        #expect(shape.claimedUUID == "0e7f1c2a-0000-4000-8000-000000000001")
    }

    @Test func theJobIDIsTheSameForTheSameJWSAndAnotherForAnother() throws {
        let first = try AppStoreNotificationShape(body: Self.body(.string(Self.jws)))
        let again = try AppStoreNotificationShape(body: Self.body(.string(Self.jws)))
        #expect(first.jobID == again.jobID)
        // A version-8 (custom) UUID with the RFC 9562 variant.
        #expect(first.jobID.description.dropFirst(14).first == "8")
        #expect(["8", "9", "a", "b"].contains(first.jobID.description.dropFirst(19).first))
        // The same claimed notificationUUID in another JWS is another job.
        let otherSignature = Base64URL.encode([UInt8](repeating: 9, count: 64))
        let other = try AppStoreNotificationShape(
            body: Self.body(.string("\(Self.header).\(Self.payload).\(otherSignature)"))
        )
        #expect(other.claimedUUID == first.claimedUUID)
        #expect(other.jobID != first.jobID)
    }

    @Test func malformedBodiesAreRefusedWithStableCodes() {
        #expect(Self.code(Data("not json".utf8)) == "invalid-json")
        #expect(Self.code(Data("[]".utf8)) == "invalid-json")
        #expect(Self.code(Data("{}".utf8)) == "invalid-notification")
        #expect(Self.code(Self.body(42)) == "invalid-notification")
        #expect(Self.code(Self.body("")) == "invalid-notification")
        #expect(Self.code(Self.body("a.b")) == "invalid-notification")
        #expect(Self.code(Self.body("a.b.c.d")) == "invalid-notification")
        #expect(Self.code(Self.body(.string("\(Self.header)..\(Self.signature)"))) == "invalid-notification")
        #expect(
            Self.code(Self.body(.string("\(Self.header).\(Self.payload).\(Self.signature)="))) == "invalid-notification"
        )
        // alg none, HS256, or no x5c chain.
        for header: JSONValue in [
            ["alg": "none", "x5c": ["MIIB"]], ["alg": "HS256", "x5c": ["MIIB"]], ["alg": "ES256"],
            ["alg": "ES256", "x5c": []], ["alg": "ES256", "x5c": [1]], ["alg": "ES256", "x5c": "MIIB"],
            ["alg": "ES256", "x5c": .array(Array(repeating: "MIIB", count: 9))], "ES256",
        ] {
            let jws = "\(Self.part(header)).\(Self.payload).\(Self.signature)"
            #expect(Self.code(Self.body(.string(jws))) == "invalid-notification", "\(header)")
        }
        // A payload that is not a JSON object, a signature that is not 64 bytes.
        let notObject = Base64URL.encode(Array("[1]".utf8))
        #expect(
            Self.code(Self.body(.string("\(Self.header).\(notObject).\(Self.signature)"))) == "invalid-notification"
        )
        let short = Base64URL.encode([UInt8](repeating: 1, count: 63))
        #expect(Self.code(Self.body(.string("\(Self.header).\(Self.payload).\(short)"))) == "invalid-notification")
        // A header over its bound.
        let huge = Self.part(["alg": "ES256", "x5c": [.string(String(repeating: "A", count: 30_000))]])
        #expect(Self.code(Self.body(.string("\(huge).\(Self.payload).\(Self.signature)"))) == "invalid-notification")
    }
}
