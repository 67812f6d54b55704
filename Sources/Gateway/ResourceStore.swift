import AstroDomain
import Foundation
import Postgres

/// What the gateway reads of the app's resources (profiles, charts, credits, the ledger,
/// reports), and the one thing it deletes (a profile). Every statement names the caller: a row
/// of another user is never read, changed or told apart from one that does not exist. The grants
/// these statements need are migration 0015's, no more.
struct ResourceStore: Sendable {
    let pool: PostgresPool

    // MARK: Profiles

    /// The user's profiles by name (the order of the unique index on `(user_id, name)`: no sort,
    /// no extra index on the chart-worker's write path), after `name` when given, at most `limit`.
    func profiles(user: UserID, after name: String?, limit: Int) async throws -> [ProfileAnswer] {
        try await pool.withConnection { database -> [ProfileAnswer] in
            // $2 is NULL for the first page; the statement is planned with its values, so the
            // condition folds away and the index range starts where the cursor says.
            try database.query(
                """
                SELECT p.id, p.name, to_char(p.birth_date, 'YYYY-MM-DD') AS birth_date,
                       to_char(p.birth_time, 'HH24:MI') AS birth_time, p.timezone, p.latitude, p.longitude,
                       p.location_name, p.created_at, p.updated_at, c.id AS chart_id, c.house_system,
                       c.engine_version, c.updated_at AS chart_updated_at
                FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
                WHERE p.user_id = $1 AND ($2::text IS NULL OR p.name > $2::text)
                ORDER BY p.name
                LIMIT $3
                """,
                [user.uuid, name, limit]
            ).map(Self.profile)
        }
    }

    /// Whether another of the user's profiles (not `except`) is named `name` — the names are
    /// unique per user (`user_profiles_name_unique_per_user`) — unless `replaying`, the job an
    /// `Idempotency-Key` derives, was recorded already: a retry of the request that created the
    /// profile replays its answer instead of being refused for the name it gave.
    /// - Throws: `PostgresError`.
    func nameTaken(_ name: String, user: UserID, except: ProfileID?, replaying: JobID?) async throws -> Bool {
        try await pool.withConnection { database -> Bool in
            try database.query(
                """
                SELECT EXISTS (
                           SELECT 1 FROM user_profiles
                           WHERE user_id = $1 AND name = $2 AND ($3::uuid IS NULL OR id <> $3::uuid)
                       )
                       AND NOT EXISTS (SELECT 1 FROM gateway_jobs WHERE job_id = $4::uuid AND user_id = $1)
                       AS taken
                """,
                [user.uuid, name, except?.uuid, replaying?.uuid]
            ).first?.decode(Bool.self, "taken") ?? false
        }
    }

    /// The user's profile, or `nil` when there is no such profile of this user.
    func profile(_ id: ProfileID, user: UserID) async throws -> ProfileAnswer? {
        try await pool.withConnection { database -> ProfileAnswer? in
            try database.query(
                """
                SELECT p.id, p.name, to_char(p.birth_date, 'YYYY-MM-DD') AS birth_date,
                       to_char(p.birth_time, 'HH24:MI') AS birth_time, p.timezone, p.latitude, p.longitude,
                       p.location_name, p.created_at, p.updated_at, c.id AS chart_id, c.house_system,
                       c.engine_version, c.updated_at AS chart_updated_at
                FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
                WHERE p.id = $1 AND p.user_id = $2
                """,
                [id.uuid, user.uuid]
            ).first.map(Self.profile)
        }
    }

    private static func profile(_ row: PostgresRow) throws -> ProfileAnswer {
        var chart: ProfileAnswer.Chart?
        if let chartID = try row.decode(UUID?.self, "chart_id") {
            chart = ProfileAnswer.Chart(
                chartId: ChartID(chartID),
                houseSystem: try row.decode(String.self, "house_system"),
                engineVersion: try row.decode(String.self, "engine_version"),
                calculatedAt: try row.decode(Date.self, "chart_updated_at")
            )
        }
        return ProfileAnswer(
            profileId: ProfileID(try row.decode(UUID.self, "id")),
            name: try row.decode(String.self, "name"),
            birthDate: try row.decode(String.self, "birth_date"),
            birthTime: try row.decode(String.self, "birth_time"),
            timezone: try row.decode(String.self, "timezone"),
            latitude: try row.decode(Double.self, "latitude"),
            longitude: try row.decode(Double.self, "longitude"),
            locationName: try row.decode(String.self, "location_name"),
            createdAt: try row.decode(Date.self, "created_at"),
            updatedAt: try row.decode(Date.self, "updated_at"),
            chart: chart
        )
    }

