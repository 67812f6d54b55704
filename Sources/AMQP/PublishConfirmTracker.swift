import Foundation
import RetryBackoff

/// The bookkeeping of publisher confirms, as a synchronous state machine: no I/O, no locks, no
/// clock (time comes in as `now`, monotonic nanoseconds).
///
/// The publisher's loop feeds it what happened (a batch to publish, a message written with the
/// next delivery tag, basic.ack / basic.nack, basic.return, connection.blocked / unblocked, a
/// channel or connection lost and opened again, time passed) and does what it answers: which
/// message to write next, and which batches are done with which outcome per message (nil:
/// confirmed; else the `AMQPError` it failed with).
///
/// The rules it keeps:
/// - Delivery tags count from 1 on each channel in confirm mode, in the order messages were
///   written; an ack or nack with `multiple` settles every unconfirmed tag up to its own.
/// - basic.return carries no tag and comes before the message's ack: it marks the oldest
///   unconfirmed message of the same exchange, routing key, message id and body, which then
///   fails as `.unroutable` when its ack arrives.
/// - A tag the broker names that is unknown, already settled or out of the window is ignored:
///   nothing the broker sends can trap or settle a message twice.
/// - When the connection is lost (or the channel reset) every published but unconfirmed message
///   goes back to the front of the waiting line, oldest first, and is published again on the
///   next channel with new tags: delivery is at least once.
/// - While the broker blocks the connection nothing is written: messages wait.
/// - A batch not settled by its deadline fails with a timeout that says why (blocked,
///   reconnecting, or simply no confirm).
///
/// `Token` is what the caller gets back with a finished batch (the publisher's continuation; an
/// integer in tests); the tracker never looks at it.
struct PublishConfirmTracker<Token> {
    /// A batch whose every message has its outcome.
    struct Completion {
        /// The token given with the batch to `submit`.
        let token: Token
        /// One per message, in the order submitted: nil when the broker confirmed it, else why it failed.
        let results: [AMQPError?]
    }

    /// What a basic.return said and carried.
    struct ReturnedMessage: Sendable {
        var exchange: String
        var routingKey: String
        var replyCode: UInt16
        var replyText: String
        var messageID: String?
        var body: Data

        /// The error the returned message fails with.
        var error: AMQPError {
            AMQPError(
                kind: .unroutable,
                message: "no queue is bound for routing key '\(routingKey)' on exchange '\(exchange)' "
                    + "(\(replyText)); declare the queue and binding first",
                replyCode: replyCode
            )
        }
    }

    private struct Batch {
        let token: Token
        let deadline: UInt64
        let timeout: Duration
        var results: [AMQPError?]
        var settled: [Bool]
        var remaining: Int

        /// Records the outcome of message `index`, once; returns whether that completed the batch.
        mutating func settle(_ index: Int, _ result: AMQPError?) -> Bool {
            guard settled.indices.contains(index), !settled[index] else { return false }
            settled[index] = true
            results[index] = result
            remaining -= 1
            return remaining == 0
        }
    }

    /// One message of a batch on its way: waiting to be (re)published, or published and unconfirmed.
    private struct Entry {
        let batch: UInt64
        /// The batch's messages (shared storage, not a copy), so a finished batch's message can
        /// still be matched against a basic.return.
        let messages: [OutgoingMessage]
        let index: Int
        /// The delivery tag on the current channel (0 until published).
        var sequence: UInt64 = 0
        /// Set when the broker answered for this tag.
        var confirmed = false
        /// Set when the broker returned the message as unroutable (its ack follows).
        var returned: AMQPError?

        var message: OutgoingMessage { messages[index] }
    }

