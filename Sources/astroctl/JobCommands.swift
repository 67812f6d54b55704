import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import UUIDText

/// Publishing a job from the command line and waiting for its end, for the subcommands that
/// publish jobs (publish, report, stories, billing).
enum JobCommands {
    /// The exchange a job of `type` is published to: `astro.requests` for the job types a client
    /// may ask for (the only exchange the client's broker user may publish jobs to), `astro.jobs`
    /// for the internal ones (a worker's or the administrator's).
    static func exchange(for type: JobType) -> String {
        type.isRequestable ? BrokerNames.requestsExchange : BrokerNames.jobsExchange
    }

    /// A job message: persistent, mandatory (it must reach a queue), named by its job id.
    static func message(_ type: JobType, jobID: JobID, body: Data) -> OutgoingMessage {
        var properties = MessageProperties(contentType: "application/json")
        properties.persistent = true
        properties.messageID = jobID.description
        properties.type = type.rawValue
        properties.timestamp = Date()
        properties.appID = "astroctl"
        return OutgoingMessage(
            exchange: exchange(for: type),
            routingKey: type.rawValue,
            body: body,
            properties: properties,
            mandatory: true
        )
    }

    /// Publishes `message`, confirmed by the broker.
    /// - Throws: `CommandFailure` when no queue is bound for it (the topology is not declared).
    static func publish(_ message: OutgoingMessage, connection: ConnectionOptions) async throws {
        do {
            try await connection.withPublisher { try await $0.publish(message) }
        } catch let error as AMQPError where error.kind == .unroutable {
            throw CommandFailure("no queue is bound for \(message.routingKey): run `astroctl migrate` first")
        }
    }

    /// Publishes `body` as a job of `type`, confirmed by the broker.
    static func publish<Body: Encodable>(
        _ type: JobType,
        jobID: JobID,
        body: Body,
        connection: ConnectionOptions
    ) async throws {
        try await publish(
            message(type, jobID: jobID, body: try JSONCoding.encoder.encode(body)),
            connection: connection
        )
    }

    /// The job's end: its status, error and result once terminal.
    struct Finished: Sendable {
        var status: String
        var error: JobError?
        var result: JSONValue?
    }

    /// Polls the job's row until it is terminal; fails after `timeout` seconds, naming `worker`.
    static func waitForEnd(of jobID: JobID, pool: PostgresPool, timeout: Int, worker: String) async throws -> Finished {
        try await waitForEnd(
            of: jobID,
            pool: pool,
            until: ContinuousClock.now + .seconds(timeout),
            onTimeout: "job \(jobID) did not finish within \(timeout) s: is the \(worker) running?"
        )
    }

    /// Polls the job's row until it is terminal or `deadline` passes.
    /// - Throws: `CommandFailure(onTimeout)` at the deadline.
    static func waitForEnd(
        of jobID: JobID,
        pool: PostgresPool,
        until deadline: ContinuousClock.Instant,
        onTimeout: String
    ) async throws -> Finished {
        while ContinuousClock.now < deadline {
            let finished = try await pool.withConnection { database in
                try database.query(
                    "SELECT status, error, result FROM jobs WHERE id = $1 AND status IN ('succeeded', 'failed', 'dead', 'cancelled')",
                    [jobID.uuid]
                ).first.map { row in
                    Finished(
                        status: try row.decode(String.self, "status"),
                        error: try row.decodeJSON(JobError?.self, "error"),
                        result: try row.decodeJSON(JSONValue?.self, "result")
                    )
                }
            }
            if let finished { return finished }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CommandFailure(onTimeout)
    }

    static func uuid(_ text: String, option: String) throws -> UUID {
        guard let uuid = UUID(text: text) else {
            throw ValidationError("\(option): expected a UUID, got \(text)")
        }
        return uuid
    }
}
