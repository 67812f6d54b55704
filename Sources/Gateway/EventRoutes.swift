import AstroDomain
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// `GET /v1/events` (the caller's live events as Server-Sent Events) and the long poll of
/// `GET /v1/jobs/{id}?wait=N`.
extension GatewayRoutes {
    static let lastEventIDHeader = HTTPFields.Element.Name("Last-Event-ID")!
    static let accelBufferingHeader = HTTPFields.Element.Name("X-Accel-Buffering")!

    /// The longest long poll, in seconds.
    static let maxWaitSeconds = 30

    // MARK: Event stream

    /// An open stream's hold on its place, released with the response: should the server drop the
    /// response without running its body (it does when the head cannot be written, the client
    /// having reset the connection), the body that closes the stream never runs, and the stream
    /// would stay registered for good, counted by `gateway_event_streams_open` and holding one of
    /// its user's places. Closing an already closed stream changes nothing.
    final class StreamLease: Sendable {
        let stream: EventStream
        private let hub: EventHub
        private let watch: ConnectionWatch
        private let registration: ConnectionWatch.Registration?
        private let deadlines: Deadlines
        private let expiry: Deadlines.Token

        init(
            stream: EventStream,
            hub: EventHub,
            watch: ConnectionWatch,
            registration: ConnectionWatch.Registration?,
            deadlines: Deadlines,
            expiry: Deadlines.Token
        ) {
            self.stream = stream
            self.hub = hub
            self.watch = watch
            self.registration = registration
            self.deadlines = deadlines
            self.expiry = expiry
        }

        deinit {
            deadlines.cancel(expiry)
            watch.cancel(registration)
            stream.end(.clientGone)
            hub.close(stream)
        }
    }

    /// Error that ends a stream by closing the connection (a slow or vanished client).
    struct EventStreamCut: Error {
        var reason: StreamEnd
    }

    /// The writer, handed to the one child task that writes while the handler's task waits for
    /// it: only one task uses it at a time (the handler takes it back once that task ended), which
    /// the compiler cannot see.
    private final class WriterBox: @unchecked Sendable {
        var writer: any ResponseBodyWriter
        init(_ writer: any ResponseBodyWriter) { self.writer = writer }
    }