    /// Open batches by id; a batch leaves when its last message is settled.
    private var batches: [UInt64: Batch] = [:]
    private var nextBatchID: UInt64 = 1
    /// Published on the current channel, in tag order (contiguous tags from `unconfirmed[unconfirmedHead]`).
    private var unconfirmed: [Entry] = []
    private var unconfirmedHead = 0
    private var nextSequence: UInt64 = 1
    /// Waiting for a connection (or a reopened channel) to be published, oldest first, from `backlogHead`.
    private var backlog: [Entry] = []
    private var backlogHead = 0

    /// Whether the broker blocked the connection (connection.blocked, a resource alarm): it stopped
    /// reading the socket, so nothing is written until it unblocks it.
    private(set) var isBlocked = false
    /// Whether a connection is up (between `connected()` and `connectionLost(_:)`).
    private(set) var isConnected = false
    /// Why the last connection ended or the last attempt failed; nil once connected.
    private(set) var lastError: AMQPError?
    /// The earliest deadline of an open batch (at most; a batch may have finished since):
    /// `expire(now:)` is due then.
    private(set) var nextDeadline: UInt64 = .max

    init() {}

    // MARK: - Publishing

    /// Takes a batch to publish: its messages join the end of the waiting line.
    /// - Returns: the completion of an empty batch, which is done at once; nil otherwise.
    mutating func submit(
        _ messages: [OutgoingMessage],
        deadline: UInt64,
        timeout: Duration,
        token: Token
    ) -> Completion? {
        guard !messages.isEmpty else { return Completion(token: token, results: []) }
        let id = nextBatchID
        nextBatchID &+= 1
        batches[id] = Batch(
            token: token,
            deadline: deadline,
            timeout: timeout,
            results: Array(repeating: nil, count: messages.count),
            settled: Array(repeating: false, count: messages.count),
            remaining: messages.count
        )
        backlog.reserveCapacity(backlog.count + messages.count)
        for index in messages.indices {
            backlog.append(Entry(batch: id, messages: messages, index: index))
        }
        nextDeadline = min(nextDeadline, deadline)
        return nil
    }

    /// Whether messages wait to be published (counting any that finished meanwhile, until the
    /// next `discardSettledBacklog()`).
    var hasBacklog: Bool { backlogHead < backlog.count }

    /// How many messages wait to be published (as `hasBacklog` counts them).
    var backlogCount: Int { backlog.count - backlogHead }

    /// The message to write next: the oldest waiting one that has no outcome yet; nil when none
    /// waits or the broker blocked the connection. Follow with `didPublishNext()` once it is
    /// written, or `didFailToEncodeNext(reason:)`.
    mutating func nextToPublish() -> OutgoingMessage? {
        while backlogHead < backlog.count, isSettled(backlog[backlogHead]) {
            backlogHead += 1
        }
        compactBacklog()
        guard !isBlocked, backlogHead < backlog.count else { return nil }
        return backlog[backlogHead].message
    }

    /// The message `nextToPublish()` named was written: it waits for its confirm under the next tag.
    /// - Returns: its delivery tag; nil when no message was waiting.
    @discardableResult
    mutating func didPublishNext() -> UInt64? {
        guard backlogHead < backlog.count else { return nil }
        var entry = backlog[backlogHead]
        backlogHead += 1
        compactBacklog()
        entry.sequence = nextSequence
        entry.confirmed = false
        entry.returned = nil
        nextSequence &+= 1
        unconfirmed.append(entry)
        return entry.sequence
    }

    /// The message `nextToPublish()` named cannot be framed (properties too large or malformed):
    /// it fails for good (`.messageTooLarge`) instead of being republished after every reconnect.
    /// - Parameter reason: the library's word for it.
    mutating func didFailToEncodeNext(reason: String) -> [Completion] {
        guard backlogHead < backlog.count else { return [] }
        let entry = backlog[backlogHead]
        backlogHead += 1
        compactBacklog()
        var done: [Completion] = []
        settle(
            entry,
            AMQPError(
                kind: .messageTooLarge,
                message: "the message could not be encoded (\(reason)); it was not published"
            ),
            into: &done
        )
        return done
    }

