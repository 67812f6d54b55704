import AstroDomain
import ChartEngine
import Foundation
import Postgres
import UUIDText
import WorkerRuntime

/// The `chart.calculate` job: validate the birth data, compute the chart, then — in the job's
/// transaction — create the user if new, create or update the profile, store the chart (one
/// per profile) and emit `chart.calculated`.
///
/// Recomputing a profile whose birth data and options are unchanged writes nothing: the stored
/// chart's input digest matches, so neither the profile nor the chart row is touched.
public struct ChartCalculateHandler: JobHandler {
    public let jobType = JobType.chartCalculate
    /// `prepare` only computes (a few milliseconds, no effects), so a first delivery skips the
    /// look-up of its row: one statement less per job; a cancelled job is still never committed.
    public var looksUpBeforePrepare: Bool { false }
    private let engine: ChartEngine

    public init(engine: ChartEngine) {
        self.engine = engine
    }

    public struct Prepared: Sendable {
        var request: ChartCalculateRequest
        var chartJSON: String
        var digest: String
        var houseSystem: String
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request: ChartCalculateRequest
        do {
            request = try ChartCalculateRequest.decode(from: job.body)
        } catch {
            throw JobRejection(error)
        }
        let chart: NatalChart
        let digest: String
        do {
            (chart, digest) = try await engine.chartWithInputDigest(for: request.birthData)
        } catch {
            // Input at fault: dead-letter at once. The ephemeris missing or failing: an outage
            // of this worker's machine, retried (another worker may have its files).
            if error.isPermanent { throw JobRejection(code: error.code, message: error.message) }
            throw error
        }
        // The hand-written writer: the same bytes as `JSONCoding.encoder`, several times faster.
        let json = String(decoding: try chart.jsonBytes(), as: UTF8.self)
        return Prepared(
            request: request,
            chartJSON: json,
            digest: digest,
            houseSystem: chart.houseSystem.rawValue
        )
    }

    /// Several jobs in the runtime's shared transaction: each run of consecutive new profiles
    /// is stored in one statement (users, profiles and charts of all of them); an update of an
    /// existing profile goes through `commit` where it stands, so the jobs keep their order.
    /// A name clash anywhere in a run fails the statement and with it the shared transaction;
    /// the runtime then commits the jobs one by one and only the clashing job is rejected.
    public func commit(
        batch: [(prepared: Prepared, job: JobEnvelope)],
        database: PostgresConnection
    ) throws -> [JobOutcome] {
        var outcomes: [JobOutcome] = []
        outcomes.reserveCapacity(batch.count)
        var newProfiles: [NewProfile] = []
        func storeNewProfiles() throws {
            switch newProfiles.count {
            case 0: return
            case 1: outcomes.append(try commit(newProfiles[0].prepared, job: newProfiles[0].job, database: database))
            default:
                try Self.insertNew(newProfiles, database: database)
                for new in newProfiles {
                    outcomes.append(
                        try Self.outcome(
                            job: new.job,
                            request: new.prepared.request,
                            profileID: new.profileID,
                            chartID: new.chartID,
                            unchanged: false
                        )
                    )
                }
            }
            newProfiles.removeAll(keepingCapacity: true)
        }
        for (prepared, job) in batch {
            if prepared.request.profileID == nil {
                newProfiles.append(
                    NewProfile(
                        prepared: prepared,
                        job: job,
                        profileID: ProfileID.created(by: job.jobID).uuid,
                        chartID: UUID()
                    )
                )
            } else {
                try storeNewProfiles()
                outcomes.append(try commit(prepared, job: job, database: database))
            }
        }
        try storeNewProfiles()
        return outcomes
    }

    /// A job that creates a profile, with the ids its rows get.
    private struct NewProfile {
        var prepared: Prepared
        var job: JobEnvelope
        var profileID: UUID
        var chartID: UUID
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        let request = prepared.request
        let birth = request.birthData
        let userID = request.userID.uuid
        guard let requestedProfile = request.profileID?.uuid else {
            // A new profile: nothing to compare with, so no look-ups: the user, the profile and
            // its chart in one statement (one round trip; the foreign keys are checked at its
            // end, when all three rows exist). A name the user already has violates the unique
            // constraint, which rolls the transaction back; the runtime replays a shared
            // transaction job by job, so only this job fails, with the rejection below.
            let profileID = ProfileID.created(by: job.jobID).uuid
            let chartID = UUID()
            do {
                try Self.insertNew(
                    userID: userID,
                    profileID: profileID,
                    chartID: chartID,
                    birth: birth,
                    prepared: prepared,
                    database: database
                )
            } catch let error as PostgresError
                where error.isUniqueViolation && error.constraint == "user_profiles_name_unique_per_user"
            {
                throw Self.duplicateName(birth.name)
            }
            return try Self.outcome(
                job: job,
                request: request,
                profileID: profileID,
                chartID: chartID,
                unchanged: false
            )
        }
        try Self.touchUser(userID, database: database)
        let profileID = requestedProfile

