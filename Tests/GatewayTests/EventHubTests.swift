import AstroDomain
import Foundation
import Testing

@testable import Gateway

/// The hub's bounds and routing without a broker: events reach their user's streams only, the
/// replay buffer is bounded and resumes exactly after an id, unknown ids and gaps give a reset,
/// and a client that lets its queue fill is cut off.
@Suite("Event hub")
struct EventHubTests {
    static func hub(_ configure: (inout EventStreamLimits) -> Void = { _ in }) -> EventHub {
        var limits = EventStreamLimits()
        configure(&limits)
        let hub = EventHub(limits: limits, metrics: GatewayMetrics())
        hub.subscribed(afterGap: false)
        return hub
    }

    static func event(_ user: UserID, id: String, job: JobID = .random()) -> (Data, String) {
        let body = JobEvent(jobID: job, userID: user, type: .chartCalculated, fields: ["chartId": "c"])
        return ((try? body.jsonData()) ?? Data(), id)
    }

    /// The items queued on a stream so far (it is ended to drain them).
    static func drain(_ stream: EventStream) async -> [StreamItem] {
        stream.end(.shutdown)
        var items: [StreamItem] = []
        for await item in stream.items { items.append(item) }
        return items
    }

    static func ids(_ items: [StreamItem]) -> [String] {
        items.compactMap { if case .event(let event) = $0 { event.id } else { nil } }
    }

    @Test func eventsReachTheirUsersStreamsOnly() async throws {
        let hub = Self.hub()
        let (alice, bob) = (UserID.random(), UserID.random())
        let aliceStream = try hub.open(user: alice, lastEventID: nil)
        let bobStream = try hub.open(user: bob, lastEventID: nil)
        let (body, _) = Self.event(alice, id: "a1")
        #expect(hub.receive(body: body, messageID: "a1"))
        // No userId: nobody's.
        let anonymous = try JobEvent(jobID: .random(), type: .chartFailed).jsonData()
        #expect(!hub.receive(body: anonymous, messageID: "x"))
        let aliceItems = await Self.drain(aliceStream)
        #expect(Self.ids(aliceItems) == ["a1"])
        if case .event(let event) = aliceItems.first {
            #expect(event.type == "chart.calculated")
            #expect(!event.json.contains("\n"))
            #expect(try JSONValue.parse(Data(event.json.utf8))["userId"]?.stringValue == alice.description)
        }
        #expect(await Self.drain(bobStream).isEmpty)
    }

    @Test func resumingReplaysExactlyTheEventsAfterTheIDAndAnUnknownIDResets() async throws {
        let hub = Self.hub { $0.replayEventsPerUser = 3 }
        let user = UserID.random()
        for index in 1...5 {
            let (body, id) = Self.event(user, id: "e\(index)")
            hub.receive(body: body, messageID: id)
        }
        // Kept: e3, e4, e5.
        let resumed = try hub.open(user: user, lastEventID: "e3")
        #expect(Self.ids(await Self.drain(resumed)) == ["e4", "e5"])
        hub.close(resumed)
        let current = try hub.open(user: user, lastEventID: "e5")
        #expect(await Self.drain(current).isEmpty)
        hub.close(current)
        let expired = try hub.open(user: user, lastEventID: "e1")
        let items = await Self.drain(expired)
        #expect(items.count == 1)
        if case .reset(let code, _) = items.first {
            #expect(code == .unknownLastEventID)
        } else {
            Issue.record("expected a reset, got \(items)")
        }
        #expect(GatewayRoutes.sseText(items[0]).hasPrefix("id:\nevent: reset\ndata: {"))
    }

    @Test func theReplayBufferIsBoundedOverAllUsers() async throws {
        let hub = Self.hub { $0.replayEvents = 4 }
        let users = (0..<6).map { _ in UserID.random() }
        for (index, user) in users.enumerated() {
            let (body, id) = Self.event(user, id: "u\(index)")
            hub.receive(body: body, messageID: id)
        }
        // The two oldest users' events were dropped: resuming from them resets.
        let first = try hub.open(user: users[0], lastEventID: "u0")
        #expect(await Self.drain(first).first.map { if case .reset = $0 { true } else { false } } == true)
        let last = try hub.open(user: users[5], lastEventID: "u5")
        #expect(await Self.drain(last).isEmpty)
    }

