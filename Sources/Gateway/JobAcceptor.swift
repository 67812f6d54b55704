import AMQP
import AstroDomain
import Foundation
import Hummingbird
import WorkerRuntime

/// What a route needs to publish a job: a confirmed publish to the broker. `AMQPPublisher` is the
/// gateway's; another implementation lets the routes run without a broker.
public protocol JobPublishing: Sendable {
    /// Publishes `message` and returns once the broker confirmed it.
    /// - Throws: when the broker refused it or did not confirm it within `timeout`.
    func publishConfirmed(_ message: OutgoingMessage, timeout: Duration) async throws
    /// Whether a publish can succeed now (connected, not blocked by a broker alarm): `/readyz`.
    var canPublish: Bool { get }
}

extension AMQPPublisher: JobPublishing {
    public func publishConfirmed(_ message: OutgoingMessage, timeout: Duration) async throws {
        try await publish(message, timeout: timeout)
    }

    public var canPublish: Bool { isConnected && !isBlocked }
}

extension GatewayRoutes {
    /// Records, publishes and answers the jobs routes queue (`accept`): the one path from a request
    /// to a queued job, with idempotency keys, daily quotas and the broker's confirm.
    struct JobAcceptor: Sendable {
        let store: GatewayStore
        let publisher: any JobPublishing
        let metrics: GatewayMetrics
        /// How long a publish may wait for the broker's confirm (the request timeout).
        let timeout: Duration

        /// Records and publishes a job, for every route that queues one: the first job of an
        /// idempotency key wins, a retry of one never confirmed publishes the same job id again, and
        /// the answer is 202 (only once the broker confirmed the publish) with the job id (plus
        /// `extra`) and `Location: /v1/jobs/{id}`.
        /// - Parameter body: the job's body and the answer's extra members, for the job id recorded.
        func accept(
            _ kind: JobType,
            user: UserID,
            idempotencyKey: String?,
            requestHash: String,
            context: GatewayRequestContext,
            quota: DailyQuotas.Charge? = nil,
            body: (JobID) throws -> (Data, JobAccepted)
        ) async throws -> Response {
            let recorded: GatewayStore.RecordedJob
            do {
                recorded = try await database(context) {
                    try await store.record(
                        user: user,
                        kind: kind,
                        idempotencyKey: idempotencyKey,
                        requestHash: requestHash,
                        quota: quota
                    )
                }
            } catch let exceeded as QuotaExceeded {
                context.logger.info(
                    "daily quota reached",
                    metadata: [
                        "job.type": "\(kind.rawValue)", "user.id": "\(user)", "quota.code": "\(exceeded.charge.code)",
                    ]
                )
                throw exceeded.problem
            }
            return try await accept(
                recorded,
                kind,
                user: user,
                requestHash: requestHash,
                context: context,
                body: body
            )
        }

        /// `accept` of a job already recorded (a route that records its own way): the key's body
        /// checked, published unless it was, answered 202.
        func accept(
            _ recorded: GatewayStore.RecordedJob,
            _ kind: JobType,
            user: UserID,
            requestHash: String,
            context: GatewayRequestContext,
            body: (JobID) throws -> (Data, JobAccepted)
        ) async throws -> Response {
            guard recorded.requestHash == requestHash else {
                throw Problem(
                    .idempotencyKeyReused,
                    "this Idempotency-Key was used with another request"
                )
            }
            let answer: JobAccepted
            if recorded.markedAhead {
                do {
                    let data: Data
                    (data, answer) = try body(recorded.jobID)
                    try await publish(kind, jobID: recorded.jobID, body: data, context: context)
                } catch {
                    await unmarkPublished(recorded.jobID, context: context)
                    throw error
                }
            } else {
                let data: Data
                (data, answer) = try body(recorded.jobID)
                if !recorded.published {
                    try await publish(kind, jobID: recorded.jobID, body: data, context: context)
                    await markPublished(recorded.jobID, context: context)
                }
            }
            context.logger.info(
                "job accepted",
                metadata: ["job.id": "\(recorded.jobID)", "job.type": "\(kind.rawValue)", "user.id": "\(user)"]
            )
            var response = try respond(answer, status: .accepted)
            response.headers[.location] = "/v1/jobs/\(recorded.jobID)"
            return response
        }

        /// Records that the broker confirmed `jobID`. The job is queued whatever happens here, so a
        /// failure is logged and the answer is still 202: a 503 would invite a retry without
        /// `Idempotency-Key` that makes a second job. A retry with the key publishes the same job id
        /// again, which the worker runs once.
        func markPublished(_ jobID: JobID, context: GatewayRequestContext) async {
            do {
                try await store.markPublished(jobID)
            } catch {
                context.logger.error(
                    "job queued, but its confirm was not recorded",
                    metadata: ["job.id": "\(jobID)", "db.error": "\(error)"]
                )
            }
        }

        /// Takes back the published mark of a job without a key that the broker did not confirm. A
        /// failure is logged: the answer is the 503 of the failed publish either way, and the row
        /// (whose id no one was told) then shows a job as queued that never was.
        func unmarkPublished(_ jobID: JobID, context: GatewayRequestContext) async {
            do {
                try await store.unmarkPublished(jobID)
            } catch {
                context.logger.error(
                    "job not queued, but its published mark was not taken back",
                    metadata: ["job.id": "\(jobID)", "db.error": "\(error)"]
                )
            }
        }

        /// Publishes a job to `astro.gateway-requests` (the gateway's own request exchange) and returns
        /// once the broker confirmed it.
        /// - Throws: `Problem` 503 when the broker refuses it or does not confirm in time.
        func publish(
            _ type: JobType,
            jobID: JobID,
            body: Data,
            context: GatewayRequestContext
        ) async throws {
            var properties = MessageProperties(contentType: "application/json")
            properties.persistent = true
            properties.messageID = jobID.description
            properties.type = type.rawValue
            properties.timestamp = Date()
            properties.appID = "gateway"
            properties.headers = GatewayTrace.messageHeaders()
            let message = OutgoingMessage(
                exchange: BrokerNames.gatewayRequestsExchange,
                routingKey: type.rawValue,
                body: body,
                properties: properties,
                mandatory: true
            )
            do {
                try await publisher.publishConfirmed(message, timeout: timeout)
                metrics.recordPublish(outcome: "confirmed")
            } catch {
                metrics.recordPublish(outcome: "failed")
                context.logger.error(
                    "publish not confirmed",
                    metadata: ["job.id": "\(jobID)", "amqp.error": "\(error)"]
                )
                throw Problem.unavailable(.brokerUnavailable, "the job could not be queued; try again")
            }
        }
    }
}
