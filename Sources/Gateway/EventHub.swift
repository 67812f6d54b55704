import AstroDomain
import Foundation
import Synchronization

/// The bounds of the live event streams (`GET /v1/events`) and long polls (`GET /v1/jobs/{id}?wait=`)
/// of one gateway replica. Every buffer is bounded, so a burst of events, many users or a client
/// that stops reading costs at most these amounts.
public struct EventStreamLimits: Sendable, Hashable {
    /// Open streams of one user on this replica; one more is answered 429.
    public var streamsPerUser = 4
    /// Open streams on this replica; one more is answered 503.
    public var streamsPerReplica = 2_000
    /// Open streams on this replica from one client address (an IPv4 address, an IPv6 /64: the
    /// rate limits' keying, `BucketKey.addressBucket`), whatever their users; one more is
    /// answered 429 (`EVENT_STREAMS_PER_ADDRESS`). Without it, anonymous users registered from one
    /// address fill the replica (500 users × 4 streams = 2,000) and everyone else gets 503.
    public var streamsPerAddress = 64
    /// Events kept per user for resuming with `Last-Event-ID` (the newest ones).
    public var replayEventsPerUser = 100
    /// Events kept for resuming, all users together (the oldest go first).
    public var replayEvents = 50_000
    /// Bytes of event JSON kept for resuming, all users together (the oldest go first).
    public var replayBytes = 32 * 1024 * 1024
    /// Items (events, resets, heartbeats) waiting to be written to one stream; a client that lets
    /// more pile up is disconnected (it resumes with `Last-Event-ID`).
    public var pendingItemsPerStream = 256
    /// A write to a stream that has not completed after this long disconnects the client.
    public var stalledWriteTimeout: Duration = .seconds(30)
    /// How often an idle stream gets a comment line, so that proxies keep it open.
    public var heartbeatInterval: Duration = .seconds(15)
    /// Long polls of one user waiting at once; more are answered at once with the current state.
    public var waitsPerUser = 16
    /// Long polls waiting at once on this replica; more are answered at once with the current state.
    public var waitsPerReplica = 4_096

    /// The defaults above.
    public init() {}
}

/// One event as the streams write it: a stable id (the broker message id the outbox gave it), its
/// type and its JSON (one line).
struct StreamEvent: Sendable, Hashable {
    var id: String
    var type: String
    var json: String
    var user: UserID
    /// Order of arrival on this replica (for evicting the oldest replay entries).
    var sequence: UInt64
}

/// What a stream writes next.
enum StreamItem: Sendable, Hashable {
    case event(StreamEvent)
    /// The stream cannot say what happened since the client's last event: refetch with GETs.
    case reset(code: ErrorCode, detail: String)
    case heartbeat
    /// The last item of a stream its caller may no longer read: why (`token-expired`,
    /// `user-deleted`); the body ends after it.
    case end(code: ErrorCode, detail: String)
}

extension StreamItem {
    /// Whether this is the `end` item.
    var isEnd: Bool {
        if case .end = self { return true }
        return false
    }
}

/// Why a stream ended.
enum StreamEnd: Sendable, Hashable {
    /// The gateway is shutting down.
    case shutdown
    /// The client did not read fast enough (too many pending items, or a write stalled).
    case slowClient
    /// The client went away (a write failed).
    case clientGone
    /// The access token the stream was opened with expired.
    case tokenExpired
    /// The user's deletion started (on this replica or, read from the database, on another).
    case userDeleted

    /// Whether the caller lost the right to its events: nothing queued is written any more, only
    /// the `end` item that says why.
    var withholdsEvents: Bool { self == .tokenExpired || self == .userDeleted }

    /// The `end` item written for a stream ended this way, if any.
    var endItem: StreamItem? {
        switch self {
        case .tokenExpired:
            .end(code: .tokenExpired, detail: "the access token expired; reconnect with a new one and Last-Event-ID")
        case .userDeleted:
            .end(code: .userDeleted, detail: "this account is being deleted")
        case .shutdown, .slowClient, .clientGone:
            nil
        }
    }
}

