import Dispatch
import Foundation
import Postgres
import Testing

/// Against a real PostgreSQL (`DATABASE_URL`). Serialized because one test restarts the server.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct PostgresIntegrationTests {
    // MARK: Types and safety

    @Test func everyTypeRoundTrips() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let id = UUID()
        let moment = Date(timeIntervalSince1970: 1_795_341_600.123456)
        let amount = try #require(
            Decimal(string: "-98765432109876543210.0123456789", locale: Locale(identifier: "en_US_POSIX"))
        )
        let blob = Data([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF])
        let text = "Київ 🪐 'quoted' \\ backslash"
        let row = try await pool.withConnection { connection in
            try connection.executeScript(
                """
                CREATE TABLE everything (
                    t text, i8 bigint, i4 int, b bool, f8 float8, n numeric, u uuid,
                    ts timestamptz, tsnotz timestamp, by bytea, maybe int, v varchar(100)
                )
                """
            )
            let inserted = try connection.execute(
                "INSERT INTO everything VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                [
                    text, Int.max, Int32.min, true, 0.1 + 0.2, amount, id, moment, moment, blob, Int?.none,
                    String?.some("varchar"),
                ]
            )
            #expect(inserted == 1)
            return try #require(try connection.query("SELECT * FROM everything").first)
        }
        #expect(try row.decode(String.self, "t") == text)
        #expect(try row.decode(Int.self, "i8") == Int.max)
        #expect(try row.decode(Int64.self, "i8") == Int64.max)
        #expect(try row.decode(Int32.self, "i4") == Int32.min)
        #expect(try row.decode(Bool.self, "b"))
        #expect(try row.decode(Double.self, "f8") == 0.1 + 0.2)
        #expect(try row.decode(Decimal.self, "n") == amount)
        #expect(try row.decode(UUID.self, "u") == id)
        let ts = try row.decode(Date.self, "ts")
        #expect(abs(ts.timeIntervalSince(moment)) < 0.000_001)
        #expect(row.rawText("ts") == "2026-11-22 10:00:00.123456+00")
        let tsnotz = try row.decode(Date.self, "tsnotz")
        #expect(abs(tsnotz.timeIntervalSince(moment)) < 0.000_001)
        #expect(try row.decode(Data.self, "by") == blob)
        #expect(try row.decode(Int?.self, "maybe") == nil)
        #expect(try row.isNull("maybe"))
        #expect(try row.decode(String.self, "v") == "varchar")
        let nullError = #expect(throws: PostgresError.self) { try row.decode(Int.self, "maybe") }
        #expect(nullError?.message.contains("\"maybe\"") == true)
        let parseError = #expect(throws: PostgresError.self) { try row.decode(Int.self, "t") }
        #expect(parseError?.kind == .decoding)

        // Typed NULL parameters work where the server cannot infer a type.
        let nullCheck = try await pool.withConnection { connection in
            try connection.query("SELECT $1 IS NULL AS a, $2::text IS NULL AS b", [Date?.none, "x"]).first
        }
        #expect(try nullCheck?.decode(Bool.self, "a") == true)
        #expect(try nullCheck?.decode(Bool.self, "b") == false)
        await pool.close()
        await database.drop()
    }

    /// `Data` parameters travel as binary `bytea` and `resultFormat: .binary` reads values back
    /// as they are: every byte value, empty, NULL, 64 MiB (its hex text would be 128 MiB), and
    /// more binary parameters in one statement than are lent to libpq without a copy. The server
    /// sees the bytes its own literals name, and text-format reads still decode the hex.
    @Test func byteaTravelsInBinaryFormat() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let every = Data((0...255).map { UInt8($0) })
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        let large = random.readData(ofLength: 64 << 20)
        try random.close()
        let many = (0..<40).map { index in index == 7 ? Data() : Data([UInt8(index), 0, 0xFF, UInt8(index)]) }
        let id = UUID()
        let (server, back, text, joined, mixed) = try await pool.withConnection { connection in
            try connection.executeScript("CREATE TABLE blobs (id int PRIMARY KEY, data bytea)")
            try connection.execute(
                "INSERT INTO blobs VALUES (1, $1), (2, $2), (3, $3), (4, $4)",
                [every, Data(), Data?.none, large]
            )
            // Built by the server itself: what binary 0…255 must equal, and the large value's ends.
            let server = try #require(
                try connection.query(
                    """
                    SELECT (SELECT data FROM blobs WHERE id = 1) =
                            (SELECT decode(string_agg(lpad(to_hex(g), 2, '0'), '' ORDER BY g), 'hex')
                             FROM generate_series(0, 255) AS g) AS every,
                        (SELECT octet_length(data) FROM blobs WHERE id = 2) AS empty,
                        (SELECT data IS NULL FROM blobs WHERE id = 3) AS null,
                        (SELECT octet_length(data) FROM blobs WHERE id = 4) AS large,
                        (SELECT substring(data FROM 1 FOR 16) = $1 AND substring(data FROM $3 FOR 16) = $2
                         FROM blobs WHERE id = 4) AS ends
                    """,
                    [large.prefix(16), large.suffix(16), Int32(large.count - 15)]
                ).first
            )
            let back = try connection.query("SELECT id, data FROM blobs ORDER BY id", resultFormat: .binary)
                .map { try $0.decode(Data?.self, "data") }
            let text = try connection.query("SELECT data FROM blobs WHERE id < 4 ORDER BY id")
                .map { try $0.decode(Data?.self, "data") }
            let placeholders = (1...many.count).map { "$\($0)" }.joined(separator: " || ")
            let joined = try connection.query(
                SQL(unsafeSQL: "SELECT \(placeholders) AS joined"),
                many,
                resultFormat: .binary
            ).first?.decode(Data.self, "joined")
            let mixed = try #require(
                try connection.query(
                    "SELECT $1::text AS t, $2::bytea AS b, $3::int4 AS i, $4::uuid AS u, $5::bool AS f, $6::int8 AS n",
                    ["Київ 🪐", every, Int32(-5), id, false, Int64.min],
                    resultFormat: .binary
                ).first
            )
            return (server, back, text, joined, mixed)
        }
        #expect(try server.decode(Bool.self, "every"), "the server did not get the bytes 0…255 as they are")
        #expect(try server.decode(Int.self, "empty") == 0)
        #expect(try server.decode(Bool.self, "null"))
        #expect(try server.decode(Int.self, "large") == large.count)
        #expect(try server.decode(Bool.self, "ends"))
        #expect(back.count == 4 && back[0] == every && back[1] == Data() && back[2] == nil)
        #expect(back[3] == large, "the 64 MiB value did not come back as it was")
        #expect(text == [every, Data(), nil])
        #expect(joined == many.reduce(Data(), +))
        #expect(try mixed.decode(String.self, "t") == "Київ 🪐")
        #expect(try mixed.decode(Data.self, "b") == every)
        #expect(try mixed.decode(Int32.self, "i") == -5 && mixed.decode(Int.self, "i") == -5)
        #expect(try mixed.decode(UUID.self, "u") == id)
        #expect(try !mixed.decode(Bool.self, "f"))
        #expect(try mixed.decode(Int64.self, "n") == .min)
        // A type without a binary decoding is refused with the column's name, not misread.
        let refused = await postgresOutcome {
            try await pool.withConnection { connection in
                try connection.query("SELECT 1.5::float8 AS x", resultFormat: .binary).first?.decode(Double.self, "x")
            }
        }
        #expect((refused.failedWith as? PostgresError)?.message.contains("\"x\"") == true)
        await pool.close()
        await database.drop()
    }

    @Test func nastyStringsAreStoredVerbatim() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let nasty = [
            "Robert'); DROP TABLE users;--", "' OR '1'='1", "\\'; SELECT pg_sleep(10); --", "$1 $2 ?",
            "back\\slash\\\\",
            "\"double\" 'single' `back`", "Ünïcödé — Київ — 東京", "emoji 👩‍🚀🪐✨", "tab\tnew\nline\r\n", "",
            " leading space",
            "E'\\x41'", "%s %d %@", "--", "/* comment */", ";",
        ]
        try await pool.withConnection { connection in
            try connection.executeScript("CREATE TABLE users (id serial PRIMARY KEY, name text NOT NULL)")
            for name in nasty {
                try connection.execute("INSERT INTO users (name) VALUES ($1)", [name])
            }
        }
        let (stored, matches, tableExists) = try await pool.withConnection { connection in
            let stored = try connection.query("SELECT name FROM users ORDER BY id").map {
                try $0.decode(String.self, "name")
            }
            var matches = 0
            for name in nasty {
                let row = try connection.query("SELECT count(*) AS n FROM users WHERE name = $1", [name]).first
                matches += try row?.decode(Int.self, "n") ?? 0
            }
            let exists = try connection.query("SELECT to_regclass('users') IS NOT NULL AS e").first
            return (stored, matches, try exists?.decode(Bool.self, "e") ?? false)
        }
        #expect(stored == nasty)
        #expect(matches == nasty.count)
        #expect(tableExists)

        let nulError = await postgresOutcome {
            try await pool.withConnection { connection in
                try connection.execute("INSERT INTO users (name) VALUES ($1)", ["nul\u{0}byte"])
            }
        }
        #expect((nulError.failedWith as? PostgresError)?.kind == .encoding)
        await pool.close()
        await database.drop()
    }

    struct ChartDocument: Codable, Sendable, Equatable {
        struct Planet: Codable, Sendable, Equatable {
            var name: String
            var longitude: Double
        }
        var title: String
        var createdAt: Date
        var planets: [Planet]
        var note: String?
    }

    @Test func jsonbCodableRoundTrip() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let document = ChartDocument(
            title: "natal 'chart' \"x\"",
            createdAt: Date(timeIntervalSince1970: 1_795_341_600),
            planets: [.init(name: "Sun", longitude: 240.123456789), .init(name: "Moon", longitude: 0.5)],
            note: nil
        )
        let row = try await pool.withConnection { connection in
            try connection.executeScript("CREATE TABLE docs (id int PRIMARY KEY, doc jsonb, raw jsonb, none jsonb)")
            try connection.execute(
                "INSERT INTO docs VALUES (1, $1, $2, $3)",
                [
                    PostgresJSON(document), PostgresRawJSON(#"{"b": [1, 2], "a": null}"#),
                    PostgresJSON<ChartDocument>?.none,
                ]
            )
            return try connection.query(
                "SELECT doc, raw, none, doc->>'title' AS title, jsonb_typeof(doc->'planets') AS kind FROM docs"
            ).first
        }
        let stored = try #require(row)
        #expect(try stored.decodeJSON(ChartDocument.self, "doc") == document)
        #expect(try stored.decodeJSON(ChartDocument?.self, "none") == nil)
        #expect(try stored.decode(String.self, "title") == document.title)
        #expect(try stored.decode(String.self, "kind") == "array")
        #expect(try stored.decodeJSON([String: [Int]?].self, "raw") == ["a": nil, "b": [1, 2]])
        #expect(throws: PostgresError.self) { try stored.decodeJSON(ChartDocument.self, "raw") }

        let invalid = await postgresOutcome {
            try await pool.withConnection { connection in
                try connection.execute("INSERT INTO docs (id, raw) VALUES (2, $1)", [PostgresRawJSON("{not json")])
            }
        }
        #expect((invalid.failedWith as? PostgresError)?.sqlState == "22P02")
        await pool.close()
        await database.drop()
    }

    // MARK: Transactions and server errors

    struct BodyError: Error, Equatable {}

    @Test func transactionsCommitAndRollBack() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        try await pool.withConnection { try $0.executeScript("CREATE TABLE items (id int PRIMARY KEY)") }

        let committed = try await pool.withTransaction { connection in
            try connection.execute("INSERT INTO items VALUES (1)")
        }
        #expect(committed == 1)

        let thrown = await postgresOutcome {
            try await pool.withTransaction { connection in
                try connection.execute("INSERT INTO items VALUES (2)")
                throw BodyError()
            }
        }
        #expect(thrown.failedWith is BodyError)

        // A statement error swallowed inside the body: COMMIT becomes ROLLBACK, which must not pass silently.
        let swallowed = await postgresOutcome {
            try await pool.withTransaction { connection in
                try connection.execute("INSERT INTO items VALUES (3)")
                _ = try? connection.execute("INSERT INTO items VALUES (1)")
            }
        }
        #expect((swallowed.failedWith as? PostgresError)?.sqlState == "25P02")

        // Nested transactions use savepoints: the inner failure keeps the outer work.
        try await pool.withTransaction { connection in
            try connection.execute("INSERT INTO items VALUES (4)")
            _ = try? connection.withTransaction { inner in
                try inner.execute("INSERT INTO items VALUES (5)")
                throw BodyError()
            }
        }

        // A transaction left open by a body is rolled back before the connection is reused.
        try await pool.withConnection { connection in
            try connection.executeScript("BEGIN")
            try connection.execute("INSERT INTO items VALUES (6)")
        }

        let ids = try await pool.withConnection { connection in
            try connection.query("SELECT id FROM items ORDER BY id").map { try $0.decode(Int.self, "id") }
        }
        #expect(ids == [1, 4])
        await pool.close()
        await database.drop()
    }

    /// COPY is not spoken here: libpq in COPY mode hands out a COPY result on every call, which
    /// a result loop once spun on forever. The statement fails, its connection is closed, and
    /// the pool goes on with a fresh one.
    @Test func aCopyStatementFailsInsteadOfSpinning() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        for statement: SQL in ["COPY (SELECT 1) TO STDOUT", "SELECT 1; COPY (SELECT 2) TO STDOUT"] {
            await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.executeScript(statement) }
            }
        }
        let one = try await pool.withConnection { try $0.query("SELECT 1 AS one").first?.decode(Int.self, "one") }
        #expect(one == 1)
    }

    @Test func uniqueViolationCarriesSQLState() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let outcome = await postgresOutcome {
            try await pool.withConnection { connection in
                try connection.executeScript("CREATE TABLE accounts (email text CONSTRAINT accounts_email_key UNIQUE)")
                try connection.execute("INSERT INTO accounts VALUES ($1)", ["ada@example.com"])
                try connection.execute("INSERT INTO accounts VALUES ($1)", ["ada@example.com"])
            }
        }
        let error = try #require(outcome.failedWith as? PostgresError)
        #expect(error.kind == .server)
        #expect(error.sqlState == "23505")
        #expect(error.isUniqueViolation)
        #expect(!error.isTransient)
        #expect(error.constraint == "accounts_email_key")
        #expect(error.description.contains("23505"))
        #expect(!error.description.contains("ada@example.com"))
        #expect(!error.description.contains("INSERT"))
        #expect(error.debugDescription.contains("ada@example.com"))
        #expect(error.query?.contains("INSERT INTO accounts") == true)

        // The connection is still usable afterwards (and was not discarded).
        #expect(await pool.ping())
        #expect(pool.statistics.connectionsOpened == 1)
        await pool.close()
        await database.drop()
    }

    @Test func serializationFailureIs40001() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool(.init(maxConnections: 2))
        try await pool.withConnection { connection in
            try connection.executeScript(
                "CREATE TABLE counters (id int PRIMARY KEY, v int); INSERT INTO counters VALUES (1, 0)"
            )
        }
        let snapshotTaken = DispatchSemaphore(value: 0)
        let otherCommitted = DispatchSemaphore(value: 0)
        async let first = postgresOutcome {
            try await pool.withTransaction(isolation: .serializable) { connection in
                _ = try connection.query("SELECT v FROM counters WHERE id = 1")
                snapshotTaken.signal()
                _ = otherCommitted.wait(timeout: .now() + 10)
                try connection.execute("UPDATE counters SET v = v + 1 WHERE id = 1")
            }
        }
        let second = await postgresOutcome {
            try await pool.withTransaction(isolation: .serializable) { connection in
                _ = snapshotTaken.wait(timeout: .now() + 10)
                return try connection.execute("UPDATE counters SET v = v + 10 WHERE id = 1")
            }
        }
        otherCommitted.signal()
        let firstOutcome = await first
        #expect(second.succeededWith == 1)
        let error = try #require(firstOutcome.failedWith as? PostgresError)
        #expect(error.sqlState == "40001")
        #expect(error.isSerializationFailure)
        #expect(error.isTransient)
        let value = try await pool.withConnection { connection in
            try connection.query("SELECT v FROM counters WHERE id = 1").first?.decode(Int.self, "v")
        }
        #expect(value == 10)
        await pool.close()
        await database.drop()
    }

    @Test func deadlockIs40P01() async throws {
        let database = try await PostgresTestDatabase.make()
        var configuration = database.configuration
        configuration.options["deadlock_timeout"] = "100ms"
        let pool = database.makePool(.init(maxConnections: 2), configuration: configuration)
        try await pool.withConnection { connection in
            try connection.executeScript(
                "CREATE TABLE pair (id int PRIMARY KEY, v int); INSERT INTO pair VALUES (1, 0), (2, 0)"
            )
        }
        let firstLocked = DispatchSemaphore(value: 0)
        let secondLocked = DispatchSemaphore(value: 0)
        @Sendable func lockInOrder(
            _ a: Int,
            _ b: Int,
            signal: DispatchSemaphore,
            wait: DispatchSemaphore
        ) async -> Result<
            Int, any Error
        > {
            await postgresOutcome {
                try await pool.withTransaction { connection in
                    try connection.execute("UPDATE pair SET v = v + 1 WHERE id = $1", [a])
                    signal.signal()
                    _ = wait.wait(timeout: .now() + 10)
                    return try connection.execute("UPDATE pair SET v = v + 1 WHERE id = $1", [b])
                }
            }
        }
        async let first = lockInOrder(1, 2, signal: firstLocked, wait: secondLocked)
        async let second = lockInOrder(2, 1, signal: secondLocked, wait: firstLocked)
        let outcomes = await [first, second]
        let errors = outcomes.compactMap { $0.failedWith as? PostgresError }
        #expect(errors.count == 1)
        #expect(outcomes.filter { $0.succeededWith == 1 }.count == 1)
        #expect(errors.first?.sqlState == "40P01")
        #expect(errors.first?.isDeadlock == true)
        #expect(errors.first?.isTransient == true)
        await pool.close()
        await database.drop()
    }

    // MARK: Pool

    @Test func poolExhaustionTimesOutAndShortWaitsSucceed() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool(.init(maxConnections: 2, acquireTimeout: .milliseconds(300)))

        let started = PostgresTestCounter()
        async let lease1 = postgresOutcome {
            try await pool.withConnection { connection in
                started.increment()
                return try connection.execute("SELECT pg_sleep(1.2)")
            }
        }
        async let lease2 = postgresOutcome {
            try await pool.withConnection { connection in
                started.increment()
                return try connection.execute("SELECT pg_sleep(1.2)")
            }
        }
        try await started.wait(for: 2)
        #expect(pool.statistics.leased == 2)
        let clock = ContinuousClock()
        let waitStart = clock.now
        let third = await postgresOutcome { try await pool.withConnection { _ in 3 } }
        let waited = clock.now - waitStart
        let timeout = try #require(third.failedWith as? PostgresError)
        #expect(timeout.kind == .poolTimeout)
        #expect(timeout.isTransient)
        #expect(timeout.message.contains("300 ms"))
        #expect(timeout.message.contains("pool of 2 connections"))
        #expect(waited >= .milliseconds(290) && waited < .milliseconds(1100))
        #expect(pool.statistics.waiting == 0)
        _ = await (lease1, lease2)

        // Leases that end within the timeout hand their connection to the waiting caller.
        let shortStarted = PostgresTestCounter()
        async let short1 = postgresOutcome {
            try await pool.withConnection { connection in
                shortStarted.increment()
                return try connection.execute("SELECT pg_sleep(0.1)")
            }
        }
        async let short2 = postgresOutcome {
            try await pool.withConnection { connection in
                shortStarted.increment()
                return try connection.execute("SELECT pg_sleep(0.1)")
            }
        }
        try await shortStarted.wait(for: 2)
        let patientStart = clock.now
        let patient = await postgresOutcome { try await pool.withConnection { _ in 42 } }
        #expect(patient.succeededWith == 42)
        #expect(clock.now - patientStart < .milliseconds(300))
        let shorts = await [short1, short2]
        #expect(shorts.allSatisfy { $0.succeededWith == 1 })
        let statistics = pool.statistics
        #expect(statistics.open == 2 && statistics.leased == 0 && statistics.maxConnections == 2)
        #expect(statistics.connectionsOpened == 2)
        await pool.close()
        await database.drop()
    }

    @Test func cancelledWaiterDoesNotLeakAConnection() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool(.init(maxConnections: 1, acquireTimeout: .seconds(10)))
        let started = PostgresTestCounter()
        let release = DispatchSemaphore(value: 0)
        async let holder = postgresOutcome {
            try await pool.withConnection { _ in
                started.increment()
                _ = release.wait(timeout: .now() + 10)
            }
        }
        try await started.wait(for: 1)
        let waiter = Task { await postgresOutcome { try await pool.withConnection { _ in 1 } } }
        // Within the waiter's own 10 s acquire timeout, after which it would stop waiting.
        try await RuntimeTestEnvironment.eventually(
            "a second caller waits for the pool's one connection (statistics.waiting > 0)",
            timeout: .seconds(9),
            observe: { pool.statistics.waiting },
            until: { $0 > 0 }
        )
        waiter.cancel()
        let cancelled = await waiter.value
        #expect(cancelled.failedWith is CancellationError)
        #expect(pool.statistics.waiting == 0)
        release.signal()
        _ = await holder
        #expect(try await pool.withConnection { _ in 7 } == 7)
        #expect(pool.statistics.leased == 0)
        #expect(pool.statistics.open == 1)

        await pool.close()
        let closed = await postgresOutcome { try await pool.withConnection { _ in 1 } }
        #expect((closed.failedWith as? PostgresError)?.kind == .poolClosed)
        #expect(pool.statistics.open == 0)
        #expect(await !pool.ping())
        await database.drop()
    }

    @Test func terminatedConnectionIsReplaced() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool(.init(maxConnections: 1, idleCheckAfter: .milliseconds(50)))
        let firstPID = try await pool.withConnection {
            try $0.query("SELECT pg_backend_pid() AS pid").first?.decode(Int.self, "pid")
        }
        try await terminate(try #require(firstPID), using: database.admin)
        try await Task.sleep(for: .milliseconds(100))

        // Idle longer than idleCheckAfter: the dead connection is noticed and replaced before the body runs.
        let secondPID = try await pool.withConnection {
            try $0.query("SELECT pg_backend_pid() AS pid").first?.decode(Int.self, "pid")
        }
        #expect(secondPID != nil && secondPID != firstPID)
        var statistics = pool.statistics
        #expect(statistics.connectionsOpened == 2)
        #expect(statistics.open == 1)

        // Without the idle check (used right away), the body sees the loss; the pool replaces the connection.
        let fresh = database.makePool(.init(maxConnections: 1, idleCheckAfter: .seconds(60)))
        let pid = try await fresh.withConnection {
            try $0.query("SELECT pg_backend_pid() AS pid").first?.decode(Int.self, "pid")
        }
        try await terminate(try #require(pid), using: database.admin)
        let lost = await postgresOutcome { try await fresh.withConnection { try $0.execute("SELECT 1") } }
        let error = try #require(lost.failedWith as? PostgresError)
        #expect(error.isConnectionLoss)
        #expect(try await fresh.withConnection { try $0.execute("SELECT 1") } == 1)
        statistics = fresh.statistics
        #expect(statistics.connectionsOpened == 2 && statistics.open == 1)
        await fresh.close()
        await pool.close()
        await database.drop()
    }

    private func terminate(_ pid: Int, using admin: PostgresPool) async throws {
        let terminated = try await admin.withConnection { connection in
            try connection.query("SELECT pg_terminate_backend($1::int) AS ok", [pid]).first?.decode(Bool.self, "ok")
        }
        #expect(terminated == true)
        // pg_terminate_backend only signals; wait for the backend to be gone.
        try await RuntimeTestEnvironment.eventually(
            "backend \(pid) leaves pg_stat_activity after pg_terminate_backend (sessions with its pid)",
            timeout: .seconds(30),
            observe: {
                try await admin.withConnection { connection in
                    try connection.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1::int", [pid])
                        .first?.decode(Int.self, "n")
                }
            },
            until: { $0 == 0 }
        )
    }

    // MARK: Migrations

    private static let migrations = [
        Migration(
            version: 1,
            name: "schema_v1",
            sql: "CREATE TABLE charts (id int PRIMARY KEY, title text); SELECT pg_sleep(0.2);"
        ),
        Migration(
            version: 2,
            name: "add_owner",
            sql: "ALTER TABLE charts ADD COLUMN owner text; INSERT INTO charts VALUES (1, 'a', 'b');"
        ),
    ]

    @Test func migrationsApplyOnceAndDetectChanges() async throws {
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool()
        let migrator = Migrator(migrations: Self.migrations, logger: PostgresTestDatabase.logger)
        #expect(try await migrator.applied(pool: pool).isEmpty)
        #expect(try await migrator.migrate(pool: pool).map(\.version) == [1, 2])
        #expect(try await migrator.migrate(pool: pool).isEmpty)
        let applied = try await migrator.applied(pool: pool)
        #expect(applied.map(\.version) == [1, 2])
        #expect(applied.map(\.name) == ["schema_v1", "add_owner"])
        #expect(applied.allSatisfy { abs($0.appliedAt.timeIntervalSinceNow) < 60 })
        #expect(applied.map(\.checksum) == Self.migrations.map(\.checksum))

        var changed = Self.migrations
        changed[0] = Migration(version: 1, name: "schema_v1", sql: changed[0].sql + " -- edited")
        let changedOutcome = await postgresOutcome {
            try await Migrator(migrations: changed, logger: PostgresTestDatabase.logger).migrate(pool: pool)
        }
        let changedError = try #require(changedOutcome.failedWith as? PostgresError)
        #expect(changedError.kind == .migration)
        #expect(changedError.message.contains("migration 1 (schema_v1)"))

        // A failing migration leaves neither its changes nor its schema_migrations row.
        let failing =
            Self.migrations + [Migration(version: 3, name: "broken", sql: "CREATE TABLE half (id int); SELECT 1/0;")]
        let failingOutcome = await postgresOutcome {
            try await Migrator(migrations: failing, logger: PostgresTestDatabase.logger).migrate(pool: pool)
        }
        #expect((failingOutcome.failedWith as? PostgresError)?.sqlState == "22012")
        let (halfExists, versions) = try await pool.withConnection { connection in
            (
                try connection.query("SELECT to_regclass('half') IS NOT NULL AS e").first?.decode(Bool.self, "e"),
                try connection.query("SELECT version FROM schema_migrations ORDER BY version").map {
                    try $0.decode(Int.self, "version")
                }
            )
        }
        #expect(halfExists == false)
        #expect(versions == [1, 2])
        await pool.close()
        await database.drop()
    }

    @Test func racingMigratorsApplyEachMigrationOnce() async throws {
        let database = try await PostgresTestDatabase.make()
        let poolA = database.makePool()
        let poolB = database.makePool()
        let migratorA = Migrator(migrations: Self.migrations, logger: PostgresTestDatabase.logger)
        let migratorB = Migrator(migrations: Self.migrations, logger: PostgresTestDatabase.logger)
        async let a = migratorA.migrate(pool: poolA)
        async let b = migratorB.migrate(pool: poolB)
        let (appliedA, appliedB) = try await (a, b)
        #expect((appliedA + appliedB).map(\.version).sorted() == [1, 2])
        let counts = try await poolA.withConnection { connection in
            try connection.query(
                "SELECT version, count(*) AS n FROM schema_migrations GROUP BY version ORDER BY version"
            )
            .map { [try $0.decode(Int.self, "version"), try $0.decode(Int.self, "n")] }
        }
        #expect(counts == [[1, 1], [2, 1]])
        await poolA.close()
        await poolB.close()
        await database.drop()
    }

    // MARK: Server restart (keep last: it drops every session on the server)

    @Test func queryDuringRestartFailsAndPoolRecovers() async throws {
        guard let stackDirectory = ProcessInfo.processInfo.environment["ASTRO_STACK_DIR"], !stackDirectory.isEmpty
        else {
            Issue.record("ASTRO_STACK_DIR is not set: run through scripts/stack.sh run -- …")
            return
        }
        let script = Self.stackScript()
        #expect(FileManager.default.fileExists(atPath: script), "scripts/stack.sh not found at \(script)")
        let database = try await PostgresTestDatabase.make()
        let pool = database.makePool(.init(maxConnections: 2, acquireTimeout: .seconds(10)))
        #expect(await pool.ping())

        let started = PostgresTestCounter()
        let sleeper = Task {
            await postgresOutcome {
                try await pool.withConnection { connection in
                    started.increment()
                    return try connection.execute("SELECT pg_sleep(30)")
                }
            }
        }
        try await started.wait(for: 1)
        // The restart must meet the statement on the server, not on its way there.
        try await RuntimeTestEnvironment.eventually(
            "SELECT pg_sleep(30) is active on the server (sessions running it)",
            timeout: .seconds(30),
            observe: {
                try await database.admin.withConnection { connection in
                    try connection.query(
                        "SELECT count(*) AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)' AND state = 'active'"
                    ).first?.decode(Int.self, "n")
                }
            },
            until: { ($0 ?? 0) > 0 }
        )
        let status = try await Self.run(["/bin/bash", script, "pg-restart"])
        #expect(status == 0)

        let interrupted = await sleeper.value
        let error = try #require(interrupted.failedWith as? PostgresError)
        #expect(error.isConnectionLoss)
        #expect(error.isTransient)

        try await RuntimeTestEnvironment.eventually("the pool answers a ping after the restart", timeout: .seconds(30))
        {
            await pool.ping()
        }
        #expect(try await pool.withConnection { try $0.execute("SELECT 1") } == 1)
        #expect(pool.statistics.open >= 1)
        await pool.close()
        await database.drop()
    }

    /// `scripts/stack.sh` of the repository holding this file (symlinks resolved), or `ASTRO_STACK_SCRIPT`.
    private static func stackScript() -> String {
        if let script = ProcessInfo.processInfo.environment["ASTRO_STACK_SCRIPT"] { return script }
        let repository = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return repository.appendingPathComponent("scripts/stack.sh").path
    }

    /// Runs a program with the inherited environment and waits for it without blocking a concurrency thread.
    /// (posix_spawn + polling waitpid: Foundation's `Process` termination handler never fired here.)
    private static func run(_ arguments: [String]) async throws -> Int32 {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let spawned = posix_spawn(&pid, arguments[0], nil, nil, argv, environ)
        guard spawned == 0 else {
            throw PostgresTestSetupError(description: "cannot start \(arguments[0]): error \(spawned)")
        }
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { break }
            if reaped < 0 { throw PostgresTestSetupError(description: "waitpid failed: errno \(errno)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        // WIFEXITED/WEXITSTATUS are macros Swift does not import.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : -1
    }
}

extension Result {
    fileprivate var failedWith: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }

    fileprivate var succeededWith: Success? {
        if case .success(let value) = self { return value }
        return nil
    }
}
