import Foundation
import StoreKitVerification
import Testing

/// The chain cache: later tokens from a validated chain skip chain validation, but only inside
/// the chain's validity span; failures are never cached.
@Suite struct ChainCacheTests {
    @Test func secondTokenFromTheSameChainUsesTheCache() async throws {
        let fixture = try DevFixture()
        let verifier = try fixture.verifier()
        #expect(verifier.chainCacheStatistics == .init(hits: 0, validations: 0, entries: 0))

        _ = try await verifier.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction(id: "1")))
        #expect(verifier.chainCacheStatistics == .init(hits: 0, validations: 1, entries: 1))

        let second = try await verifier.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction(id: "2")))
        #expect(second.transactionID == "2")
        #expect(verifier.chainCacheStatistics == .init(hits: 1, validations: 1, entries: 1))
    }

    @Test func signedDateOutsideTheCachedSpanIsStillRejected() async throws {
        let fixture = try DevFixture()
        let verifier = try fixture.verifier()
        let signer = fixture.pki.signer
        _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))

        for date in [fixture.notValidAfter.addingTimeInterval(60), fixture.notValidBefore.addingTimeInterval(-60)] {
            await expectFailure(.certificateNotValidAtSignedDate) {
                _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction(signedDate: date)))
            }
        }
        // Both were validated in full, not answered from the cache.
        #expect(verifier.chainCacheStatistics == .init(hits: 0, validations: 3, entries: 1))
        // Inside the span the cache still answers.
        _ = try await verifier.verifyTransaction(try signer.sign(DevFixture.transaction()))
        #expect(verifier.chainCacheStatistics.hits == 1)
    }

    @Test func cachedChainStillNeedsAValidSignature() async throws {
        let fixture = try DevFixture()
        let verifier = try fixture.verifier()
        _ = try await verifier.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction()))
        var tampered = TokenParts(try fixture.pki.signer.sign(DevFixture.transaction(id: "1")))
        tampered.payload = TokenParts(try fixture.pki.signer.sign(DevFixture.transaction(id: "2"))).payload
        await expectFailure(.invalidSignature) { _ = try await verifier.verifyTransaction(tampered.token) }
        #expect(verifier.chainCacheStatistics.hits == 1)
    }

    @Test func failuresAreNotCached() async throws {
        let fixture = try DevFixture()
        let foreign = try DevFixture()
        let verifier = try fixture.verifier()
        let token = try foreign.pki.signer.sign(DevFixture.transaction())
        for _ in 0..<3 {
            await expectFailure(.untrustedCertificateChain) { _ = try await verifier.verifyTransaction(token) }
        }
        #expect(verifier.chainCacheStatistics == .init(hits: 0, validations: 3, entries: 0))

        let unmarked = try DevFixture(options: .init(leafMarkerExtension: false))
        let unmarkedVerifier = try unmarked.verifier()
        let unmarkedToken = try unmarked.pki.signer.sign(DevFixture.transaction())
        for _ in 0..<2 {
            await expectFailure(.missingMarkerExtension) {
                _ = try await unmarkedVerifier.verifyTransaction(unmarkedToken)
            }
        }
        #expect(unmarkedVerifier.chainCacheStatistics.entries == 0)
    }

    @Test func aLeafIsNotTrustedBecauseAnotherIntermediateWasCached() async throws {
        // The key covers leaf and intermediate: a cached leaf with a different x5c[1] is validated again.
        let fixture = try DevFixture()
        let other = try DevFixture()
        let verifier = try fixture.verifier()
        _ = try await verifier.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction()))
        let mixed = JWSSigner(
            key: fixture.pki.leafKey,
            chain: [fixture.pki.leaf, other.pki.intermediate, fixture.pki.root]
        )
        await expectFailure(.untrustedCertificateChain) {
            _ = try await verifier.verifyTransaction(try mixed.sign(DevFixture.transaction()))
        }
        #expect(verifier.chainCacheStatistics == .init(hits: 0, validations: 2, entries: 1))
    }

    @Test func cacheIsBounded() async throws {
        var fixtures: [DevFixture] = []
        for _ in 0..<(SignedDataVerifier.chainCacheCapacity + 4) { fixtures.append(try DevFixture()) }
        let verifier = SignedDataVerifier(
            policy: try VerificationPolicy(
                trustedRoots: fixtures.map(\.pki.root),
                bundleID: Fixtures.bundleID,
                environment: .sandbox
            )
        )
        for fixture in fixtures {
            _ = try await verifier.verifyTransaction(try fixture.pki.signer.sign(DevFixture.transaction()))
        }
        let statistics = verifier.chainCacheStatistics
        #expect(statistics.entries == SignedDataVerifier.chainCacheCapacity)
        #expect(statistics.validations == fixtures.count)
        // The most recent chain is still cached; the first was evicted.
        _ = try await verifier.verifyTransaction(try fixtures.last!.pki.signer.sign(DevFixture.transaction()))
        #expect(verifier.chainCacheStatistics.hits == 1)
        _ = try await verifier.verifyTransaction(try fixtures.first!.pki.signer.sign(DevFixture.transaction()))
        #expect(verifier.chainCacheStatistics.validations == fixtures.count + 1)
    }

    @Test func concurrentVerificationsAgree() async throws {
        let fixture = try DevFixture()
        let foreign = try DevFixture()
        let verifier = try fixture.verifier()
        let tokens = try (0..<64).map { index in
            let signer = index % 4 == 3 ? foreign.pki.signer : fixture.pki.signer
            return (index, try signer.sign(DevFixture.transaction(id: "tx-\(index)")))
        }
        let results = await withTaskGroup(of: (Int, String?).self) { group in
            for (index, token) in tokens {
                group.addTask { (index, try? await verifier.verifyTransaction(token).transactionID) }
            }
            var results = [String?](repeating: nil, count: tokens.count)
            for await (index, id) in group { results[index] = id }
            return results
        }
        for index in 0..<64 {
            let expected: String? = index % 4 == 3 ? nil : "tx-\(index)"
            #expect(results[index] == expected)
        }
        #expect(verifier.chainCacheStatistics.entries == 1)
    }
}