        // Updating a profile: the name is unique per user, and a clash is checked first.
        let clash = try database.query(
            "SELECT id FROM user_profiles WHERE user_id = $1 AND name = $2",
            [userID, birth.name]
        )
        if let clashingID = try clash.first?.decode(UUID.self, "id"), clashingID != profileID {
            throw Self.duplicateName(birth.name)
        }
        var profileChanged = true
        let existing = try database.query(
            """
            SELECT user_id, name, to_char(birth_date, 'YYYY-MM-DD') AS birth_date,
                   to_char(birth_time, 'HH24:MI') AS birth_time, timezone, latitude, longitude, location_name
            FROM user_profiles WHERE id = $1 FOR UPDATE
            """,
            [profileID]
        )
        if let row = existing.first {
            guard try row.decode(UUID.self, "user_id") == userID else {
                throw JobRejection(
                    code: .profileOfAnotherUser,
                    message: "profile.id: profile \(profileID.lowercasedText) belongs to another user"
                )
            }
            profileChanged =
                try row.decode(String.self, "name") != birth.name
                || row.decode(String.self, "birth_date") != birth.birthDate
                || row.decode(String.self, "birth_time") != birth.birthTime
                || row.decode(String.self, "timezone") != birth.timezone
                || row.decode(Double.self, "latitude") != birth.latitude
                || row.decode(Double.self, "longitude") != birth.longitude
                || row.decode(String.self, "location_name") != birth.locationName
            if profileChanged {
                try database.execute(
                    """
                    UPDATE user_profiles SET name = $2, birth_date = $3::date, birth_time = $4::time, timezone = $5,
                        latitude = $6, longitude = $7, location_name = $8, updated_at = now()
                    WHERE id = $1
                    """,
                    [
                        profileID, birth.name, birth.birthDate, birth.birthTime, birth.timezone, birth.latitude,
                        birth.longitude, birth.locationName,
                    ]
                )
            }
        } else {
            // Deleted through the gateway while this update was queued: it stays deleted. The
            // gateway's delete and its tombstone commit together, and the FOR UPDATE above
            // waited for that delete, so the tombstone is seen here.
            if try !database.query("SELECT 1 FROM deleted_profiles WHERE id = $1", [profileID]).isEmpty {
                let error = JobError(
                    code: .profileDeleted,
                    message: "profile.id: profile \(profileID.lowercasedText) was deleted"
                )
                let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .chartFailed, error: error)
                return JobOutcome(status: .failed(error), messages: [try .event(event)])
            }
            try Self.insertProfile(id: profileID, userID: userID, birth: birth, database: database)
        }

