import Foundation
import Hummingbird
import Synchronization

/// Reads request bodies: bounded in size and in time, on the gateway's shared timer.
struct BodyReader: Sendable {
    /// The largest body a route reads unless it names a smaller limit (`GATEWAY_MAX_BODY_BYTES`).
    let maxBytes: Int
    /// How long a body may take to arrive.
    let timeout: Duration
    /// The one timer behind every request's body deadline.
    let deadlines: Deadlines

    /// The request body, at most `limit` (`maxBytes` when nil) bytes, read within `timeout` (a
    /// client that trickles its body in keeps the connection from idling out, not the request
    /// from ending).
    /// - Throws: `Problem` 413 when the body is too large, 408 when it is not all there in time.
    func callAsFunction(_ request: Request, limit: Int? = nil) async throws -> Data {
        let limit = limit ?? maxBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw Self.tooLarge(limit)
        }
        enum Read: Sendable {
            case body(ByteBuffer)
            case failed
            case timedOut
        }
        // The read runs in a task of its own so that the shared timer can cancel it at the
        // deadline (see `Deadlines` for why not a racing sleep).
        let reader = Task { () -> ByteBuffer? in
            var request = request
            return try? await request.collectBody(upTo: limit)
        }
        let timedOut = Atomic<Bool>(false)
        let token = deadlines.schedule(after: timeout) {
            timedOut.store(true, ordering: .relaxed)
            reader.cancel()
        }
        let buffer = await withTaskCancellationHandler {
            await reader.value
        } onCancel: {
            reader.cancel()
        }
        deadlines.cancel(token)
        let read: Read
        if timedOut.load(ordering: .relaxed) {
            read = .timedOut
        } else if let buffer {
            read = .body(buffer)
        } else {
            read = .failed
        }
        switch read {
        case .body(let buffer): return Data(buffer.readableBytesView)
        case .failed: throw Self.tooLarge(limit)
        case .timedOut:
            throw Problem(
                .requestTimeout,
                "the body did not arrive within \(timeout.milliseconds) ms"
            )
        }
    }

    /// 413 `body-too-large` for a body over `limit` bytes.
    static func tooLarge(_ limit: Int) -> Problem {
        Problem(
            .bodyTooLarge,
            "the body is over \(limit) bytes"
        )
    }
}
