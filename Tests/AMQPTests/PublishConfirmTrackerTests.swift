import Foundation
import Testing

@testable import AMQP

/// The publisher-confirm bookkeeping without a broker: each test feeds the tracker what the
/// broker and the connection did and checks what it answers.
@Suite("PublishConfirmTracker")
struct PublishConfirmTrackerTests {
    typealias Tracker = PublishConfirmTracker<Int>

    static func message(
        _ body: String,
        to routingKey: String = "q",
        exchange: String = "",
        id: String? = nil
    ) -> OutgoingMessage {
        OutgoingMessage(
            exchange: exchange,
            routingKey: routingKey,
            body: Data(body.utf8),
            properties: MessageProperties(messageID: id)
        )
    }

    static let far: UInt64 = 1_000_000_000_000

    /// A connected tracker with one single-message batch per body (tokens 1, 2, …), none published.
    static func connected(_ bodies: [String], deadline: UInt64 = far) -> Tracker {
        var tracker = Tracker()
        tracker.connected()
        for (offset, body) in bodies.enumerated() {
            #expect(tracker.submit([message(body)], deadline: deadline, timeout: .seconds(2), token: offset + 1) == nil)
        }
        return tracker
    }

    /// The kinds of each finished batch's results, by token.
    static func kinds(_ completions: [Tracker.Completion]) -> [Int: [AMQPError.Kind?]] {
        var byToken: [Int: [AMQPError.Kind?]] = [:]
        for completion in completions {
            #expect(byToken[completion.token] == nil, "batch \(completion.token) finished twice in one answer")
            byToken[completion.token] = completion.results.map { $0?.kind }
        }
        return byToken
    }

    // MARK: - Tags and acks

    @Test("tags count from 1 in the order messages are written")
    func tagsInOrder() {
        var tracker = Self.connected(["a", "b", "c"])
        let written = tracker.publishAll()
        #expect(written.map(\.body) == ["a", "b", "c"])
        #expect(written.map(\.tag) == [1, 2, 3])
        #expect(tracker.nextToPublish() == nil)
        #expect(!tracker.hasBacklog)
        #expect(tracker.hasOutstandingWork)
    }