/// One open event stream: the items waiting to be written (bounded) and how it ends.
final class EventStream: Sendable {
    let id: UInt64
    let user: UserID
    /// The client's address bucket (`BucketKey.addressBucket`) the stream counts against.
    let address: BucketKey
    let items: AsyncStream<StreamItem>
    private let continuation: AsyncStream<StreamItem>.Continuation
    /// Yields once when the stream must stop now (a slow client), cutting a write short.
    let stop: AsyncStream<Void>
    private let stopContinuation: AsyncStream<Void>.Continuation
    private let state = Mutex<(writeStartedAt: ContinuousClock.Instant?, end: StreamEnd?)>((nil, nil))

    init(id: UInt64, user: UserID, address: BucketKey = BucketKey(high: 0, low: 0), pendingLimit: Int) {
        self.id = id
        self.user = user
        self.address = address
        (items, continuation) = AsyncStream.makeStream(
            of: StreamItem.self,
            bufferingPolicy: .bufferingOldest(pendingLimit)
        )
        (stop, stopContinuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Queues an item; false when the queue is full (the stream is then ended as slow).
    @discardableResult
    func enqueue(_ item: StreamItem) -> Bool {
        switch continuation.yield(item) {
        case .enqueued: return true
        case .terminated: return true
        case .dropped:
            end(.slowClient)
            return false
        @unknown default: return false
        }
    }

    /// Ends the stream: a slow client is cut off at once; a caller who lost the right to its events
    /// (`withholdsEvents`) gets only the `end` item that says why (unless the queue is full);
    /// otherwise what is queued is written first.
    func end(_ reason: StreamEnd) {
        let first = state.withLock { state -> Bool in
            guard state.end == nil else { return false }
            state.end = reason
            return true
        }
        guard first else { return }
        if let item = reason.endItem { continuation.yield(item) }
        continuation.finish()
        if reason == .slowClient { stopContinuation.yield(()) }
    }

    /// Why the stream ended, if it did.
    var endReason: StreamEnd? { state.withLock { $0.end } }

    /// Whether a queued item is still written: a caller who lost the right to its events
    /// (`StreamEnd.withholdsEvents`) gets none of those still queued, only the `end` item.
    func isWritable(_ item: StreamItem) -> Bool {
        endReason?.withholdsEvents != true || item.isEnd
    }

    func writeStarted(at instant: ContinuousClock.Instant) { state.withLock { $0.writeStartedAt = instant } }
    func writeFinished() { state.withLock { $0.writeStartedAt = nil } }
    func writeStalled(now: ContinuousClock.Instant, timeout: Duration) -> Bool {
        state.withLock { state in state.writeStartedAt.map { now - $0 > timeout } ?? false }
    }
}

/// A long poll's registration: signalled when an event of its job arrives.
final class JobWaiter: Sendable {
    let id: UInt64
    let jobID: JobID
    let user: UserID

    private struct State {
        /// An event arrived while nobody waited: the next wait returns at once.
        var signalled = false
        /// The current wait, and its number.
        var continuation: CheckedContinuation<Bool, Never>?
        var wait: UInt64 = 0
        /// The number of a wait that timed out or was cancelled before it was suspended.
        var expired: UInt64 = 0
    }
    private let state = Mutex(State())

    init(id: UInt64, jobID: JobID, user: UserID) {
        self.id = id
        self.jobID = jobID
        self.user = user
    }

    /// An event of the job arrived: ends the current wait with true, or the next one.
    func signal() {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let continuation = state.continuation else {
                state.signalled = true
                return nil
            }
            state.continuation = nil
            return continuation
        }
        continuation?.resume(returning: true)
    }

    /// Ends wait number `wait` with false (its time is up, or its task was cancelled).
    private func expire(_ wait: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.wait == wait else { return nil }
            guard let continuation = state.continuation else {
                state.expired = wait
                return nil
            }
            state.continuation = nil
            return continuation
        }
        continuation?.resume(returning: false)
    }

