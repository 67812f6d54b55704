import AstroDomain
import Foundation
import Hummingbird
import Postgres

/// The user's consent to share consumption data with Apple when they ask for a refund
/// (`PUT`/`GET /v1/consent`). Apple's Send Consumption Information must not be called without
/// it; the billing-worker reads the latest answer (migration 0024: one row per answer, never
/// updated, so what was agreed to, to which text and when stays on record).
struct ConsentAnswer: Sendable, Equatable {
    /// The longest `textVersion` (the app's name for the consent text it showed).
    static let maxTextVersionLength = 32
    /// How far ahead of the server's clock `answeredAt` may be (a phone's clock drifts).
    static let maxClockSkew: TimeInterval = 300
    /// How old `answeredAt` may be (an answer queued offline for longer is asked again).
    static let maxAge: TimeInterval = 366 * 86_400

    var consented: Bool
    var textVersion: String
    var answeredAt: Date

    /// Reads and checks a `PUT /v1/consent` body.
    /// - Throws: `Problem` 400 `invalid-json`, or 422 with `field`: `invalid-field-type`,
    ///   `missing-field`, `invalid-text-version`, `invalid-answered-at`.
    init(body: Data, now: Date) throws(Problem) {
        guard let value = try? JSONValue.parse(body), case .object(let members) = value else {
            throw Problem(.invalidJSON, "the body is not a JSON object")
        }
        switch members["consented"] {
        case .bool(let consented)?: self.consented = consented
        case nil: throw Problem(.missingField, "consented: required (true or false)", field: "consented")
        default: throw Problem(.invalidFieldType, "consented: expected true or false", field: "consented")
        }
        switch members["textVersion"] {
        case .string(let version)?:
            guard (1...Self.maxTextVersionLength).contains(version.utf8.count),
                version.utf8.allSatisfy({ byte in
                    (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                        || byte == 0x2E || byte == 0x5F || byte == 0x2D
                })
            else {
                throw Problem(
                    .invalidTextVersion,
                    "textVersion: 1 to \(Self.maxTextVersionLength) of A-Z a-z 0-9 . _ -",
                    field: "textVersion"
                )
            }
            textVersion = version
        case nil: throw Problem(.missingField, "textVersion: required", field: "textVersion")
        default: throw Problem(.invalidFieldType, "textVersion: expected a string", field: "textVersion")
        }
        switch members["answeredAt"] {
        case .string(let text)?:
            guard text.utf8.count <= 40, let date = ISO8601.date(from: text),
                date <= now.addingTimeInterval(Self.maxClockSkew), date >= now.addingTimeInterval(-Self.maxAge)
            else {
                throw Problem(
                    .invalidAnsweredAt,
                    "answeredAt: an ISO 8601 time with a zone, not in the future and at most a year ago",
                    field: "answeredAt"
                )
            }
            answeredAt = date
        case nil: throw Problem(.missingField, "answeredAt: required", field: "answeredAt")
        default: throw Problem(.invalidFieldType, "answeredAt: expected a string", field: "answeredAt")
        }
    }

    init(consented: Bool, textVersion: String, answeredAt: Date) {
        self.consented = consented
        self.textVersion = textVersion
        self.answeredAt = answeredAt
    }
}

/// A recorded answer, as the API shows it.
struct ConsentRecord: Sendable, Equatable {
    var answer: ConsentAnswer
    var recordedAt: Date
}

extension ResourceStore {
    /// The caller's latest consent answer, or nil when they never answered.
    func consent(user: UserID) async throws -> ConsentRecord? {
        try await pool.withConnection { database -> ConsentRecord? in
            try database.query(
                """
                SELECT consented, text_version, answered_at, recorded_at FROM consumption_consents
                WHERE user_id = $1 ORDER BY id DESC LIMIT 1
                """,
                [user.uuid]
            ).first.map { row in
                ConsentRecord(
                    answer: ConsentAnswer(
                        consented: try row.decode(Bool.self, "consented"),
                        textVersion: try row.decode(String.self, "text_version"),
                        answeredAt: try row.decode(Date.self, "answered_at")
                    ),
                    recordedAt: try row.decode(Date.self, "recorded_at")
                )
            }
        }
    }

    /// Records an answer unless it repeats the latest one (a retried PUT adds no row); returns
    /// the record now current.
    func recordConsent(user: UserID, _ answer: ConsentAnswer) async throws -> ConsentRecord {
        try await pool.withConnection { database -> ConsentRecord in
            let rows = try database.query(
                """
                WITH latest AS (
                    SELECT consented, text_version, answered_at, recorded_at FROM consumption_consents
                    WHERE user_id = $1 ORDER BY id DESC LIMIT 1
                ), inserted AS (
                    INSERT INTO consumption_consents (user_id, consented, text_version, answered_at)
                    SELECT $1, $2, $3, $4
                    WHERE NOT EXISTS (SELECT 1 FROM latest
                                      WHERE consented = $2 AND text_version = $3 AND answered_at = $4)
                    RETURNING recorded_at
                )
                SELECT recorded_at FROM inserted
                UNION ALL
                SELECT recorded_at FROM latest WHERE NOT EXISTS (SELECT 1 FROM inserted)
                """,
                [user.uuid, answer.consented, answer.textVersion, answer.answeredAt]
            )
            let recordedAt = try rows.first?.decode(Date.self, "recorded_at") ?? Date()
            return ConsentRecord(answer: answer, recordedAt: recordedAt)
        }
    }
}

extension GatewayRoutes {
}

extension GatewayRoutes {
    /// The caller's consent to share consumption data with Apple.
    struct Consent: GatewayController {
        let resources: ResourceStore
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.putConsent, use: putConsent)
            routes.authenticated(.getConsent, use: getConsent)
        }

        /// `PUT /v1/consent`: records the caller's answer (200 with the record).
        func putConsent(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let data = try await body(request, limit: 4_096)
            let answer = try ConsentAnswer(body: data, now: Date())
            let record = try await database(context) { try await resources.recordConsent(user: user, answer) }
            context.logger.info(
                "consent recorded",
                metadata: [
                    "user.id": "\(user)", "consented": "\(answer.consented)", "text_version": "\(answer.textVersion)",
                ]
            )
            return try respond(ConsentAnswerView(record), status: .ok)
        }

        /// `GET /v1/consent`: the caller's current answer (404 before any).
        func getConsent(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            guard let record = try await database(context, { try await resources.consent(user: user) }) else {
                throw Problem.notFound("no consent answer recorded yet")
            }
            return try respond(ConsentAnswerView(record), status: .ok)
        }
    }
}