    /// Whether the user's profile has its chart stored; `nil` when there is no such profile of
    /// this user.
    func profileHasChart(_ id: ProfileID, user: UserID) async throws -> Bool? {
        try await pool.withConnection { database -> Bool? in
            guard
                let row = try database.query(
                    """
                    SELECT EXISTS (SELECT 1 FROM birth_charts c WHERE c.profile_id = p.id) AS has_chart
                    FROM user_profiles p WHERE p.id = $1 AND p.user_id = $2
                    """,
                    [id.uuid, user.uuid]
                ).first
            else { return nil }
            return try row.decode(Bool.self, "has_chart")
        }
    }

    /// What `GET /v1/profiles/{id}/chart` finds.
    enum ChartLookup: Sendable, Equatable {
        /// No such profile of this user.
        case noProfile
        /// The profile exists; its chart does not yet.
        case notCalculated
        /// The stored chart, as PostgreSQL writes the `jsonb` out: sent as it is, never parsed.
        case chart(String)
    }

    /// The profile's stored chart: one statement, two unique-index look-ups (the profile's primary
    /// key, the chart's one-per-profile key), the document passed through as text.
    func chart(_ id: ProfileID, user: UserID) async throws -> ChartLookup {
        try await pool.withConnection { database -> ChartLookup in
            guard
                let row = try database.query(
                    """
                    SELECT c.chart_data::text AS chart
                    FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
                    WHERE p.id = $1 AND p.user_id = $2
                    """,
                    [id.uuid, user.uuid]
                ).first
            else { return .noProfile }
            return row.rawText("chart").map(ChartLookup.chart) ?? .notCalculated
        }
    }

    /// What `deleteProfile` did.
    enum ProfileDeletion: Sendable, Equatable {
        case deleted
        /// No such profile of this user.
        case notFound
        /// A report paid for with a credit is being written for it (`report_in_progress`).
        case reportInProgress
    }

    /// Deletes the user's profile (its chart and reports go with it, by the schema's foreign
    /// keys), and remembers its id in `deleted_profiles`, in the same statement, so an update of
    /// it already queued (a PUT racing this DELETE) is refused by the chart-worker instead of
    /// creating the profile again — unless a report paid for with a credit is being written for
    /// it (as its profile or its partner): deleting it then made the report fail after its LLM
    /// answer was paid, and refunded the credit (issue 29, F1).
    func deleteProfile(_ id: ProfileID, user: UserID) async throws -> ProfileDeletion {
        try await pool.withConnection { database -> ProfileDeletion in
            let row = try database.query(
                """
                WITH target AS (
                    SELECT id, report_in_progress(id) AS busy FROM user_profiles WHERE id = $1 AND user_id = $2
                ), gone AS (
                    DELETE FROM user_profiles WHERE id IN (SELECT id FROM target WHERE NOT busy) RETURNING id
                ), remembered AS (
                    INSERT INTO deleted_profiles (id) SELECT id FROM gone ON CONFLICT DO NOTHING
                )
                SELECT (SELECT count(*) FROM target)::int AS found, (SELECT count(*) FROM gone)::int AS deleted
                """,
                [id.uuid, user.uuid]
            ).first
            guard try row?.decode(Int.self, "found") == 1 else { return .notFound }
            return try row?.decode(Int.self, "deleted") == 1 ? .deleted : .reportInProgress
        }
    }

    // MARK: Credits and the ledger

    /// Available (neither spent nor revoked) credits by area; `nil` is the any-area credits.
    func availableCredits(user: UserID) async throws -> [ReportArea?: Int] {
        try await pool.withConnection { database -> [ReportArea?: Int] in
            var counts: [ReportArea?: Int] = [:]
            for row in try database.query(
                """
                SELECT report_area, count(*)::int AS available FROM purchase_credits
                WHERE user_id = $1 AND NOT consumed AND NOT revoked
                GROUP BY report_area
                """,
                [user.uuid]
            ) {
                let area = try row.decode(String?.self, "report_area")
                counts[area.flatMap(ReportArea.init(rawValue:)), default: 0] += try row.decode(Int.self, "available")
            }
            return counts
        }
    }