    /// Waits until an event of the job arrived (true; also when one arrived since the last wait)
    /// or `timeout` passed or the task was cancelled (false). Waits may follow one another.
    /// The timeout is kept by `deadlines`, the gateway's one timer, not by a sleeping task per wait.
    func wait(timeout: Duration, deadlines: Deadlines) async -> Bool {
        let number = state.withLock { state -> UInt64 in
            state.wait += 1
            return state.wait
        }
        let token = deadlines.schedule(after: timeout) { self.expire(number) }
        defer { deadlines.cancel(token) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let answer = state.withLock { state -> Bool? in
                    if state.signalled {
                        state.signalled = false
                        return true
                    }
                    if state.expired == number { return false }
                    state.continuation = continuation
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            self.expire(number)
        }
    }
}

/// The replica's live events: what its broker subscription receives, fanned out to the open
/// streams of each event's `userId`, kept (bounded) for resuming, and used to wake long polls.
///
/// All state is under one lock, held only for in-memory work (no I/O, no awaits), so opening a
/// stream — replaying what the client missed, then registering it — is atomic with respect to
/// arriving events: an event is either replayed or delivered live, never both or neither.
public final class EventHub: Sendable {
    /// Why a stream could not be opened.
    enum Refusal: Error, Equatable {
        case tooManyForUser
        case tooManyForAddress
        case replicaFull
        case unsubscribed
    }

    let limits: EventStreamLimits
    let metrics: GatewayMetrics

    private struct UserState {
        var replay: [StreamEvent] = []
        var streams: [UInt64: EventStream] = [:]
        var isEmpty: Bool { replay.isEmpty && streams.isEmpty }
    }

    private struct State {
        var users: [UserID: UserState] = [:]
        /// Every replay entry in arrival order (user, sequence); entries already dropped by the
        /// per-user bound are skipped when reached.
        var order: [(user: UserID, sequence: UInt64)] = []
        var orderHead = 0
        var replayBytes = 0
        var nextSequence: UInt64 = 1
        var nextID: UInt64 = 1
        var streamCount = 0
        /// Open streams by client address bucket (entries at 0 are removed).
        var streamsByAddress: [BucketKey: Int] = [:]
        var waiters: [JobID: [UInt64: JobWaiter]] = [:]
        var waitsByUser: [UserID: Int] = [:]
        var waitCount = 0
        var subscribed = false
        var shuttingDown = false
    }

    private let state = Mutex(State())

    /// - Parameters:
    ///   - limits: The bounds of streams, replay and waits.
    ///   - metrics: Where open streams, delivered and dropped events are counted.
    public init(limits: EventStreamLimits = EventStreamLimits(), metrics: GatewayMetrics) {
        self.limits = limits
        self.metrics = metrics
    }

    /// Whether the broker subscription is consuming (events are live).
    public var isSubscribed: Bool { state.withLock { $0.subscribed } }

    // MARK: Streams

    /// Opens a stream for `user`: queues what the client missed since `lastEventID` (or a
    /// `reset` when that id is not among the user's kept events), then registers the stream for
    /// live events.
    /// - Parameters:
    ///   - user: The caller.
    ///   - address: The client's address bucket (`RateLimiter.clientBucket(of:)`).
    ///   - lastEventID: The client's `Last-Event-ID`, if any.
    /// - Throws: `Refusal` when the user, the client address or the replica has its maximum of
    ///   streams, or when the subscription is down.
    func open(
        user: UserID,
        address: BucketKey = BucketKey(high: 0, low: 0),
        lastEventID: String?
    ) throws(Refusal) -> EventStream {
        let limits = self.limits
        var probed: [EventStream] = []
        let result: Result<EventStream, Refusal> = state.withLock { state in
            guard state.subscribed, !state.shuttingDown else { return .failure(.unsubscribed) }
            guard state.streamCount < limits.streamsPerReplica else { return .failure(.replicaFull) }
            var userState = state.users[user] ?? UserState()
            guard userState.streams.count < limits.streamsPerUser else {
                probed = Array(userState.streams.values)
                return .failure(.tooManyForUser)
            }
            guard state.streamsByAddress[address, default: 0] < limits.streamsPerAddress else {
                // As for the user's places: dead streams from this address are found by a write.
                probed = state.users.values.flatMap { $0.streams.values.filter { $0.address == address } }
                return .failure(.tooManyForAddress)
            }
            let stream = EventStream(
                id: state.nextID,
                user: user,
                address: address,
                pendingLimit: limits.pendingItemsPerStream
            )
            state.nextID += 1
            if let lastEventID {
                if let index = userState.replay.lastIndex(where: { $0.id == lastEventID }) {
                    for event in userState.replay[(index + 1)...] { stream.enqueue(.event(event)) }
                } else {
                    stream.enqueue(
                        .reset(
                            code: .unknownLastEventID,
                            detail: "the events after this Last-Event-ID are no longer kept; refetch with GET"
                        )
                    )
                }
            }
            userState.streams[stream.id] = stream
            state.users[user] = userState
            state.streamCount += 1
            state.streamsByAddress[address, default: 0] += 1
            return .success(stream)
        }
        // A client that went away is noticed only when a write to it fails: a heartbeat now
        // frees the places of the user's dead streams before the client's retry.
        for stream in probed { stream.enqueue(.heartbeat) }
        let stream = try result.get()
        metrics.streamOpened()
        return stream
    }