    /// Drops waiting messages that have their outcome already (their batch timed out).
    mutating func discardSettledBacklog() {
        guard backlogHead < backlog.count else { return }
        var kept: [Entry] = []
        kept.reserveCapacity(backlog.count - backlogHead)
        for i in backlogHead..<backlog.count where !isSettled(backlog[i]) {
            kept.append(backlog[i])
        }
        backlog = kept
        backlogHead = 0
    }

    // MARK: - Confirms and returns

    /// basic.ack: confirms `tag`, or with `multiple` every tag up to it. Unknown tags are ignored.
    mutating func ack(_ tag: UInt64, multiple: Bool) -> [Completion] {
        settleConfirms(upTo: tag, multiple: multiple, nacked: false)
    }

    /// basic.nack: fails `tag`, or with `multiple` every tag up to it, with `.publishNacked`.
    /// Unknown tags are ignored.
    mutating func nack(_ tag: UInt64, multiple: Bool) -> [Completion] {
        settleConfirms(upTo: tag, multiple: multiple, nacked: true)
    }

    /// basic.return: marks the oldest unconfirmed message it matches, which fails as unroutable
    /// when its ack comes.
    /// - Returns: whether a message matched.
    mutating func returned(_ returned: ReturnedMessage) -> Bool {
        for i in unconfirmedHead..<unconfirmed.count {
            let entry = unconfirmed[i]
            guard !entry.confirmed, entry.returned == nil else { continue }
            let message = entry.message
            if message.exchange == returned.exchange, message.routingKey == returned.routingKey,
                message.properties.messageID == returned.messageID, message.body == returned.body
            {
                unconfirmed[i].returned = returned.error
                return true
            }
        }
        return false
    }

    private mutating func settleConfirms(upTo tag: UInt64, multiple: Bool, nacked: Bool) -> [Completion] {
        guard unconfirmedHead < unconfirmed.count else { return [] }
        var done: [Completion] = []
        let first = unconfirmed[unconfirmedHead].sequence
        if multiple {
            var i = unconfirmedHead
            while i < unconfirmed.count, unconfirmed[i].sequence <= tag {
                settleSequence(at: i, nacked: nacked, into: &done)
                i += 1
            }
        } else if tag >= first, tag - first < UInt64(unconfirmed.count - unconfirmedHead) {
            // The tag comes from the broker: checked against the window before it becomes an index.
            let i = unconfirmedHead + Int(tag - first)
            if unconfirmed[i].sequence == tag {
                settleSequence(at: i, nacked: nacked, into: &done)
            }
        }
        while unconfirmedHead < unconfirmed.count, unconfirmed[unconfirmedHead].confirmed {
            unconfirmedHead += 1
        }
        if unconfirmedHead == unconfirmed.count {
            unconfirmed.removeAll(keepingCapacity: true)
            unconfirmedHead = 0
        } else if unconfirmedHead >= 1024, unconfirmedHead * 2 >= unconfirmed.count {
            unconfirmed.removeFirst(unconfirmedHead)
            unconfirmedHead = 0
        }
        return done
    }

    private mutating func settleSequence(at i: Int, nacked: Bool, into done: inout [Completion]) {
        guard !unconfirmed[i].confirmed else { return }
        unconfirmed[i].confirmed = true
        let entry = unconfirmed[i]
        if nacked {
            settle(
                entry,
                AMQPError(
                    kind: .publishNacked,
                    message: "the broker refused the message (basic.nack); publish it again"
                ),
                into: &done
            )
        } else {
            settle(entry, entry.returned, into: &done)
        }
    }

    // MARK: - Connection and channel

    /// A connection is up with its channel in confirm mode: unblocked (the broker says again if
    /// the alarm persists), tags count from 1.
    mutating func connected() {
        isConnected = true
        isBlocked = false
        lastError = nil
        channelOpened()
    }