    /// Writes the stream's items until it ends. A slow client (its queue full, or a write
    /// stalled) is cut off by cancelling the write; on graceful shutdown the queued items are
    /// written and the body ends cleanly.
    static func writeStream(
        _ stream: EventStream,
        to writer: inout any ResponseBodyWriter,
        hub: EventHub,
        logger: Logger
    ) async throws {
        let box = WriterBox(writer)
        let metrics = hub.metrics
        let end: StreamEnd? = await withGracefulShutdownHandler {
            await withTaskGroup(of: StreamEnd?.self) { group in
                group.addTask { await pump(stream, box, metrics) }
                group.addTask {
                    for await _ in stream.stop { return .slowClient }
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
        } onGracefulShutdown: {
            stream.end(.shutdown)
        }
        hub.close(stream)
        let reason = end ?? stream.endReason ?? .clientGone
        logger.info("event stream ended", metadata: ["stream.end": "\(reason)"])
        switch reason {
        case .shutdown, .tokenExpired, .userDeleted:
            writer = box.writer
            try await writer.finish(nil)
        case .slowClient, .clientGone:
            throw EventStreamCut(reason: reason)
        }
    }

    /// Writes items as they come; returns why the stream ended.
    private static func pump(_ stream: EventStream, _ box: WriterBox, _ metrics: GatewayMetrics) async -> StreamEnd? {
        do {
            // The client's reconnection delay, and a first line so that the headers go out now.
            try await box.writer.write(ByteBuffer(string: ": live events\nretry: 3000\n\n"))
            for await item in stream.items {
                guard stream.isWritable(item) else { continue }
                stream.writeStarted(at: .now)
                try await box.writer.write(ByteBuffer(string: sseText(item)))
                stream.writeFinished()
                if case .event = item { metrics.eventDelivered() }
            }
            return stream.endReason ?? .shutdown
        } catch {
            stream.end(.clientGone)
            return stream.endReason
        }
    }

    /// One item in the event-stream format. A reset carries an empty `id:`, which clears the
    /// client's last event id: its next reconnection asks for live events only.
    static func sseText(_ item: StreamItem) -> String {
        switch item {
        case .event(let event):
            return "id: \(event.id)\nevent: \(event.type)\ndata: \(event.json)\n\n"
        case .reset(let code, let detail):
            let data = JSONValue.object(["code": .string(code.rawValue), "detail": .string(detail)]).jsonData()
            return "id:\nevent: reset\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
        case .heartbeat:
            return ": heartbeat\n\n"
        case .end(let code, let detail):
            // No `id:`: the client keeps its last event id, to resume with it.
            let data = JSONValue.object(["code": .string(code.rawValue), "detail": .string(detail)]).jsonData()
            return "event: end\ndata: \(String(decoding: data, as: UTF8.self))\n\n"
        }
    }

    // MARK: Long poll

    /// The `wait` parameter: 1–2 digits, 0…30.
    static func waitSeconds(_ text: String) -> Int? {
        guard (1...2).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
            let value = Int(text), (0...maxWaitSeconds).contains(value)
        else { return nil }
        return value
    }
}

extension GatewayRoutes {
    /// A job's state, read at once or long-polled (`?wait=N`).
    struct Jobs: GatewayController {
        let store: GatewayStore
        let events: EventHub
        let deadlines: Deadlines
        let deletedUsers: DeletedUsers

        /// A deleted user's token reaches this route only for the `user.delete` job that the 202 of
        /// `DELETE /v1/me` names in its `Location`: every other job answers 401 `user-deleted`.
        func addRoutes(to routes: Registrar) {
            routes.authenticatedAllowingDeleted(.getJob, use: jobWithWait)
        }

        /// `GET /v1/jobs/{id}` at once (the caller was authenticated before a long poll, so a token
        /// that expired during the wait still gets its answer).
        func job(_ request: Request, context: GatewayRequestContext) async throws -> Response {
            let user = try context.user
            guard let text = context.parameters.get("id"), text.utf8.count <= 36, let jobID = JobID(text) else {
                throw Problem.notFound()
            }
            let deleted = deletedUsers.contains(user)
            guard let view = try await database(context, { try await store.job(jobID, user: user) }) else {
                throw deleted ? GatewayRoutes.userDeleted : Problem.notFound()
            }
            if deleted, view.kind != JobType.userDelete.rawValue { throw GatewayRoutes.userDeleted }
            return try respond(JobAnswer(view, jobID: jobID), status: .ok)
        }

        /// `GET /v1/jobs/{id}`, with `?wait=N` (0…30 seconds): answers as soon as the job is
        /// terminal, or after N seconds with its current state. The wait is woken by the job's events
        /// on this replica's subscription and confirmed by reading the job again; no polling.
        /// - Throws: `Problem` 401, 400 (`wait` not a whole number in 0…30), 404, 503.
        func jobWithWait(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let values = request.uri.queryParameters[values: "wait"]
            guard !values.isEmpty else { return try await job(request, context: context) }
            let user = try context.user
            // A deleted user reads their deletion's state; no long poll is held for them.
            if deletedUsers.contains(user) { return try await job(request, context: context) }
            guard values.count == 1, let seconds = waitSeconds(String(values[0])) else {
                throw Problem(
                    .invalidWait,
                    "wait: expected one whole number of seconds in 0…\(maxWaitSeconds)",
                    field: "wait"
                )
            }
            guard seconds > 0, let text = context.parameters.get("id"), text.utf8.count <= 36, let jobID = JobID(text)
            else {
                return try await job(request, context: context)
            }
            // Registered before the first read, so that an event arriving between the read and the
            // wait still wakes it. At the replica's or the user's maximum of waits, the answer is the
            // current state at once.
            guard let waiter = events.registerWaiter(jobID: jobID, user: user) else {
                return try await job(request, context: context)
            }
            defer { events.unregister(waiter) }
            let deadline = ContinuousClock.now + .seconds(seconds)
            while true {
                guard let view = try await database(context, { try await store.job(jobID, user: user) }) else {
                    throw Problem.notFound()
                }
                let remaining = deadline - .now
                if JobStatus(rawValue: view.progress.status)?.isTerminal == true || remaining <= .zero { break }
                // While the subscription is down no event can wake the wait: the state is read again
                // every second instead.
                let step = events.isSubscribed ? remaining : min(remaining, .seconds(1))
                _ = await waiter.wait(timeout: step, deadlines: deadlines)
                if Task.isCancelled { break }
            }
            return try await job(request, context: context)
        }
    }

    /// The caller's live events (`GET /v1/events`).
    struct Events: GatewayController {
        let events: EventHub
        let verifier: AccessTokenVerifier
        let rateLimiter: RateLimiter
        let deletedUsers: DeletedUsers
        let connections: ConnectionWatch
        let deadlines: Deadlines
        let metrics: GatewayMetrics

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.streamEvents, use: stream)
        }

        /// The caller's events as `text/event-stream`: each event's `id:` (its stable broker message
        /// id), `event:` (its type) and `data:` (its JSON, one line); comment heartbeats; with
        /// `Last-Event-ID`, first the caller's kept events after that one, or a `reset` event when
        /// that id is not kept. The stream ends with an `end` event when the access token expires
        /// (`token-expired`) or the user's deletion starts (`user-deleted`).
        /// - Throws: `Problem` 401 (token), 429 (the caller's or the client address's maximum of
        ///   streams), 503 (this replica's maximum of streams, or its event subscription is down).
        func stream(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let claims = try context.verifiedClaims
            let user = claims.subject
            // An id this gateway never gives (too long, odd characters) can only be unknown: it gets
            // a reset, as an expired one does. An empty header is no header.
            var lastEventID: String?
            if let header = request.headers[lastEventIDHeader], !header.isEmpty {
                lastEventID = EventHub.isUsableID(header) ? header : "\u{0}"
            }
            let stream: EventStream
            let address = rateLimiter.clientBucket(of: request, context: context)
            do {
                stream = try events.open(user: user, address: address, lastEventID: lastEventID)
            } catch .tooManyForAddress {
                metrics.recordRateLimited(limit: "streams-ip")
                context.logger.notice(
                    "event stream refused: address at its maximum",
                    metadata: ["client.key": "\(address)"]
                )
                throw Problem(
                    .tooManyAddressStreams,
                    "at most \(events.limits.streamsPerAddress) open event streams per client address; "
                        + "close one first",
                    retryAfter: 5
                )
            } catch .tooManyForUser {
                throw Problem(
                    .tooManyStreams,
                    "at most \(events.limits.streamsPerUser) open event streams per user; close one first",
                    retryAfter: 5
                )
            } catch .replicaFull {
                throw Problem.unavailable(
                    .streamsUnavailable,
                    "this server holds its maximum of event streams; try again"
                )
            } catch .unsubscribed {
                throw Problem.unavailable(.eventsUnavailable, "live events are not available right now; try again")
            }
            context.logger.info(
                "event stream opened",
                metadata: ["user.id": "\(user)", "stream.resume": "\(lastEventID != nil)"]
            )
            let hub = events
            let logger = context.logger
            // A deletion read between the token check and the registration would have found no
            // stream to end (`DeletedUsers` records the user before it ends the user's streams).
            if deletedUsers.contains(user) { stream.end(.userDeleted) }
            // The stream lives as long as the token that opened it would be accepted (its `exp` and
            // the verifier's leeway for clock skew), kept by `Deadlines`, the one timer.
            let expiresIn = Double(claims.expiresAt + verifier.leeway) - Date().timeIntervalSince1970
            let expiry = deadlines.schedule(after: .milliseconds(Int64(max(0, expiresIn) * 1000))) {
                stream.end(.tokenExpired)
            }
            // A client that closes its connection has gone: an event stream takes no request body,
            // and a client still reading keeps its side open. Without this, an idle stream would
            // learn of it only when a heartbeat write failed (the second after the close).
            let watch = connections
            let lease = StreamLease(
                stream: stream,
                hub: hub,
                watch: watch,
                registration: watch.onInputClosed(header: request.headers[ConnectionWatch.header]) {
                    stream.end(.clientGone)
                },
                deadlines: deadlines,
                expiry: expiry
            )
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/event-stream",
                    .cacheControl: "no-cache",
                    // Proxies such as nginx would otherwise hold events back in their buffers.
                    accelBufferingHeader: "no",
                ],
                body: ResponseBody { writer in
                    try await GatewayRoutes.writeStream(lease.stream, to: &writer, hub: hub, logger: logger)
                }
            )
        }
    }
}