    /// The user's ledger, newest first (the `(user_id, id)` index backwards), before entry
    /// `before` when given, at most `limit`.
    func ledger(user: UserID, before: Int64?, limit: Int) async throws -> [LedgerEntryAnswer] {
        try await pool.withConnection { database -> [LedgerEntryAnswer] in
            try database.query(
                """
                SELECT id, entry, credit_id, transaction_id, job_id, profile_id, report_area, report_language, reason,
                       created_at
                FROM credit_ledger
                WHERE user_id = $1 AND ($2::bigint IS NULL OR id < $2::bigint)
                ORDER BY id DESC
                LIMIT $3
                """,
                [user.uuid, before, limit]
            ).map { row in
                LedgerEntryAnswer(
                    id: try row.decode(Int64.self, "id"),
                    entry: try row.decode(String.self, "entry"),
                    creditId: CreditID(try row.decode(UUID.self, "credit_id")),
                    transactionId: try row.decode(String.self, "transaction_id"),
                    jobId: JobID(try row.decode(UUID.self, "job_id")),
                    profileId: OrNull(try row.decode(UUID?.self, "profile_id").map(ProfileID.init)),
                    area: OrNull(try row.decode(String?.self, "report_area")),
                    language: OrNull(try row.decode(String?.self, "report_language")),
                    reason: OrNull(try row.decode(String?.self, "reason")),
                    createdAt: try row.decode(Date.self, "created_at")
                )
            }
        }
    }

    // MARK: Reports

    private static func report(_ row: PostgresRow, withText: Bool) throws -> ReportAnswer {
        ReportAnswer(
            reportId: ReportID(try row.decode(UUID.self, "id")),
            profileId: ProfileID(try row.decode(UUID.self, "profile_id")),
            partnerProfileId: try row.decode(UUID?.self, "partner_profile_id").map(ProfileID.init),
            area: try row.decode(String.self, "area"),
            language: try row.decode(String.self, "language"),
            wordCount: try row.decode(Int.self, "word_count"),
            writer: try row.decode(String.self, "writer"),
            generatedAt: try row.decode(Date.self, "generated_at"),
            createdAt: try row.decode(Date.self, "created_at"),
            text: withText ? try row.decode(String.self, "report_text") : nil,
            position: try row.decode(Int64.self, "position")
        )
    }

    /// The user's report, or `nil` when there is no such report of this user.
    func report(_ id: ReportID, user: UserID) async throws -> ReportAnswer? {
        try await pool.withConnection { database -> ReportAnswer? in
            try database.query(
                """
                SELECT id, profile_id, partner_profile_id, area, language, report_text, word_count, writer, generated_at, created_at,
                       (extract(epoch FROM created_at) * 1000000)::bigint AS position
                FROM report_purchases WHERE id = $1 AND user_id = $2
                """,
                [id.uuid, user.uuid]
            ).first.map { try Self.report($0, withText: true) }
        }
    }

    /// A position in the reports list: a report's `created_at` (whole microseconds) and id.
    struct ReportPosition: Sendable, Hashable {
        var micros: Int64
        var id: ReportID
    }

    /// The user's reports (of one profile when `profile` is given), newest first, after
    /// `position` when given, at most `limit`; `nil` when `profile` is not the user's.
    func reports(
        user: UserID,
        profile: ProfileID?,
        after position: ReportPosition?,
        limit: Int
    ) async throws -> [ReportAnswer]? {
        let parameters: [any PostgresBindable] = [user.uuid, position?.micros, position?.id.uuid, limit]
        return try await pool.withConnection { database -> [ReportAnswer]? in
            guard let profile else {
                // The (user_id, created_at, id) index of 0015, read backwards from the cursor.
                return try database.query(
                    """
                    SELECT id, profile_id, partner_profile_id, area, language, word_count, writer, generated_at, created_at,
                           (extract(epoch FROM created_at) * 1000000)::bigint AS position
                    FROM report_purchases
                    WHERE user_id = $1 AND ($2::bigint IS NULL
                        OR (created_at, id) < ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
                    ORDER BY created_at DESC, id DESC
                    LIMIT $4
                    """,
                    parameters
                ).map { try Self.report($0, withText: false) }
            }
            // The profile first (no row: not the user's), then its reports (at most one per area
            // and language) beside it, in one statement.
            let rows = try database.query(
                """
                SELECT r.id, r.profile_id, r.partner_profile_id, r.area, r.language, r.word_count, r.writer, r.generated_at, r.created_at,
                       (extract(epoch FROM r.created_at) * 1000000)::bigint AS position
                FROM user_profiles p
                LEFT JOIN LATERAL (
                    SELECT r.id, r.profile_id, r.partner_profile_id, r.area, r.language, r.word_count, r.writer, r.generated_at, r.created_at
                    FROM report_purchases r
                    WHERE r.profile_id = p.id AND r.user_id = $1 AND ($2::bigint IS NULL
                        OR (r.created_at, r.id) < ('epoch'::timestamptz + $2::bigint * interval '1 microsecond', $3::uuid))
                    ORDER BY r.created_at DESC, r.id DESC
                    LIMIT $4
                ) r ON true
                WHERE p.id = $5 AND p.user_id = $1
                """,
                parameters + [profile.uuid]
            )
            guard !rows.isEmpty else { return nil }
            return try rows.filter { !(try $0.isNull("id")) }.map { try Self.report($0, withText: false) }
        }
    }
}
