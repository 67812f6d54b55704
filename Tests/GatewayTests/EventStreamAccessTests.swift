import AstroDomain
import Foundation
import Synchronization
import Testing
import WorkerRuntime

@testable import Gateway

/// Issue 29, F6 and F11: who may keep an event stream. Streams from one client address are
/// bounded (an IPv4 address, an IPv6 /64, as the rate limits key them), so one address cannot
/// fill a replica; a stream ends when its token expires or its user's deletion starts, and
/// nothing queued for it is written after that.
@Suite("Event stream access")
struct EventStreamAccessTests {
    static func address(_ text: String) -> BucketKey {
        RateLimiter.bucket(of: BucketKey(address: text))
    }

    /// The finding: 500 anonymous users × 4 streams from one address filled the 2,000 places of
    /// a replica. With the default limits the flood gets 64; another address still opens one.
    @Test func aFloodFromOneAddressGetsItsShareAndOtherAddressesStillOpen() throws {
        let hub = EventHubTests.hub()
        let flooder = Self.address("198.51.100.7")
        var opened = 0
        var refusedForAddress = 0
        for _ in 0..<500 {
            let user = UserID.random()
            for _ in 0..<4 {
                do {
                    _ = try hub.open(user: user, address: flooder, lastEventID: nil)
                    opened += 1
                } catch .tooManyForAddress {
                    refusedForAddress += 1
                } catch {
                    Issue.record("unexpected refusal \(error)")
                }
            }
        }
        #expect(opened == EventStreamLimits().streamsPerAddress)
        #expect(opened == 64)
        #expect(refusedForAddress == 2000 - 64)
        // Everyone else is still served.
        _ = try hub.open(user: .random(), address: Self.address("203.0.113.9"), lastEventID: nil)
        _ = try hub.open(user: .random(), address: Self.address("2001:db8:1:2::1"), lastEventID: nil)
    }

    @Test func anIPv6SlashSixtyFourCountsAsOneAddress() throws {
        let hub = EventHubTests.hub { $0.streamsPerAddress = 2 }
        _ = try hub.open(user: .random(), address: Self.address("2001:db8:1:2::1"), lastEventID: nil)
        _ = try hub.open(user: .random(), address: Self.address("2001:db8:1:2:ffff::9"), lastEventID: nil)
        // Another host of the same /64: the same bucket.
        #expect(throws: EventHub.Refusal.tooManyForAddress) {
            try hub.open(user: .random(), address: Self.address("2001:db8:1:2:abcd::1"), lastEventID: nil)
        }
        // The next /64 is another subscriber.
        _ = try hub.open(user: .random(), address: Self.address("2001:db8:1:3::1"), lastEventID: nil)
    }

    @Test func aClosedStreamFreesItsAddressPlace() throws {
        let hub = EventHubTests.hub { $0.streamsPerAddress = 1 }
        let here = Self.address("192.0.2.1")
        let first = try hub.open(user: .random(), address: here, lastEventID: nil)
        #expect(throws: EventHub.Refusal.tooManyForAddress) {
            try hub.open(user: .random(), address: here, lastEventID: nil)
        }
        hub.close(first)
        _ = try hub.open(user: .random(), address: here, lastEventID: nil)
    }

    @Test func thePerAddressLimitIsConfigured() throws {
        #expect(try GatewayConfiguration.fromEnvironment([:]).eventStreams.streamsPerAddress == 64)
        let set = try GatewayConfiguration.fromEnvironment(["EVENT_STREAMS_PER_ADDRESS": "8"])
        #expect(set.eventStreams.streamsPerAddress == 8)
        for bad in ["0", "-1", "many", "100001"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try GatewayConfiguration.fromEnvironment(["EVENT_STREAMS_PER_ADDRESS": bad])
            }
        }
        #expect(GatewayConfiguration.variables.contains { $0.name == "EVENT_STREAMS_PER_ADDRESS" })
    }

    /// The finding: a stream kept delivering after its token expired. Ended as `tokenExpired`,
    /// it writes the `end` item and none of the events still queued.
    @Test func anExpiredStreamWritesOnlyItsEnd() async throws {
        let hub = EventHubTests.hub()
        let user = UserID.random()
        let stream = try hub.open(user: user, lastEventID: nil)
        let (body, id) = EventHubTests.event(user, id: "queued")
        hub.receive(body: body, messageID: id)
        stream.end(.tokenExpired)
        var written: [StreamItem] = []
        for await item in stream.items where stream.isWritable(item) { written.append(item) }
        #expect(written.count == 1)
        let text = GatewayRoutes.sseText(try #require(written.first))
        #expect(text.hasPrefix("event: end\ndata: {"))
        #expect(text.contains("\"code\":\"token-expired\""))
        // No `id:` line: the client keeps its last event id to resume with.
        #expect(!text.contains("id:"))
    }

    /// The finding: a stream kept delivering after the account was deleted. A deletion the
    /// replica learns of — accepted here or read from the database, as another replica's is —
    /// ends the user's streams (only theirs) and drops the events kept for them.
    @Test func aDeletionEndsTheUsersStreamsOnly() async throws {
        let hub = EventHubTests.hub()
        let deleted = DeletedUsers(window: .seconds(60)) { hub.endStreams(ofDeleted: $0) }
        let (alice, bob, carol) = (UserID.random(), UserID.random(), UserID.random())
        let aliceStream = try hub.open(user: alice, lastEventID: nil)
        let bobStream = try hub.open(user: bob, lastEventID: nil)
        let carolStream = try hub.open(user: carol, lastEventID: nil)
        let (body, id) = EventHubTests.event(alice, id: "a1")
        hub.receive(body: body, messageID: id)

        // Another replica's deletion, read from user_deletions.
        deleted.replace(recorded: [alice.uuid])
        #expect(aliceStream.endReason == .userDeleted)
        #expect(bobStream.endReason == nil && carolStream.endReason == nil)
        var written: [StreamItem] = []
        for await item in aliceStream.items where aliceStream.isWritable(item) { written.append(item) }
        #expect(written.map { GatewayRoutes.sseText($0) }.joined().contains("\"code\":\"user-deleted\""))
        #expect(EventHubTests.ids(written).isEmpty)
        // Nothing of hers is kept to replay.
        let resumed = try hub.open(user: alice, lastEventID: "a1")
        if case .reset? = await EventHubTests.drain(resumed).first {} else { Issue.record("expected a reset") }

        // This replica's own DELETE /v1/me.
        deleted.accepted(bob)
        #expect(bobStream.endReason == .userDeleted)
        #expect(carolStream.endReason == nil)
    }

    @Test func deletedUsersTellsOfEachDeletionOnce() {
        let told = TestLog()
        let deleted = DeletedUsers(window: .seconds(60)) { told.append($0) }
        let (alice, bob) = (UserID.random(), UserID.random())
        deleted.accepted(alice)
        deleted.accepted(alice)
        deleted.replace(recorded: [alice.uuid, bob.uuid])
        deleted.replace(recorded: [alice.uuid, bob.uuid])
        #expect(told.users == [[alice], [bob]])
    }

    final class TestLog: Sendable {
        private let state = Mutex<[[UserID]]>([])
        func append(_ users: [UserID]) { state.withLock { $0.append(users) } }
        var users: [[UserID]] { state.withLock { $0 } }
    }
}