        // One chart per profile; an unchanged input (same digest) leaves it as it is.
        let stored = try database.query(
            "SELECT id, input_digest FROM birth_charts WHERE profile_id = $1 FOR UPDATE",
            [profileID]
        )
        let chartID: UUID
        var chartChanged = true
        if let row = stored.first {
            chartID = try row.decode(UUID.self, "id")
            if try row.decode(String.self, "input_digest") == prepared.digest {
                chartChanged = false
            } else {
                try database.execute(
                    """
                    UPDATE birth_charts SET chart_data = $2::jsonb, house_system = $3, input_digest = $4,
                        engine_version = $5, updated_at = now()
                    WHERE id = $1
                    """,
                    [chartID, prepared.chartJSON, prepared.houseSystem, prepared.digest, ChartEngine.version]
                )
            }
        } else {
            chartID = UUID()
            try Self.insertChart(id: chartID, profileID: profileID, prepared: prepared, database: database)
        }
        return try Self.outcome(
            job: job,
            request: request,
            profileID: profileID,
            chartID: chartID,
            unchanged: !profileChanged && !chartChanged
        )
    }

    /// The user (created or touched), a new profile and its chart, in one statement.
    private static func insertNew(
        userID: UUID,
        profileID: UUID,
        chartID: UUID,
        birth: BirthData,
        prepared: Prepared,
        database: PostgresConnection
    ) throws {
        try database.execute(
            """
            WITH touched_user AS (
                INSERT INTO users (id) VALUES ($1)
                ON CONFLICT (id) DO UPDATE SET last_active_at = now()
                    WHERE users.last_active_at < now() - interval '1 minute'
            ), new_profile AS (
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude,
                    longitude, location_name)
                VALUES ($2, $1, $3, $4::date, $5::time, $6, $7, $8, $9)
            )
            INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
            VALUES ($10, $2, $11::jsonb, $12, $13, $14)
            """,
            [
                userID, profileID, birth.name, birth.birthDate, birth.birthTime, birth.timezone, birth.latitude,
                birth.longitude, birth.locationName, chartID, prepared.chartJSON, prepared.houseSystem,
                prepared.digest, ChartEngine.version,
            ]
        )
    }

    /// The users (created or touched), new profiles and their charts of several jobs, in one
    /// statement: the rows travel as one JSON array whose `chart_data` members are the charts
    /// themselves, so PostgreSQL parses each chart once, as the one-job statement does.
    private static func insertNew(_ rows: [NewProfile], database: PostgresConnection) throws {
        var json: [UInt8] = []
        json.reserveCapacity(rows.reduce(2) { $0 + $1.prepared.chartJSON.utf8.count + 512 })
        json.append(UInt8(ascii: "["))
        for (index, row) in rows.enumerated() {
            let birth = row.prepared.request.birthData
            let fields: [(String, JSONValue)] = [
                ("user_id", .string(row.prepared.request.userID.description)),
                ("profile_id", .string(row.profileID.lowercasedText)),
                ("name", .string(birth.name)),
                ("birth_date", .string(birth.birthDate)),
                ("birth_time", .string(birth.birthTime)),
                ("timezone", .string(birth.timezone)),
                ("latitude", .number(birth.latitude)),
                ("longitude", .number(birth.longitude)),
                ("location_name", .string(birth.locationName)),
                ("chart_id", .string(row.chartID.lowercasedText)),
                ("house_system", .string(row.prepared.houseSystem)),
                ("input_digest", .string(row.prepared.digest)),
            ]
            if index > 0 { json.append(UInt8(ascii: ",")) }
            json.append(UInt8(ascii: "{"))
            for (name, value) in fields {
                JSONValue.string(name).write(into: &json)
                json.append(UInt8(ascii: ":"))
                value.write(into: &json)
                json.append(UInt8(ascii: ","))
            }
            json.append(contentsOf: #""chart_data":"#.utf8)
            json.append(contentsOf: row.prepared.chartJSON.utf8)
            json.append(UInt8(ascii: "}"))
        }
        json.append(UInt8(ascii: "]"))
        try database.execute(
            """
            WITH new_rows AS MATERIALIZED (
                SELECT * FROM jsonb_to_recordset($1::jsonb) AS r(user_id uuid, profile_id uuid, name text,
                    birth_date date, birth_time time, timezone text, latitude double precision,
                    longitude double precision, location_name text, chart_id uuid, house_system text,
                    input_digest text, chart_data jsonb)
            ), touched_users AS (
                INSERT INTO users (id) SELECT DISTINCT user_id FROM new_rows
                ON CONFLICT (id) DO UPDATE SET last_active_at = now()
                    WHERE users.last_active_at < now() - interval '1 minute'
            ), new_profiles AS (
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude,
                    longitude, location_name)
                SELECT profile_id, user_id, name, birth_date, birth_time, timezone, latitude, longitude,
                    location_name
                FROM new_rows
            )
            INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
            SELECT chart_id, profile_id, chart_data, house_system, input_digest, $2 FROM new_rows
            """,
            [String(decoding: json, as: UTF8.self), ChartEngine.version]
        )
    }

    /// Creates the user if new; touching last_active_at at most once a minute keeps a busy
    /// user's row from becoming a lock every one of their concurrent jobs waits on.
    private static func touchUser(_ userID: UUID, database: PostgresConnection) throws {
        try database.execute(
            """
            INSERT INTO users (id) VALUES ($1)
            ON CONFLICT (id) DO UPDATE SET last_active_at = now()
                WHERE users.last_active_at < now() - interval '1 minute'
            """,
            [userID]
        )
    }

    private static func duplicateName(_ name: String) -> JobRejection {
        JobRejection(
            code: .duplicateProfileName,
            message: "profile.name: this user already has a profile named \(name.debugDescription)",
            publicReason: "profile.name: the user already has a profile of this name"
        )
    }

    private static func insertChart(id: UUID, profileID: UUID, prepared: Prepared, database: PostgresConnection) throws
    {
        try database.execute(
            """
            INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
            VALUES ($1, $2, $3::jsonb, $4, $5, $6)
            """,
            [id, profileID, prepared.chartJSON, prepared.houseSystem, prepared.digest, ChartEngine.version]
        )
    }

    private static func outcome(
        job: JobEnvelope,
        request: ChartCalculateRequest,
        profileID: UUID,
        chartID: UUID,
        unchanged: Bool
    ) throws -> JobOutcome {
        let fields: [String: JSONValue] = [
            "userId": .string(request.userID.description),
            "profileId": .string(ProfileID(profileID).description),
            "chartId": .string(ChartID(chartID).description),
            "unchanged": .bool(unchanged),
        ]
        let event = JobEvent(jobID: job.jobID, userID: request.userID, type: .chartCalculated, fields: fields)
        return JobOutcome(result: .object(fields), messages: [try .event(event)])
    }

    private static func insertProfile(id: UUID, userID: UUID, birth: BirthData, database: PostgresConnection) throws {
        try database.execute(
            """
            INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude,
                location_name)
            VALUES ($1, $2, $3, $4::date, $5::time, $6, $7, $8, $9)
            """,
            [
                id, userID, birth.name, birth.birthDate, birth.birthTime, birth.timezone, birth.latitude,
                birth.longitude,
                birth.locationName,
            ]
        )
    }
}
