import AppAttest
import Crypto
import Foundation
import Testing
import X509

@Suite struct AttestationTests {
    static let appID = "ABCDE12345.com.astrosvitla.app"
    let authority: DevAppAttest
    let verifier: AttestationVerifier
    let device = DevAppAttest.Device()
    let challenge = Data("a-fresh-server-challenge".utf8)

    init() throws {
        authority = try DevAppAttest()
        verifier = AttestationVerifier(appID: Self.appID, environment: .development, roots: [authority.root])
    }

    func failure(
        _ attestation: Data,
        verifier: AttestationVerifier? = nil,
        challenge: Data? = nil,
        keyID: Data? = nil
    ) async -> AppAttestError.Code? {
        do {
            _ = try await (verifier ?? self.verifier).verify(
                attestation: attestation,
                challenge: challenge ?? self.challenge,
                keyID: keyID ?? device.keyID
            )
            return nil
        } catch {
            return error.code
        }
    }

    func attest(_ change: (inout DevAppAttest.Options) -> Void = { _ in }) throws -> Data {
        var options = DevAppAttest.Options()
        change(&options)
        return try authority.attest(device: device, challenge: challenge, appID: Self.appID, options: options)
    }

    @Test func theShippedRootIsApplesAppAttestationRoot() throws {
        let root = AttestationVerifier.appleRoot
        let der = try root.serializeAsPEM().derBytes
        let fingerprint = SHA256.hash(data: der).map { String(format: "%02x", $0) }.joined()
        #expect(fingerprint == AttestationVerifier.appleRootSHA256)
        #expect(root.subject.description.contains("Apple App Attestation Root CA"))
        #expect(root.issuer == root.subject)
    }

    @Test func aValidAttestationGivesTheDeviceKey() async throws {
        let key = try await verifier.verify(attestation: try attest(), challenge: challenge, keyID: device.keyID)
        #expect(key.keyID == device.keyID)
        #expect(key.publicKey == device.publicKey)
        #expect(key.counter == 0)
        #expect(!key.receipt.isEmpty)
    }

    @Test func anotherChallengeIsANonceMismatch() async throws {
        #expect(await failure(try attest(), challenge: Data("another".utf8)) == .nonceMismatch)
        #expect(await failure(try attest { $0.nonce = Data(repeating: 7, count: 32) }) == .nonceMismatch)
    }

    @Test func anotherAppIsRefused() async throws {
        #expect(await failure(try attest { $0.appID = "ABCDE12345.com.other.app" }) == .appIDMismatch)
        let otherVerifier = AttestationVerifier(
            appID: "ZZZZZ99999.com.astrosvitla.app",
            environment: .development,
            roots: [authority.root]
        )
        #expect(await failure(try attest(), verifier: otherVerifier) == .appIDMismatch)
    }

    @Test func aChainFromAnotherRootIsUntrusted() async throws {
        let stranger = try DevAppAttest()
        let attestation = try stranger.attest(device: device, challenge: challenge, appID: Self.appID)
        #expect(await failure(attestation) == .untrustedCertificateChain)
        // Apple's root does not trust the development authority.
        let production = AttestationVerifier(appID: Self.appID, environment: .development)
        #expect(await failure(try attest(), verifier: production) == .untrustedCertificateChain)
    }

    @Test func aNonZeroCounterIsRefused() async throws {
        #expect(await failure(try attest { $0.counter = 1 }) == .counterNotZero)
    }

    @Test func theKeyIDMustBeTheCertificateKeys() async throws {
        #expect(await failure(try attest(), keyID: DevAppAttest.Device().keyID) == .keyIDMismatch)
        #expect(await failure(try attest { $0.credentialID = Data(repeating: 1, count: 32) }) == .credentialIDMismatch)
    }

    @Test func theAAGUIDMustBeTheAcceptedEnvironments() async throws {
        let production = try authority.attest(
            device: device,
            challenge: challenge,
            appID: Self.appID,
            environment: .production
        )
        #expect(await failure(production) == .aaguidMismatch)
        let productionVerifier = AttestationVerifier(
            appID: Self.appID,
            environment: .production,
            roots: [authority.root]
        )
        #expect(await failure(production, verifier: productionVerifier) == nil)
        #expect(await failure(try attest(), verifier: productionVerifier) == .aaguidMismatch)
    }

    @Test func anExpiredCredentialCertificateIsRefused() async throws {
        let expired = try attest {
            $0.credentialNotValidBefore = Date(timeIntervalSinceNow: -7_200)
            $0.credentialNotValidAfter = Date(timeIntervalSinceNow: -60)
        }
        #expect(await failure(expired) == .certificateExpired)
    }

    @Test func malformedObjectsAreRefused() async throws {
        #expect(await failure(Data()) == .malformedAttestation)
        #expect(await failure(Data([0xA0])) == .malformedAttestation)
        #expect(await failure(try attest { $0.format = "packed" }) == .unsupportedFormat)
        let valid = try attest()
        #expect(await failure(valid + Data([0])) == .malformedAttestation)
        #expect(await failure(valid.prefix(valid.count - 1)) == .malformedAttestation)
        #expect(await failure(Data(count: AttestationVerifier.maxAttestationBytes + 1)) == .malformedAttestation)
    }

    @Test func tamperedAuthenticatorDataBreaksTheNonce() async throws {
        var object = try CBORDecoder().decode(try attest())
        guard case .map(var entries) = object, let index = entries.firstIndex(where: { $0.key == .text("authData") }),
            case .bytes(var authData) = entries[index].value
        else {
            Issue.record("unexpected shape")
            return
        }
        authData[authData.count - 1] ^= 1
        entries[index].value = .bytes(authData)
        object = .map(entries)
        #expect(await failure(CBOREncoder.encode(object)) == .nonceMismatch)
    }
}
