import AstroDomain
import ChartService
import Foundation
import Testing

/// The content-derived result id: the cache key of the chart jobs. No servers needed.
@Suite struct ChartResultIDTests {
    let user = UserID(UUID(uuidString: "6f1d2c3b-0000-4000-8000-000000000001")!)
    let profile = ProfileID(UUID(uuidString: "6f1d2c3b-0000-4000-8000-0000000000a1")!)
    let parameters = JSONValue.object(["from": .string("2026-01-01T00:00:00Z"), "to": .string("2026-02-01T00:00:00Z")])

    func id(user: UserID? = nil, profile: ProfileID? = nil, digest: String = "digest-a") -> UUID {
        ChartResultID.derive(
            user: user ?? self.user,
            profile: profile ?? self.profile,
            kind: .transits,
            parameters: parameters,
            inputDigests: [digest]
        )
    }

    @Test("the same inputs give the same id, a version-8 UUID")
    func sameInputsSameID() {
        #expect(id() == id())
        #expect(id().uuidString.lowercased().dropFirst(14).first == "8")
    }

    @Test("two profiles with the same birth data (same digest) get different ids")
    func profileIsPartOfTheID() {
        let twin = ProfileID(UUID(uuidString: "6f1d2c3b-0000-4000-8000-0000000000a2")!)
        #expect(id(profile: twin) != id())
    }

    @Test("another user, another chart digest or other parameters: another id")
    func everyInputCounts() {
        let other = UserID(UUID(uuidString: "6f1d2c3b-0000-4000-8000-000000000002")!)
        #expect(id(user: other) != id())
        #expect(id(digest: "digest-b") != id())
        let later = ChartResultID.derive(
            user: user,
            profile: profile,
            kind: .transits,
            parameters: .object(["from": .string("2026-01-01T00:00:00Z"), "to": .string("2026-03-01T00:00:00Z")]),
            inputDigests: ["digest-a"]
        )
        #expect(later != id())
    }
}