    /// Unregisters a stream (its writer ended).
    func close(_ stream: EventStream) {
        let removed = state.withLock { state -> Bool in
            guard var userState = state.users[stream.user], userState.streams.removeValue(forKey: stream.id) != nil
            else { return false }
            state.streamCount -= 1
            let left = state.streamsByAddress[stream.address, default: 1] - 1
            state.streamsByAddress[stream.address] = left > 0 ? left : nil
            state.users[stream.user] = userState.isEmpty ? nil : userState
            return true
        }
        if removed { metrics.streamClosed(reason: stream.endReason) }
    }

    // MARK: Events from the subscription

    /// Takes one event from the broker: kept for resuming, queued on its user's streams, and
    /// wakes the long polls of its job.
    /// - Parameters:
    ///   - body: The event's JSON.
    ///   - messageID: The broker message id (the outbox's stable id), if any.
    /// - Returns: whether the event named a user (events without one reach no stream).
    @discardableResult
    func receive(body: Data, messageID: String?) -> Bool {
        guard let value = try? JSONValue.parse(body), case .object(let object) = value else {
            metrics.eventDropped(reason: "invalid")
            return false
        }
        let jobID = object["jobId"]?.stringValue.flatMap { JobID($0) }
        // A follow-up's event (`report.completed` of a `report.generate`, `user.exported` of a
        // `user.export-pack`) also ends the wait on the job that queued it, which a client sees
        // composed with it (`JobProgress`).
        let woken = ["jobId", "requestJobId", "exportId"].compactMap { object[$0]?.stringValue.flatMap { JobID($0) } }
        let type = object["type"]?.stringValue ?? ""
        let user = JobEvent.userID(in: object)
        let id: String
        if let messageID, Self.isUsableID(messageID) {
            id = messageID
        } else {
            // Every event the outbox relays has a message id; this is for any other publisher.
            id = "\(jobID?.description ?? "none"):\(type)"
        }
        let json = String(decoding: value.jsonData(), as: UTF8.self)
        let limits = self.limits
        let (waiters, dropped): ([JobWaiter], Int) = state.withLock { state in
            let waiters = woken.flatMap { state.waiters[$0].map { Array($0.values) } ?? [] }
            guard let user, Self.isUsableType(type) else { return (waiters, 0) }
            let event = StreamEvent(id: id, type: type, json: json, user: user, sequence: state.nextSequence)
            state.nextSequence += 1
            var userState = state.users[user] ?? UserState()
            userState.replay.append(event)
            state.replayBytes += event.json.utf8.count
            state.order.append((user, event.sequence))
            if userState.replay.count > limits.replayEventsPerUser {
                let old = userState.replay.removeFirst()
                state.replayBytes -= old.json.utf8.count
            }
            var dropped = 0
            for stream in userState.streams.values where !stream.enqueue(.event(event)) { dropped += 1 }
            state.users[user] = userState
            Self.evict(&state, limits: limits)
            return (waiters, dropped)
        }
        for waiter in waiters { waiter.signal() }
        if user == nil { metrics.eventDropped(reason: "no-user") }
        if dropped > 0 { metrics.eventDropped(reason: "slow-client", count: dropped) }
        return user != nil
    }

    /// Drops the oldest replay entries until the totals are within bounds.
    private static func evict(_ state: inout State, limits: EventStreamLimits) {
        while state.order.count - state.orderHead > limits.replayEvents || state.replayBytes > limits.replayBytes {
            guard state.orderHead < state.order.count else { break }
            let (user, sequence) = state.order[state.orderHead]
            state.orderHead += 1
            guard var userState = state.users[user], userState.replay.first?.sequence == sequence else { continue }
            let old = userState.replay.removeFirst()
            state.replayBytes -= old.json.utf8.count
            state.users[user] = userState.isEmpty ? nil : userState
        }
        // Compact the order list once its consumed head is the larger part.
        if state.orderHead > 1024, state.orderHead * 2 > state.order.count {
            state.order.removeFirst(state.orderHead)
            state.orderHead = 0
        }
    }