    /// The channel was (re)opened in confirm mode: tags count from 1 again.
    mutating func channelOpened() {
        // Nothing is unconfirmed here (a lost channel or connection requeued it); should anything
        // be, it is published again rather than forgotten.
        requeueUnconfirmed()
        nextSequence = 1
    }

    /// The connection ended: every unconfirmed message goes back to the front of the waiting
    /// line, oldest first, to be published again on the next connection.
    /// - Parameter error: why; nil when the loop gave the connection up itself to replace it
    ///   (then `lastError` stays).
    mutating func connectionLost(_ error: AMQPError?) {
        isConnected = false
        if let error { lastError = error }
        requeueUnconfirmed()
    }

    /// A connection attempt failed. An error that retrying cannot mend (credentials, TLS,
    /// configuration) fails every waiting message with it.
    mutating func connectFailed(_ error: AMQPError) -> [Completion] {
        lastError = error
        guard !error.isRetriable else { return [] }
        var done: [Completion] = []
        for i in backlogHead..<backlog.count {
            settle(backlog[i], error, into: &done)
        }
        backlog.removeAll(keepingCapacity: true)
        backlogHead = 0
        return done
    }

    /// The broker closed the channel (queued confirms before the close already processed). With
    /// `causedByPublish`, the unconfirmed messages the close names (`RefusedTarget`; all when it
    /// names none) fail with `error`; every other unconfirmed message goes back to the front of
    /// the waiting line, to be published on the reopened channel.
    mutating func channelClosed(_ error: AMQPError, causedByPublish: Bool) -> [Completion] {
        let failed = causedByPublish ? RefusedTarget(closeText: error.message) : nil
        var done: [Completion] = []
        var again: [Entry] = []
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !isSettled(unconfirmed[i]) {
            let entry = unconfirmed[i]
            let caused = failed.map { $0.covers(entry.message) } ?? true
            if causedByPublish && caused {
                settle(entry, error, into: &done)
            } else {
                again.append(entry)
            }
        }
        unconfirmed.removeAll(keepingCapacity: true)
        unconfirmedHead = 0
        putInFront(again)
        return done
    }

    /// connection.blocked: nothing is written until `connectionUnblocked()`.
    mutating func connectionBlocked() {
        isBlocked = true
    }

    /// connection.unblocked: waiting messages may be written again.
    mutating func connectionUnblocked() {
        isBlocked = false
    }

    private mutating func requeueUnconfirmed() {
        var again: [Entry] = []
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !isSettled(unconfirmed[i]) {
            again.append(unconfirmed[i])
        }
        unconfirmed.removeAll(keepingCapacity: true)
        unconfirmedHead = 0
        putInFront(again)
    }

    private mutating func putInFront(_ entries: [Entry]) {
        guard !entries.isEmpty else { return }
        var line = entries
        line.reserveCapacity(entries.count + backlog.count - backlogHead)
        line.append(contentsOf: backlog[backlogHead...])
        backlog = line
        backlogHead = 0
    }

    // MARK: - Time and closing

    /// Fails every message of each batch whose deadline is at or before `now` and that is still
    /// open, with a timeout that says why (blocked, reconnecting, no confirm).
    mutating func expire(now: UInt64) -> [Completion] {
        nextDeadline = .max
        var expired: [UInt64] = []
        for (id, batch) in batches {
            if batch.deadline <= now {
                expired.append(id)
            } else {
                nextDeadline = min(nextDeadline, batch.deadline)
            }
        }
        guard !expired.isEmpty else { return [] }
        var done: [Completion] = []
        for id in expired.sorted() {
            guard let timeout = batches[id]?.timeout else { continue }
            settleAll(id, timeoutError(timeout), into: &done)
        }
        return done
    }

