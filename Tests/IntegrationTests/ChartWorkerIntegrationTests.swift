import AMQP
import AstroDomain
import ChartEngine
import ChartService
import Ephemeris
import Foundation
import Postgres
import Testing
import WorkerRuntime

/// The chart.calculate job end to end on the real broker and database, with the real
/// ephemeris (the handler runs on its own queue name so tests never collide).
@Suite(.timeLimit(.minutes(2)))
struct ChartWorkerIntegrationTests {
    static let engine: ChartEngine = {
        // The data files are installed by scripts/stack.sh install (swe-standard-data).
        let ephemeris = try! Ephemeris(configuration: EphemerisConfiguration(threads: 2))
        return ChartEngine(ephemeris: ephemeris)
    }()

    /// A handler serving a test queue instead of chart.calculate.
    struct TestQueueHandler: JobHandler {
        let jobType: JobType
        let inner = ChartCalculateHandler(engine: ChartWorkerIntegrationTests.engine)
        func prepare(_ job: JobEnvelope) async throws -> ChartCalculateHandler.Prepared { try await inner.prepare(job) }
        func commit(
            _ prepared: ChartCalculateHandler.Prepared,
            job: JobEnvelope,
            database: PostgresConnection
        ) throws
            -> JobOutcome
        { try inner.commit(prepared, job: job, database: database) }
        func commit(
            batch: [(prepared: ChartCalculateHandler.Prepared, job: JobEnvelope)],
            database: PostgresConnection
        ) throws -> [JobOutcome] { try inner.commit(batch: batch, database: database) }
    }

    static func body(
        jobID: JobID,
        userID: UUID,
        profileID: UUID? = nil,
        name: String = "Me",
        latitude: Double = 50.4501,
        date: String = "1990-10-07",
        time: String = "15:00",
        timezone: String = "Europe/Kyiv",
        dstPolicy: String? = nil
    ) -> String {
        var profile: [String: JSONValue] = [
            "name": .string(name), "birthDate": .string(date), "birthTime": .string(time),
            "timezone": .string(timezone),
            "latitude": .number(latitude), "longitude": 30.5234, "locationName": "Kyiv, Ukraine",
        ]
        if let profileID { profile["id"] = .string(profileID.uuidString.lowercased()) }
        var object: [String: JSONValue] = [
            "jobId": .string(jobID.description), "userId": .string(userID.uuidString.lowercased()),
            "profile": .object(profile), "houseSystem": "placidus",
        ]
        if let dstPolicy { object["dstPolicy"] = .string(dstPolicy) }
        return String(decoding: try! JSONCoding.encoder.encode(JSONValue.object(object)), as: UTF8.self)
    }

    func storedChart(_ running: RunningWorker, profileID: UUID) async throws -> (json: JSONValue, updatedAt: Date)? {
        try await running.pool.withConnection { database in
            guard
                let row = try database.query(
                    "SELECT chart_data::text AS chart, updated_at FROM birth_charts WHERE profile_id = $1",
                    [profileID]
                ).first
            else { return nil }
            let json = try JSONDecoder().decode(JSONValue.self, from: Data(try row.decode(String.self, "chart").utf8))
            return (json, try row.decode(Date.self, "updated_at"))
        }
    }

    func result(_ running: RunningWorker, _ id: JobID) async throws -> JSONValue? {
        try await running.pool.withConnection { database in
            guard let row = try database.query("SELECT result::text AS r FROM jobs WHERE id = $1", [id.uuid]).first,
                let text = try row.decode(String?.self, "r")
            else { return nil }
            return try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        }
    }