    @Test("a single ack confirms only its tag, in any order")
    func singleAcks() {
        var tracker = Self.connected(["a", "b", "c"])
        _ = tracker.publishAll()
        #expect(Self.kinds(tracker.ack(2, multiple: false)) == [2: [nil]])
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [1: [nil]])
        #expect(tracker.hasOutstandingWork)
        #expect(Self.kinds(tracker.ack(3, multiple: false)) == [3: [nil]])
        #expect(!tracker.hasOutstandingWork)
    }

    @Test("a multiple ack confirms every tag up to its own, across batches; a batch finishes when all its tags are in")
    func multipleAckCoversRange() {
        var tracker = Tracker()
        tracker.connected()
        _ = tracker.submit(
            [Self.message("a1"), Self.message("a2"), Self.message("a3")],
            deadline: Self.far,
            timeout: .seconds(30),
            token: 1
        )
        _ = tracker.submit(
            [Self.message("b1"), Self.message("b2")],
            deadline: Self.far,
            timeout: .seconds(30),
            token: 2
        )
        #expect(tracker.publishAll().map(\.tag) == [1, 2, 3, 4, 5])
        #expect(Self.kinds(tracker.ack(4, multiple: true)) == [1: [nil, nil, nil]])
        #expect(Self.kinds(tracker.ack(5, multiple: true)) == [2: [nil, nil]])
        #expect(!tracker.hasOutstandingWork)
    }

    @Test("a multiple ack after single acks out of order settles only what is still open")
    func multipleAfterSingles() {
        var tracker = Self.connected(["a", "b", "c", "d"])
        _ = tracker.publishAll()
        #expect(Self.kinds(tracker.ack(3, multiple: false)) == [3: [nil]])
        #expect(Self.kinds(tracker.ack(2, multiple: true)) == [1: [nil], 2: [nil]])
        #expect(Self.kinds(tracker.ack(4, multiple: true)) == [4: [nil]])
        #expect(tracker.ack(3, multiple: false).isEmpty, "a duplicate ack is ignored")
        #expect(tracker.ack(4, multiple: true).isEmpty, "a duplicate multiple ack is ignored")
    }

    @Test("unknown tags are ignored: 0, beyond the last written, before the window, on an empty tracker")
    func unknownTags() {
        var empty = Tracker()
        #expect(empty.ack(1, multiple: false).isEmpty)
        #expect(empty.nack(7, multiple: true).isEmpty)

        var tracker = Self.connected(["a", "b", "c"])
        _ = tracker.publishAll()
        #expect(tracker.ack(0, multiple: false).isEmpty)
        #expect(tracker.ack(0, multiple: true).isEmpty)
        #expect(tracker.ack(99, multiple: false).isEmpty)
        #expect(tracker.nack(UInt64.max, multiple: false).isEmpty)
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [1: [nil]])
        #expect(tracker.ack(1, multiple: false).isEmpty, "tag 1 is before the window now")
        #expect(tracker.nack(1, multiple: true).isEmpty, "a nack cannot undo an ack")
        // As before: a multiple ack beyond the last tag covers every tag written.
        #expect(Self.kinds(tracker.ack(UInt64.max, multiple: true)) == [2: [nil], 3: [nil]])
        #expect(!tracker.hasOutstandingWork)
    }

    @Test("a window of thousands of tags stays exact while it is compacted")
    func longWindow() {
        var tracker = Tracker()
        tracker.connected()
        let count = 3000
        _ = tracker.submit(
            (0..<count).map { Self.message("m\($0)") },
            deadline: Self.far,
            timeout: .seconds(30),
            token: 1
        )
        #expect(tracker.publishAll().last?.tag == UInt64(count))
        for tag in 1...1500 {
            #expect(tracker.ack(UInt64(tag), multiple: false).isEmpty)
        }
        #expect(tracker.nack(2000, multiple: false).isEmpty)
        #expect(tracker.ack(1200, multiple: false).isEmpty, "already confirmed")
        let done = tracker.ack(UInt64(count), multiple: true)
        #expect(done.count == 1)
        let results = done.first?.results ?? []
        #expect(results.count == count)
        #expect(results.enumerated().allSatisfy { index, error in (index == 1999) == (error?.kind == .publishNacked) })
    }

    // MARK: - Nacks

    @Test("a nack fails its message with publishNacked; a multiple nack fails the range")
    func nacks() throws {
        var tracker = Self.connected(["a", "b"])
        _ = tracker.submit(
            [Self.message("c1"), Self.message("c2"), Self.message("c3")],
            deadline: Self.far,
            timeout: .seconds(2),
            token: 3
        )
        _ = tracker.publishAll()
        let nacked = tracker.nack(2, multiple: false)
        #expect(Self.kinds(nacked) == [2: [.publishNacked]])
        let error = try #require(nacked.first?.results.first ?? nil)
        #expect(error.message.contains("basic.nack"))
        #expect(error.isRetriable)
        #expect(Self.kinds(tracker.ack(3, multiple: false)).isEmpty)
        #expect(
            Self.kinds(tracker.nack(5, multiple: true)) == [
                1: [.publishNacked], 3: [nil, .publishNacked, .publishNacked],
            ]
        )
        #expect(tracker.ack(4, multiple: false).isEmpty, "an ack after the nack is ignored")
    }

    // MARK: - Returns

    @Test("a return followed by its ack fails only the returned messages, as unroutable")
    func returnThenAck() throws {
        var tracker = Tracker()
        tracker.connected()
        let batch = [
            Self.message("a", to: "queue"), Self.message("b", to: "missing"), Self.message("c", to: "queue"),
            Self.message("d", to: "missing", id: "d"),
        ]
        _ = tracker.submit(batch, deadline: Self.far, timeout: .seconds(2), token: 1)
        _ = tracker.publishAll()
        #expect(tracker.returned(Self.returned(batch[1])) == true)
        #expect(tracker.ack(2, multiple: false).isEmpty, "the batch still waits for a, c and d")
        #expect(tracker.returned(Self.returned(batch[3])) == true)
        let done = tracker.ack(4, multiple: true)
        #expect(Self.kinds(done) == [1: [nil, .unroutable, nil, .unroutable]])
        let error = try #require(done.first?.results[1] ?? nil)
        #expect(error.replyCode == 312)
        #expect(error.message.contains("'missing'") && error.message.contains("NO_ROUTE"))
        #expect(!error.isRetriable)
    }

    @Test("a return marks the oldest unconfirmed identical message, once each; one matching nothing is reported")
    func returnMatching() {
        var tracker = Self.connected(["same", "same", "other"])
        _ = tracker.publishAll()
        let same = Self.returned(Self.message("same"))
        #expect(tracker.returned(same) == true)
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [1: [.unroutable]])
        #expect(tracker.returned(same) == true)
        #expect(tracker.returned(same) == false, "both are marked already")
        #expect(tracker.returned(Self.returned(Self.message("same", to: "elsewhere"))) == false, "another routing key")
        #expect(tracker.returned(Self.returned(Self.message("same", exchange: "x"))) == false, "another exchange")
        #expect(tracker.returned(Self.returned(Self.message("same", id: "7"))) == false, "another message id")
        #expect(tracker.returned(Self.returned(Self.message("unknown"))) == false)
        #expect(Self.kinds(tracker.ack(3, multiple: true)) == [2: [.unroutable], 3: [nil]])
        #expect(tracker.returned(Self.returned(Self.message("other"))) == false, "confirmed messages are not matched")
    }

    @Test("a returned message that is nacked fails as nacked; one republished after a reconnect starts clean")
    func returnThenNackOrRepublish() {
        var tracker = Self.connected(["a", "b"])
        _ = tracker.publishAll()
        #expect(tracker.returned(Self.returned(Self.message("a"))) == true)
        #expect(Self.kinds(tracker.nack(1, multiple: false)) == [1: [.publishNacked]])
        #expect(tracker.returned(Self.returned(Self.message("b"))) == true)
        tracker.connectionLost(AMQPError(kind: .connectionLost, message: "socket closed"))
        tracker.connected()
        #expect(tracker.publishAll().map(\.tag) == [1])
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [2: [nil]])
    }

    // MARK: - Reconnects and channel resets

    @Test("after a lost connection the unconfirmed messages are republished first, in order, with new tags")
    func reconnectRepublishesInOrder() {
        var tracker = Self.connected(["1", "2", "3", "4", "5"])
        _ = tracker.publishAll()
        #expect(Self.kinds(tracker.ack(2, multiple: true)) == [1: [nil], 2: [nil]])
        #expect(Self.kinds(tracker.ack(4, multiple: false)) == [4: [nil]])
        tracker.connectionLost(AMQPError(kind: .connectionLost, message: "heartbeat timeout"))
        #expect(!tracker.isConnected)
        #expect(tracker.lastError?.message == "heartbeat timeout")
        _ = tracker.submit([Self.message("6")], deadline: Self.far, timeout: .seconds(2), token: 6)
        #expect(tracker.backlogCount == 3)
        tracker.connected()
        #expect(tracker.lastError == nil)
        let written = tracker.publishAll()
        #expect(written.map(\.body) == ["3", "5", "6"])
        #expect(written.map(\.tag) == [1, 2, 3])
        #expect(Self.kinds(tracker.ack(2, multiple: true)) == [3: [nil], 5: [nil]])
        #expect(Self.kinds(tracker.ack(3, multiple: false)) == [6: [nil]])
        #expect(!tracker.hasOutstandingWork)
    }

    @Test("messages not yet written keep their place behind the requeued ones")
    func reconnectKeepsWaitingOrder() {
        var tracker = Self.connected(["1", "2"])
        _ = tracker.nextToPublish()
        tracker.didPublishNext()
        tracker.connectionLost(nil)
        #expect(!tracker.isConnected)
        tracker.connectionLost(AMQPError(kind: .connectionLost, message: "first"))
        tracker.connectionLost(nil)
        #expect(tracker.lastError?.message == "first", "a connection the loop replaced itself leaves the last error")
        tracker.connected()
        #expect(tracker.publishAll().map(\.body) == ["1", "2"])
    }

    @Test("a channel closed by a refused publish fails the messages it names and republishes the others")
    func channelClosedByRefusedExchange() throws {
        var tracker = Tracker()
        tracker.connected()
        _ = tracker.submit(
            [Self.message("a", to: "k", exchange: "gone"), Self.message("b"), Self.message("c", exchange: "gone")],
            deadline: Self.far,
            timeout: .seconds(2),
            token: 1
        )
        _ = tracker.publishAll()
        let error = AMQPError(kind: .notFound, message: "NOT_FOUND - no exchange 'gone' in vhost '/'", replyCode: 404)
        #expect(tracker.channelClosed(error, causedByPublish: true).isEmpty, "b is still open")
        tracker.channelOpened()
        let written = tracker.publishAll()
        #expect(written.map(\.body) == ["b"])
        #expect(written.map(\.tag) == [1])
        let done = tracker.ack(1, multiple: false)
        #expect(Self.kinds(done) == [1: [.notFound, nil, .notFound]])
        #expect(done.first?.results.first??.replyCode == 404)
    }

    @Test(
        "a topic permission refused fails only that routing key on that exchange; the default exchange is named amq.default"
    )
    func channelClosedByTopicPermission() {
        var tracker = Self.connected([])
        _ = tracker.submit(
            [
                Self.message("a", to: "billing.refund", exchange: "astro.jobs"),
                Self.message("b", to: "chart.calculate", exchange: "astro.jobs"),
            ],
            deadline: Self.far,
            timeout: .seconds(2),
            token: 1
        )
        _ = tracker.submit([Self.message("c", to: "q")], deadline: Self.far, timeout: .seconds(2), token: 2)
        _ = tracker.publishAll()
        let refused = AMQPError(
            kind: .channelClosed,
            message: "ACCESS_REFUSED - access to topic 'billing.refund' in exchange 'astro.jobs' in vhost '/' refused",
            replyCode: 403
        )
        #expect(tracker.channelClosed(refused, causedByPublish: true).isEmpty)
        tracker.channelOpened()
        #expect(tracker.publishAll().map(\.body) == ["b", "c"])
        let byDefault = AMQPError(
            kind: .channelClosed,
            message: "ACCESS_REFUSED - access to exchange 'amq.default' in vhost '/' refused for user 'u'",
            replyCode: 403
        )
        #expect(Self.kinds(tracker.channelClosed(byDefault, causedByPublish: true)) == [2: [.channelClosed]])
        tracker.channelOpened()
        #expect(tracker.publishAll().map(\.body) == ["b"])
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [1: [.channelClosed, nil]])
    }

    @Test(
        "a channel close that names no exchange fails every unconfirmed message; one not caused by a publish fails none"
    )
    func channelClosedWithoutTarget() {
        var tracker = Self.connected(["a", "b"])
        _ = tracker.publishAll()
        let declare = AMQPError(kind: .preconditionFailed, message: "PRECONDITION_FAILED - inequivalent arg 'durable'")
        #expect(tracker.channelClosed(declare, causedByPublish: false).isEmpty)
        tracker.channelOpened()
        #expect(tracker.publishAll().map(\.body) == ["a", "b"])
        #expect(Self.kinds(tracker.ack(1, multiple: false)) == [1: [nil]])
        let vague = AMQPError(kind: .channelClosed, message: "the broker closed the channel")
        #expect(Self.kinds(tracker.channelClosed(vague, causedByPublish: true)) == [2: [.channelClosed]])
        #expect(!tracker.hasOutstandingWork)
    }

    // MARK: - Timeouts

    @Test("a batch times out at its deadline, keeping the outcomes it had; its late confirms are ignored")
    func timeouts() throws {
        var tracker = Tracker()
        tracker.connected()
        _ = tracker.submit([Self.message("a"), Self.message("b")], deadline: 100, timeout: .seconds(2), token: 1)
        _ = tracker.submit([Self.message("c")], deadline: 300, timeout: .seconds(2), token: 2)
        #expect(tracker.nextDeadline == 100)
        _ = tracker.publishAll()
        #expect(tracker.ack(1, multiple: false).isEmpty)
        #expect(tracker.expire(now: 99).isEmpty)
        let done = tracker.expire(now: 100)
        #expect(Self.kinds(done) == [1: [nil, .timeout]])
        let error = try #require(done.first?.results[1] ?? nil)
        #expect(error.message.contains("did not confirm the message within 2.0 s"))
        #expect(tracker.nextDeadline == 300)
        #expect(tracker.ack(2, multiple: false).isEmpty, "a timed-out message's ack is ignored")
        #expect(Self.kinds(tracker.ack(3, multiple: true)) == [2: [nil]])
        #expect(tracker.expire(now: 1000).isEmpty)
        #expect(tracker.nextDeadline == .max)
    }

    @Test("a timeout while reconnecting carries the connection's error; a timed-out message is not republished")
    func timeoutWhileReconnecting() throws {
        var tracker = Self.connected(["a"], deadline: 50)
        _ = tracker.submit([Self.message("b")], deadline: 500, timeout: .seconds(2), token: 2)
        _ = tracker.publishAll()
        tracker.connectionLost(AMQPError(kind: .connectionLost, message: "reading from the broker: socket closed"))
        let done = tracker.expire(now: 60)
        #expect(Self.kinds(done) == [1: [.connectionLost]])
        let error = try #require(done.first?.results[0] ?? nil)
        #expect(
            error.message == "not confirmed within 2.0 s while reconnecting: reading from the broker: socket closed"
        )
        tracker.connected()
        #expect(tracker.publishAll().map(\.body) == ["b"])
    }

    @Test("a timeout while waiting in the backlog drops the message from it; never connected means a plain timeout")
    func timeoutInBacklog() {
        var tracker = Tracker()
        _ = tracker.submit([Self.message("a")], deadline: 10, timeout: .milliseconds(500), token: 1)
        #expect(Self.kinds(tracker.expire(now: 10)) == [1: [.timeout]])
        #expect(tracker.hasBacklog, "the settled entry stays until the next flush, as before")
        #expect(!tracker.hasOutstandingWork)
        tracker.discardSettledBacklog()
        #expect(!tracker.hasBacklog)
        tracker.connected()
        #expect(tracker.nextToPublish() == nil)
    }

    // MARK: - Blocked

    @Test("while the broker blocks the connection nothing is written, and a timeout says so")
    func blocked() throws {
        var tracker = Self.connected(["a"], deadline: 100)
        tracker.connectionBlocked()
        #expect(tracker.isBlocked)
        #expect(tracker.nextToPublish() == nil)
        #expect(tracker.hasBacklog)
        let done = tracker.expire(now: 100)
        let error = try #require(done.first?.results[0] ?? nil)
        #expect(error.kind == .timeout)
        #expect(error.message.contains("blocked publishing"))

        _ = tracker.submit([Self.message("b")], deadline: 1000, timeout: .seconds(2), token: 2)
        #expect(tracker.nextToPublish() == nil)
        tracker.connectionUnblocked()
        #expect(tracker.publishAll().map(\.body) == ["b"])

        tracker.connectionBlocked()
        tracker.connectionLost(AMQPError(kind: .connectionLost, message: "gone"))
        tracker.connected()
        #expect(!tracker.isBlocked, "a new connection starts unblocked")
    }

    // MARK: - Failures outside the broker's answers

    @Test("a message that cannot be encoded fails for good; the rest of its batch goes on")
    func encodingFailure() throws {
        var tracker = Tracker()
        tracker.connected()
        _ = tracker.submit(
            [Self.message("huge"), Self.message("fine")],
            deadline: Self.far,
            timeout: .seconds(2),
            token: 1
        )
        #expect(tracker.nextToPublish()?.body == Data("huge".utf8))
        #expect(tracker.didFailToEncodeNext(reason: "table too large").isEmpty)
        #expect(tracker.publishAll().map(\.body) == ["fine"])
        let done = tracker.ack(1, multiple: false)
        #expect(Self.kinds(done) == [1: [.messageTooLarge, nil]])
        #expect(done.first?.results[0]?.message.contains("table too large") == true)
    }

    @Test("a connect attempt that cannot succeed fails the waiting messages; a retriable one keeps them")
    func connectFailures() {
        var tracker = Tracker()
        _ = tracker.submit([Self.message("a")], deadline: Self.far, timeout: .seconds(2), token: 1)
        #expect(tracker.connectFailed(AMQPError(kind: .connectionFailed, message: "refused")).isEmpty)
        #expect(tracker.lastError?.kind == .connectionFailed)
        #expect(tracker.hasBacklog)
        let done = tracker.connectFailed(AMQPError(kind: .authenticationFailed, message: "bad password"))
        #expect(Self.kinds(done) == [1: [.authenticationFailed]])
        #expect(!tracker.hasBacklog)
    }

    @Test("closing fails every open message with closed and leaves nothing behind")
    func close() {
        var tracker = Self.connected(["a", "b"])
        _ = tracker.submit(
            [Self.message("c1"), Self.message("c2")],
            deadline: Self.far,
            timeout: .seconds(2),
            token: 3
        )
        _ = tracker.publishAll()
        _ = tracker.submit([Self.message("d")], deadline: Self.far, timeout: .seconds(2), token: 4)
        #expect(Self.kinds(tracker.ack(3, multiple: true)) == [1: [nil], 2: [nil]])
        let done = tracker.close()
        #expect(Self.kinds(done) == [3: [nil, .closed], 4: [.closed]])
        #expect(done.map(\.token) == [3, 4])
        #expect(!tracker.hasOutstandingWork)
        #expect(!tracker.hasBacklog)
        #expect(tracker.ack(4, multiple: true).isEmpty)
        #expect(tracker.close().isEmpty)
    }

    @Test("an empty batch is done at once; calls with nothing waiting answer nothing")
    func emptyInputs() {
        var tracker = Tracker()
        let done = tracker.submit([], deadline: 0, timeout: .seconds(1), token: 9)
        #expect(done?.token == 9 && done?.results.isEmpty == true)
        #expect(tracker.nextDeadline == .max)
        #expect(tracker.didPublishNext() == nil)
        #expect(tracker.didFailToEncodeNext(reason: "x").isEmpty)
        #expect(tracker.channelClosed(AMQPError(kind: .channelClosed, message: ""), causedByPublish: true).isEmpty)
        #expect(tracker.expire(now: .max).isEmpty)
        #expect(tracker.returned(Self.returned(Self.message("a"))) == false)
    }

    // MARK: - Anything the broker may send

    @Test("random broker input never traps, and every batch finishes exactly once")
    func randomBrokerInput() {
        for seed in 1...40 {
            var random = SplitMix64(seed: UInt64(seed))
            var tracker = Tracker()
            var finished: [Int: Int] = [:]
            var submitted = 0
            var now: UInt64 = 0
            func record(_ completions: [Tracker.Completion]) {
                for completion in completions {
                    finished[completion.token, default: 0] += 1
                }
            }
            for _ in 0..<400 {
                let tag = random.next() % 3 == 0 ? random.next() : random.next() % 40
                switch random.next() % 14 {
                case 0, 1:
                    submitted += 1
                    let count = Int(random.next() % 4)
                    let messages = (0..<count).map { _ in
                        Self.message("m\(random.next() % 5)", to: "k\(random.next() % 2)")
                    }
                    let deadline = now + random.next() % 200
                    if let done = tracker.submit(messages, deadline: deadline, timeout: .seconds(1), token: submitted) {
                        record([done])
                    }
                case 2, 3:
                    while random.next() % 4 != 0, tracker.nextToPublish() != nil {
                        if random.next() % 20 == 0 {
                            record(tracker.didFailToEncodeNext(reason: "bad"))
                        } else {
                            tracker.didPublishNext()
                        }
                    }
                    tracker.discardSettledBacklog()
                case 4, 5: record(tracker.ack(tag, multiple: random.next() % 2 == 0))
                case 6: record(tracker.nack(tag, multiple: random.next() % 2 == 0))
                case 7:
                    _ = tracker.returned(
                        .init(
                            exchange: "",
                            routingKey: "k\(random.next() % 2)",
                            replyCode: UInt16(truncatingIfNeeded: random.next()),
                            replyText: "NO_ROUTE",
                            messageID: nil,
                            body: Data("m\(random.next() % 5)".utf8)
                        )
                    )
                case 8:
                    let text =
                        random.next() % 2 == 0 ? "no exchange '' in vhost" : "access to topic 'k1' in exchange ''"
                    record(
                        tracker.channelClosed(
                            AMQPError(kind: .channelClosed, message: text),
                            causedByPublish: random.next() % 2 == 0
                        )
                    )
                    tracker.channelOpened()
                case 9:
                    tracker.connectionLost(AMQPError(kind: .connectionLost, message: "lost"))
                    if random.next() % 2 == 0 { tracker.connected() }
                case 10:
                    if random.next() % 2 == 0 { tracker.connectionBlocked() } else { tracker.connectionUnblocked() }
                case 11:
                    record(tracker.connectFailed(AMQPError(kind: .connectionFailed, message: "refused")))
                    tracker.connected()
                default:
                    now += random.next() % 50
                    record(tracker.expire(now: now))
                }
            }
            record(tracker.close())
            #expect(!tracker.hasOutstandingWork)
            #expect(finished.count == submitted, "seed \(seed): every batch finished")
            #expect(finished.values.allSatisfy { $0 == 1 }, "seed \(seed): no batch finished twice")
        }
    }

    static func returned(_ message: OutgoingMessage) -> Tracker.ReturnedMessage {
        Tracker.ReturnedMessage(
            exchange: message.exchange,
            routingKey: message.routingKey,
            replyCode: 312,
            replyText: "NO_ROUTE",
            messageID: message.properties.messageID,
            body: message.body
        )
    }
}

extension PublishConfirmTracker {
    /// Writes every message the tracker names, as the loop does on a socket with room.
    /// - Returns: the messages in the order written, as (body text, tag).
    mutating func publishAll() -> [(body: String, tag: UInt64)] {
        var written: [(body: String, tag: UInt64)] = []
        while let message = nextToPublish() {
            guard let tag = didPublishNext() else { break }
            written.append((String(decoding: message.body, as: UTF8.self), tag))
        }
        discardSettledBacklog()
        return written
    }
}

/// A small seeded generator, so a failing random run can be replayed.
struct SplitMix64 {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