    private func timeoutError(_ timeout: Duration) -> AMQPError {
        let seconds = timeout.seconds
        if !isConnected, let lastError {
            var error = lastError
            error.message = "not confirmed within \(seconds) s while reconnecting: \(lastError.message)"
            return error
        }
        if isBlocked {
            return AMQPError(
                kind: .timeout,
                message: "the broker has blocked publishing (a memory or disk alarm) for more than \(seconds) s; "
                    + "publish it again later"
            )
        }
        return AMQPError(
            kind: .timeout,
            message: "the broker did not confirm the message within \(seconds) s; it may or may not have been "
                + "delivered, publish it again"
        )
    }

    /// Whether a message still waits for its outcome (to be published, or for its confirm).
    var hasOutstandingWork: Bool {
        for i in backlogHead..<backlog.count where !isSettled(backlog[i]) {
            return true
        }
        for i in unconfirmedHead..<unconfirmed.count where !unconfirmed[i].confirmed && !isSettled(unconfirmed[i]) {
            return true
        }
        return false
    }

    /// The publisher closes: every open batch fails its open messages with `.closed`, and nothing is left.
    mutating func close() -> [Completion] {
        let error = AMQPError(
            kind: .closed,
            message: "the publisher was closed before the broker confirmed the message"
        )
        var done: [Completion] = []
        for id in batches.keys.sorted() {
            settleAll(id, error, into: &done)
        }
        batches.removeAll()
        backlog.removeAll()
        backlogHead = 0
        unconfirmed.removeAll()
        unconfirmedHead = 0
        nextDeadline = .max
        return done
    }

    // MARK: - Settling

    private func isSettled(_ entry: Entry) -> Bool {
        // A batch leaves the table when its last message settles.
        guard let batch = batches[entry.batch] else { return true }
        return batch.settled[entry.index]
    }

    private mutating func settle(_ entry: Entry, _ result: AMQPError?, into done: inout [Completion]) {
        guard batches[entry.batch]?.settle(entry.index, result) == true,
            let batch = batches.removeValue(forKey: entry.batch)
        else { return }
        done.append(Completion(token: batch.token, results: batch.results))
    }

    private mutating func settleAll(_ id: UInt64, _ error: AMQPError, into done: inout [Completion]) {
        guard var batch = batches.removeValue(forKey: id) else { return }
        for index in batch.settled.indices where !batch.settled[index] {
            _ = batch.settle(index, error)
        }
        done.append(Completion(token: batch.token, results: batch.results))
    }

    private mutating func compactBacklog() {
        if backlogHead == backlog.count {
            backlog.removeAll(keepingCapacity: true)
            backlogHead = 0
        } else if backlogHead >= 1024, backlogHead * 2 >= backlog.count {
            backlog.removeFirst(backlogHead)
            backlogHead = 0
        }
    }
}

/// What a channel close caused by a publish refused: the exchange (`amq.default` is the default
/// exchange, `""`) and, for a topic permission (`access to topic 'k' in exchange 'x'`), the
/// routing key — so only those messages fail and the others are published again.
struct RefusedTarget: Equatable, Sendable {
    var exchange: String
    var routingKey: String?

    /// Reads the target from the broker's close text; nil when the text names no exchange.
    init?(closeText text: String) {
        guard let exchange = Self.exchangeNamed(in: text) else { return nil }
        self.exchange = exchange == "amq.default" ? "" : exchange
        self.routingKey = Self.quoted(after: "access to topic '", in: text)
    }

    /// Whether `message` is one the close refused.
    func covers(_ message: OutgoingMessage) -> Bool {
        message.exchange == exchange && (routingKey == nil || message.routingKey == routingKey)
    }

    /// The exchange a broker error text names (`… no exchange 'x' in vhost '/'`), if any.
    static func exchangeNamed(in text: String) -> String? {
        quoted(after: "exchange '", in: text)
    }

    private static func quoted(after prefix: String, in text: String) -> String? {
        guard let start = text.range(of: prefix) else { return nil }
        let rest = text[start.upperBound...]
        guard let end = rest.firstIndex(of: "'") else { return nil }
        return String(rest[..<end])
    }
}
