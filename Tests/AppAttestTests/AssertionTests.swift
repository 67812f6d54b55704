import AppAttest
import Crypto
import Foundation
import Testing

@Suite struct AssertionTests {
    static let appID = "ABCDE12345.com.astrosvitla.app"
    let verifier = AssertionVerifier(appID: appID)
    let device = DevAppAttest.Device()
    let clientDataHash = Data(SHA256.hash(data: Data("POST /v1/profiles".utf8)))

    func failure(
        _ assertion: Data,
        publicKey: Data? = nil,
        clientDataHash: Data? = nil,
        previous: UInt32 = 0
    ) -> AppAttestError.Code? {
        do {
            _ = try verifier.verify(
                assertion: assertion,
                clientDataHash: clientDataHash ?? self.clientDataHash,
                publicKey: publicKey ?? device.publicKey,
                previousCounter: previous
            )
            return nil
        } catch {
            return error.code
        }
    }

    @Test func aValidAssertionGivesItsCounter() throws {
        let assertion = device.assertion(clientDataHash: clientDataHash, counter: 5, appID: Self.appID)
        let counter = try verifier.verify(
            assertion: assertion,
            clientDataHash: clientDataHash,
            publicKey: device.publicKey,
            previousCounter: 4
        )
        #expect(counter == 5)
    }

    @Test func aReplayedCounterIsRefused() {
        let assertion = device.assertion(clientDataHash: clientDataHash, counter: 5, appID: Self.appID)
        #expect(failure(assertion, previous: 5) == .counterNotIncreasing)
        #expect(failure(assertion, previous: 6) == .counterNotIncreasing)
        #expect(failure(assertion, previous: 4) == nil)
    }

    @Test func anotherKeysSignatureIsRefused() {
        let assertion = DevAppAttest.Device().assertion(clientDataHash: clientDataHash, counter: 1, appID: Self.appID)
        #expect(failure(assertion) == .invalidSignature)
        #expect(failure(assertion, publicKey: Data([4, 1, 2])) == .invalidSignature)
    }

    @Test func tamperedDataIsRefused() throws {
        let assertion = device.assertion(clientDataHash: clientDataHash, counter: 1, appID: Self.appID)
        // Another request.
        #expect(
            failure(assertion, clientDataHash: Data(SHA256.hash(data: Data("DELETE /x".utf8)))) == .invalidSignature
        )
        // A raised counter in the authenticator data.
        guard case .map(var entries) = try CBORDecoder().decode(assertion),
            let index = entries.firstIndex(where: { $0.key == .text("authenticatorData") }),
            case .bytes(var authData) = entries[index].value
        else {
            Issue.record("unexpected shape")
            return
        }
        authData[36] = 9
        entries[index].value = .bytes(authData)
        #expect(failure(CBOREncoder.encode(.map(entries))) == .invalidSignature)
        // Another app, correctly signed.
        let other = device.assertion(clientDataHash: clientDataHash, counter: 1, appID: "ABCDE12345.com.other")
        #expect(failure(other) == .appIDMismatch)
    }

    @Test func malformedAssertionsAreRefused() {
        #expect(failure(Data()) == .malformedAssertion)
        #expect(failure(CBOREncoder.encode(.map([]))) == .malformedAssertion)
        let short = CBOREncoder.encode(
            .map([
                CBORMapEntry(.text("signature"), .bytes(Data([0x30, 0]))),
                CBORMapEntry(.text("authenticatorData"), .bytes(Data(count: 36))),
            ])
        )
        #expect(failure(short) == .malformedAssertion)
        #expect(failure(Data(count: AssertionVerifier.maxAssertionBytes + 1)) == .malformedAssertion)
    }
}
