import AstroDomain
import Foundation
import Hummingbird
import Logging
import Postgres

extension GatewayRoutes {
    // MARK: Helpers

    /// The `Idempotency-Key`: 1–255 visible ASCII characters, or absent.
    static func idempotencyKey(_ request: Request) throws -> String? {
        guard let key = request.headers[idempotencyKeyHeader] else { return nil }
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw Problem(.invalidIdempotencyKey, "Idempotency-Key: 1–255 visible ASCII characters")
        }
        return key
    }
    /// The body as a JSON object.
    /// - Throws: `Problem` 400 `invalid-json` for anything else.
    static func jsonObject(_ data: Data) throws -> JSONValue {
        guard let value = try? JSONValue.parse(data), case .object = value else {
            throw Problem(.invalidJSON, "the body is not a JSON object")
        }
        return value
    }

    /// Runs a database call; a pool or connection failure answers 503, not 500.
    static func database<T: Sendable>(
        _ context: GatewayRequestContext,
        _ body: () async throws -> T
    ) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError where error.kind != .server && error.kind != .decoding {
            context.logger.error("database unavailable", metadata: ["db.error": "\(error)"])
            throw Problem.unavailable(.databaseUnavailable, "the database is not reachable; try again")
        }
    }

    static func text(_ text: String, contentType: String = "text/plain; charset=utf-8") -> Response {
        Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// What an idempotency key is bound to: the job type, the resource and the body, so a key
    /// reused on another story or route is refused rather than answered with another job.
    static func requestHash(_ kind: JobType, path: String, _ data: Data) -> String {
        sha256Hex(Data("\(kind.rawValue) \(path)\n".utf8) + data)
    }
}