    @Test func computesStoresAndAnnouncesAChart() async throws {
        let running = try await RunningWorker.start(handlers: { [TestQueueHandler(jobType: JobType(rawValue: $0))] })
        let events = try await running.eventQueue(routingKey: "chart.calculated")
        let user = UUID()
        let id = JobID.random()
        try await running.publish(Self.body(jobID: id, userID: user))
        try await running.waitForStatus(id, "succeeded")
        let result = try #require(try await result(running, id))
        let profileID = try #require(result["profileId"]?.stringValue.flatMap(UUID.init(uuidString:)))
        let stored = try #require(try await storedChart(running, profileID: profileID))
        #expect(stored.json["utc"] == "1990-10-07T12:00:00Z")
        #expect(stored.json["houseSystem"] == "placidus")
        guard case .array(let planets)? = stored.json["planets"] else {
            Issue.record("no planets")
            return
        }
        #expect(planets.count == 10)
        #expect(planets.first?["name"] == "Sun")
        #expect(planets.first?["sign"] == "Libra")
        let delivered = try await running.drain(events, count: 1)
        let event = try JSONDecoder().decode(JSONValue.self, from: try #require(delivered.first).body)
        #expect(event["jobId"]?.stringValue == id.description)
        #expect(event["profileId"] == result["profileId"])
        #expect(event["chartId"] == result["chartId"])
        try await running.stop()
    }

    @Test func recomputingUnchangedBirthDataChangesNothing() async throws {
        let running = try await RunningWorker.start(handlers: { [TestQueueHandler(jobType: JobType(rawValue: $0))] })
        let user = UUID()
        let profile = UUID()
        let first = JobID.random()
        try await running.publish(Self.body(jobID: first, userID: user, profileID: profile))
        try await running.waitForStatus(first, "succeeded")
        let before = try #require(try await storedChart(running, profileID: profile))
        let second = JobID.random()
        try await running.publish(Self.body(jobID: second, userID: user, profileID: profile))
        try await running.waitForStatus(second, "succeeded")
        let after = try #require(try await storedChart(running, profileID: profile))
        #expect(try await result(running, second)?["unchanged"] == true)
        #expect(after.updatedAt == before.updatedAt)
        #expect(after.json == before.json)
        // A changed birth time recomputes.
        let third = JobID.random()
        try await running.publish(Self.body(jobID: third, userID: user, profileID: profile, time: "16:00"))
        try await running.waitForStatus(third, "succeeded")
        #expect(try await result(running, third)?["unchanged"] == false)
        #expect(try await storedChart(running, profileID: profile)?.json["utc"] == "1990-10-07T13:00:00Z")
        try await running.stop()
    }

    @Test func invalidInputFailsTheJobWithItsCodeAndNoDeadLetter() async throws {
        let running = try await RunningWorker.start(handlers: { [TestQueueHandler(jobType: JobType(rawValue: $0))] })
        // On a test queue the failed event is named after the queue (`<queue>.failed`).
        let failed = try await running.eventQueue(routingKey: running.queue + ".failed")
        let user = UUID()
        let latitude = JobID.random()
        try await running.publish(Self.body(jobID: latitude, userID: user, latitude: 95))
        let gap = JobID.random()
        try await running.publish(Self.body(jobID: gap, userID: user, name: "Gap", date: "2021-03-28", time: "03:30"))
        let resolved = JobID.random()
        try await running.publish(
            Self.body(
                jobID: resolved,
                userID: user,
                name: "Resolved",
                date: "2021-03-28",
                time: "03:30",
                dstPolicy: "later"
            )
        )
        let original = JobID.random()
        try await running.publish(Self.body(jobID: original, userID: user, name: "Twin"))
        try await running.waitForStatus(original, "succeeded")
        let duplicate = JobID.random()
        try await running.publish(Self.body(jobID: duplicate, userID: user, name: "Twin"))

        try await running.waitForStatus(latitude, "failed")
        try await running.waitForStatus(gap, "failed")
        try await running.waitForStatus(duplicate, "failed")
        try await running.waitForStatus(resolved, "succeeded")
        #expect(try await running.jobRow(latitude)?.errorCode == "latitude-out-of-range")
        #expect(try await running.jobRow(gap)?.errorCode == "nonexistent-local-time")
        #expect(try await running.jobRow(duplicate)?.errorCode == "duplicate-profile-name")
        let events = try await running.drain(failed, count: 3)
        let codes = Set(
            events.compactMap {
                try? JSONDecoder().decode(JSONValue.self, from: $0.body)["error"]?["code"]?.stringValue
            }
        )
        #expect(codes == ["latitude-out-of-range", "nonexistent-local-time", "duplicate-profile-name"])
        // What the user asked was refused: nothing waits in the dead-letter queue for an operator.
        #expect(try await running.publisher.queueState(running.queue + ".dead").messageCount == 0)
        try await running.stop()
    }

    /// A shared transaction's new profiles go in one statement; what it stores must be what
    /// the job-by-job statement stores, and a name clash in it must leave nothing behind.
    @Test func aBatchOfNewProfilesStoresWhatJobByJobStores() async throws {
        let handler = ChartCalculateHandler(engine: Self.engine)
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        func job(
            _ user: UUID,
            _ name: String,
            profileID: UUID? = nil,
            latitude: Double = 50.4501
        ) async throws -> (prepared: ChartCalculateHandler.Prepared, job: JobEnvelope) {
            let id = JobID.random()
            let body = Self.body(jobID: id, userID: user, profileID: profileID, name: name, latitude: latitude)
            let envelope = JobEnvelope(jobID: id, type: .chartCalculate, body: Data(body.utf8))
            return (try await handler.prepare(envelope), envelope)
        }
        let (first, second, alone) = (UUID(), UUID(), UUID())
        let named = UUID()
        // Two new profiles of one user, an explicit profile id between them (it takes the
        // job-by-job path where it stands), and latitudes whose shortest text is long.
        let batch = [
            try await job(first, "One", latitude: -33.86882),
            try await job(first, "Two", latitude: 0.1 + 0.2),
            try await job(second, "Named", profileID: named),
            try await job(second, "Three", latitude: 64.146_6),
        ]
        let outcomes = try await pool.withTransaction { database in
            try handler.commit(batch: batch, database: database)
        }
        #expect(outcomes.count == batch.count)
        // The same input as the first job, stored alone by the one-job statement.
        let single = try await job(alone, "One", latitude: -33.86882)
        let singleOutcome = try await pool.withTransaction { database in
            try handler.commit(single.prepared, job: single.job, database: database)
        }
        let singleProfile = try #require(
            singleOutcome.result?["profileId"]?.stringValue.flatMap(UUID.init(uuidString:))
        )
        #expect(singleProfile == ProfileID.created(by: single.job.jobID).uuid)
        let expected: [(user: UUID, name: String, latitude: Double)] = [
            (first, "One", -33.86882), (first, "Two", 0.1 + 0.2), (second, "Named", 50.4501),
            (second, "Three", 64.146_6),
        ]
        for (index, outcome) in outcomes.enumerated() {
            let profile = try #require(outcome.result?["profileId"]?.stringValue.flatMap(UUID.init(uuidString:)))
            let chart = try #require(outcome.result?["chartId"]?.stringValue.flatMap(UUID.init(uuidString:)))
            // A new profile's id derives from its job's (the gateway names it in its 202).
            #expect(profile == (index == 2 ? named : ProfileID.created(by: batch[index].job.jobID).uuid))
            let row = try #require(
                try await pool.withConnection { database in
                    try database.query(
                        """
                        SELECT p.user_id, p.name, p.latitude, p.longitude, p.location_name,
                               to_char(p.birth_date, 'YYYY-MM-DD') AS birth_date, c.id AS chart_id,
                               c.house_system, c.engine_version, c.input_digest = s.input_digest AS same_digest,
                               (c.chart_data - 'calculatedAt') = (s.chart_data - 'calculatedAt') AS same_chart
                        FROM user_profiles p JOIN birth_charts c ON c.profile_id = p.id,
                             birth_charts s
                        WHERE p.id = $1 AND s.profile_id = $2
                        """,
                        [profile, singleProfile]
                    ).first
                }
            )
            #expect(try row.decode(UUID.self, "user_id") == expected[index].user)
            #expect(try row.decode(String.self, "name") == expected[index].name)
            #expect(try row.decode(Double.self, "latitude") == expected[index].latitude)
            #expect(try row.decode(Double.self, "longitude") == 30.5234)
            #expect(try row.decode(String.self, "location_name") == "Kyiv, Ukraine")
            #expect(try row.decode(String.self, "birth_date") == "1990-10-07")
            #expect(try row.decode(UUID.self, "chart_id") == chart)
            #expect(try row.decode(String.self, "house_system") == "placidus")
            #expect(try row.decode(String.self, "engine_version") == ChartEngine.version)
            // Every job here has the same birth moment and place; only the latitude differs.
            let sameInput = expected[index].latitude == -33.86882
            #expect(try row.decode(Bool.self, "same_digest") == sameInput)
            #expect(try row.decode(Bool.self, "same_chart") == sameInput)
            let event = try JSONDecoder().decode(JSONValue.self, from: try #require(outcome.messages.first).body)
            #expect(event["jobId"]?.stringValue == batch[index].job.jobID.description)
            #expect(event["profileId"] == outcome.result?["profileId"])
        }
        let users = try await pool.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM users WHERE id IN ($1, $2)", [first, second])
                .first?.decode(Int.self, "n")
        }
        #expect(users == 2)

        // A clash anywhere in the batch fails the statement, and the rollback leaves nothing.
        let third = UUID()
        let clash = [try await job(third, "Same"), try await job(third, "Other"), try await job(third, "Same")]
        await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { database in try handler.commit(batch: clash, database: database) }
        }
        let left = try await pool.withConnection { database in
            try database.query(
                """
                SELECT (SELECT count(*) FROM user_profiles WHERE user_id = $1)::int
                     + (SELECT count(*) FROM users WHERE id = $1)::int AS n
                """,
                [third]
            ).first?.decode(Int.self, "n")
        }
        #expect(left == 0)
        await pool.close()
    }
}
