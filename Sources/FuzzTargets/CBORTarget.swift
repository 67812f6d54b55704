import AppAttest
import Foundation

/// `cbor`: App Attest's strict CBOR decoder (`CBORDecoder.decode`) and the assertion parser
/// (`AssertionVerifier.verify`, with a fixed development key), the input as the raw object.
///
/// Invariants: whatever decodes encodes (preferred serialization) to bytes that decode to the same
/// value, no longer than the input; an assertion is never accepted (the input cannot carry a
/// signature of the fixed key over its own authenticator data except by forging ECDSA).
enum CBORTarget {
    static let target = FuzzTarget(
        name: "cbor",
        summary: "CBORDecoder.decode (re-encoding round trip) and AssertionVerifier.verify",
        setUp: { _ = device },
        run: run
    )

    static let appID = "ABCDE12345.com.astrosvitla.app"
    private static let device = DevAppAttest.Device()

    static func run(_ data: Data) {
        if let value = try? CBORDecoder().decode(data) {
            let encoded = CBOREncoder.encode(value)
            guard encoded.count <= data.count else {
                fatalError("re-encoding grew from \(data.count) to \(encoded.count) bytes")
            }
            guard let again = try? CBORDecoder().decode(encoded), again == value else {
                fatalError("the re-encoding of a decoded value does not decode to it")
            }
        }
        let clientDataHash = Data(repeating: 0x5A, count: 32)
        if (try? AssertionVerifier(appID: appID).verify(
            assertion: data,
            clientDataHash: clientDataHash,
            publicKey: device.publicKey,
            previousCounter: 0
        )) != nil {
            fatalError("an assertion not made by the key was accepted")
        }
    }
}