    /// The subscription is consuming. After a lost connection (`afterGap`) events may have been
    /// missed: every open stream gets a `reset`, and nothing kept from before is replayed.
    func subscribed(afterGap: Bool) {
        let streams: [EventStream] = state.withLock { state in
            state.subscribed = true
            guard afterGap else { return [] }
            var streams: [EventStream] = []
            for (user, var userState) in state.users {
                userState.replay = []
                streams.append(contentsOf: userState.streams.values)
                state.users[user] = userState.isEmpty ? nil : userState
            }
            state.order = []
            state.orderHead = 0
            state.replayBytes = 0
            return streams
        }
        for stream in streams {
            stream.enqueue(
                .reset(
                    code: .eventsInterrupted,
                    detail: "the gateway's event subscription was interrupted; refetch with GET"
                )
            )
        }
    }

    /// Ends the open streams of users whose deletion started (`DeletedUsers` calls this for each
    /// deletion it learns of, on every replica) and forgets the events kept for them.
    /// - Returns: how many streams were ended.
    @discardableResult
    func endStreams(ofDeleted users: some Sequence<UserID>) -> Int {
        let streams: [EventStream] = state.withLock { state in
            var streams: [EventStream] = []
            for user in users {
                guard var userState = state.users[user] else { continue }
                streams.append(contentsOf: userState.streams.values)
                for event in userState.replay { state.replayBytes -= event.json.utf8.count }
                userState.replay = []
                state.users[user] = userState.isEmpty ? nil : userState
            }
            return streams
        }
        for stream in streams { stream.end(.userDeleted) }
        return streams.count
    }

    /// The subscription lost its connection: new streams are refused until it is back.
    func unsubscribed() {
        state.withLock { $0.subscribed = false }
    }

    /// Graceful shutdown: every stream writes what it has queued and ends; no new one opens.
    func shutdown() {
        let streams = state.withLock { state in
            state.shuttingDown = true
            return state.users.values.flatMap { $0.streams.values }
        }
        for stream in streams { stream.end(.shutdown) }
    }

    /// One heartbeat round: a comment on every stream, and streams whose write stalled are cut off.
    func heartbeat(now: ContinuousClock.Instant = .now) {
        let streams = state.withLock { state in state.users.values.flatMap { $0.streams.values } }
        for stream in streams {
            if stream.writeStalled(now: now, timeout: limits.stalledWriteTimeout) {
                stream.end(.slowClient)
            } else {
                stream.enqueue(.heartbeat)
            }
        }
    }

    // MARK: Long polls

    /// Registers a long poll of `jobID`, before the caller reads the job's state, so that an event
    /// arriving in between is not missed.
    /// - Returns: nil when the user or the replica already has its maximum of waits.
    func registerWaiter(jobID: JobID, user: UserID) -> JobWaiter? {
        let limits = self.limits
        return state.withLock { state in
            guard state.waitCount < limits.waitsPerReplica, state.waitsByUser[user, default: 0] < limits.waitsPerUser
            else { return nil }
            let waiter = JobWaiter(id: state.nextID, jobID: jobID, user: user)
            state.nextID += 1
            state.waiters[jobID, default: [:]][waiter.id] = waiter
            state.waitsByUser[user, default: 0] += 1
            state.waitCount += 1
            return waiter
        }
    }

    /// Removes a long poll's registration.
    func unregister(_ waiter: JobWaiter) {
        state.withLock { state in
            guard state.waiters[waiter.jobID]?.removeValue(forKey: waiter.id) != nil else { return }
            if state.waiters[waiter.jobID]?.isEmpty == true { state.waiters[waiter.jobID] = nil }
            let left = state.waitsByUser[waiter.user, default: 1] - 1
            state.waitsByUser[waiter.user] = left > 0 ? left : nil
            state.waitCount -= 1
        }
    }

    // MARK: Validation

    /// An id the SSE `id:` field can carry and a client can send back: 1–128 visible ASCII
    /// characters.
    static func isUsableID(_ text: String) -> Bool {
        (1...128).contains(text.utf8.count) && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// An event type the SSE `event:` field can carry: 1–128 visible ASCII characters.
    static func isUsableType(_ text: String) -> Bool { isUsableID(text) }
}