    @Test func aGapInTheSubscriptionResetsOpenStreamsAndForgetsTheReplay() async throws {
        let hub = Self.hub()
        let user = UserID.random()
        let (body, id) = Self.event(user, id: "g1")
        hub.receive(body: body, messageID: id)
        let open = try hub.open(user: user, lastEventID: nil)
        hub.unsubscribed()
        #expect(throws: EventHub.Refusal.unsubscribed) { try hub.open(user: user, lastEventID: nil) }
        hub.subscribed(afterGap: true)
        let items = await Self.drain(open)
        #expect(items.contains { if case .reset(let code, _) = $0 { code == .eventsInterrupted } else { false } })
        let resumed = try hub.open(user: user, lastEventID: "g1")
        #expect(await Self.drain(resumed).first.map { if case .reset = $0 { true } else { false } } == true)
    }

    @Test func streamsPerUserAndPerReplicaAreBounded() throws {
        let hub = Self.hub {
            $0.streamsPerUser = 2
            $0.streamsPerReplica = 3
        }
        let (alice, bob) = (UserID.random(), UserID.random())
        let first = try hub.open(user: alice, lastEventID: nil)
        _ = try hub.open(user: alice, lastEventID: nil)
        #expect(throws: EventHub.Refusal.tooManyForUser) { try hub.open(user: alice, lastEventID: nil) }
        _ = try hub.open(user: bob, lastEventID: nil)
        #expect(throws: EventHub.Refusal.replicaFull) { try hub.open(user: bob, lastEventID: nil) }
        hub.close(first)
        _ = try hub.open(user: alice, lastEventID: nil)
    }

    @Test func aClientThatLetsItsQueueFillIsCutOff() async throws {
        let hub = Self.hub { $0.pendingItemsPerStream = 3 }
        let user = UserID.random()
        let stream = try hub.open(user: user, lastEventID: nil)
        for index in 1...4 {
            let (body, id) = Self.event(user, id: "s\(index)")
            hub.receive(body: body, messageID: id)
        }
        #expect(stream.endReason == .slowClient)
        var stopped = false
        for await _ in stream.stop {
            stopped = true
            break
        }
        #expect(stopped)
    }

    @Test func aStalledWriteIsCutOffByTheHeartbeat() throws {
        let hub = Self.hub { $0.stalledWriteTimeout = .seconds(30) }
        let stream = try hub.open(user: .random(), lastEventID: nil)
        let start = ContinuousClock.now
        stream.writeStarted(at: start)
        hub.heartbeat(now: start + .seconds(10))
        #expect(stream.endReason == nil)
        hub.heartbeat(now: start + .seconds(31))
        #expect(stream.endReason == .slowClient)
    }

    @Test func aLongPollIsWokenByItsJobsEventAndWaitsAreBounded() async throws {
        let hub = Self.hub { $0.waitsPerUser = 1 }
        let user = UserID.random()
        let job = JobID.random()
        let waiter = try #require(hub.registerWaiter(jobID: job, user: user))
        #expect(hub.registerWaiter(jobID: .random(), user: user) == nil)
        // Another job's event does not wake it.
        hub.receive(body: Self.event(user, id: "o").0, messageID: "o")
        #expect(await waiter.wait(timeout: .milliseconds(50), deadlines: Deadlines()) == false)
        hub.receive(body: Self.event(user, id: "w", job: job).0, messageID: "w")
        #expect(await waiter.wait(timeout: .seconds(5), deadlines: Deadlines()))
        hub.unregister(waiter)
        #expect(hub.registerWaiter(jobID: job, user: user) != nil)
    }

    @Test func theWaitParameterIsAWholeNumberOfSecondsUpTo30() {
        #expect(GatewayRoutes.waitSeconds("0") == 0)
        #expect(GatewayRoutes.waitSeconds("30") == 30)
        for text in ["31", "-1", "", "1.5", "abc", "030", " 5", "+5"] {
            #expect(GatewayRoutes.waitSeconds(text) == nil, "\(text)")
        }
    }
}
