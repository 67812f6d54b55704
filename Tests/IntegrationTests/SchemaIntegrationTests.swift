import Foundation
import Postgres
import Testing

/// Schema v1's invariants, enforced by PostgreSQL itself.
@Suite(.timeLimit(.minutes(1)))
struct SchemaIntegrationTests {
    /// Runs `body` in a transaction that is always rolled back, so tests leave nothing behind.
    private func inRolledBackTransaction(_ body: @escaping @Sendable (PostgresConnection) throws -> Void) async throws {
        let pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        try await pool.withConnection { database in
            try database.executeScript("BEGIN")
            defer { try? database.executeScript("ROLLBACK") }
            try body(database)
        }
    }

    private static func sqlState(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as PostgresError {
            return error.sqlState
        } catch {
            return "not a PostgresError: \(error)"
        }
    }

    /// A user with one profile; returns (user, profile).
    private static func seedProfile(_ database: PostgresConnection, name: String = "Me") throws -> (UUID, UUID) {
        let user = UUID()
        let profile = UUID()
        try database.execute("INSERT INTO users (id) VALUES ($1)", [user])
        try database.execute(
            """
            INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
            VALUES ($1, $2, $3, '1990-10-07', '15:00', 'Europe/Kyiv', 50.4501, 30.5234)
            """,
            [profile, user, name]
        )
        return (user, profile)
    }

    private static func seedPurchase(_ database: PostgresConnection, user: UUID, transaction: String) throws -> UUID {
        let record = UUID()
        try database.execute(
            """
            INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                purchase_date, price_usd, currency_code, credit_amount, environment)
            VALUES ($1, $2, $3, $3, 'com.astrosvitla.report.credit.single', now(), 4.99, 'USD', 1, 'Sandbox')
            """,
            [record, user, transaction]
        )
        return record
    }

    @Test func deletingAProfileDeletesItsChartAndReports() async throws {
        try await inRolledBackTransaction { database in
            let (user, profile) = try Self.seedProfile(database)
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, '{"planets": []}', 'placidus', 'digest', 'test')
                """,
                [UUID(), profile]
            )
            let transaction = "2000000\(Int.random(in: 100_000...999_999))"
            _ = try Self.seedPurchase(database, user: user, transaction: transaction)
            try database.execute(
                """
                INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count,
                    price, currency, transaction_id, purchase_date, generated_at, writer)
                VALUES ($1, $2, $3, 'career', 'uk', 'Текст звіту', 2, 6.99, 'USD', $4, now(), now(), 'rules')
                """,
                [UUID(), user, profile, transaction]
            )
            try database.execute("DELETE FROM user_profiles WHERE id = $1", [profile])
            let charts = try database.query(
                "SELECT count(*)::int AS n FROM birth_charts WHERE profile_id = $1",
                [profile]
            )
            let reports = try database.query(
                "SELECT count(*)::int AS n FROM report_purchases WHERE profile_id = $1",
                [profile]
            )
            #expect(try charts.first?.decode(Int.self, "n") == 0)
            #expect(try reports.first?.decode(Int.self, "n") == 0)
            // The money record stays.
            let records = try database.query(
                "SELECT count(*)::int AS n FROM purchase_records WHERE transaction_id = $1",
                [transaction]
            )
            #expect(try records.first?.decode(Int.self, "n") == 1)
        }
    }

    @Test func profileNamesAreUniquePerUserAndValidated() async throws {
        try await inRolledBackTransaction { database in
            let (user, _) = try Self.seedProfile(database, name: "Partner")
            try database.executeScript("SAVEPOINT s")
            #expect(
                Self.sqlState {
                    try database.execute(
                        """
                        INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                        VALUES ($1, $2, 'Partner', '1991-01-01', '10:00', 'UTC', 0, 0)
                        """,
                        [UUID(), user]
                    )
                } == "23505"
            )
            try database.executeScript("ROLLBACK TO SAVEPOINT s")
            for (name, date, latitude) in [
                ("", "1990-01-01", 0.0), ("ok", "1899-12-31", 0.0), ("ok2", "1990-01-01", 91.0),
            ] {
                #expect(
                    Self.sqlState {
                        try database.execute(
                            """
                            INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                            VALUES ($1, $2, $3, $4::date, '10:00', 'UTC', $5, 0)
                            """,
                            [UUID(), user, name, date, latitude]
                        )
                    } == "23514"
                )
                try database.executeScript("ROLLBACK TO SAVEPOINT s")
            }
        }
    }

    @Test func creditsKeepTheSeedInvariants() async throws {
        try await inRolledBackTransaction { database in
            let (user, profile) = try Self.seedProfile(database)
            let transaction = "2000001\(Int.random(in: 100_000...999_999))"
            let record = try Self.seedPurchase(database, user: user, transaction: transaction)
            try database.executeScript("SAVEPOINT s")
            // A transaction id grants once.
            #expect(
                Self.sqlState { _ = try Self.seedPurchase(database, user: user, transaction: transaction) } == "23505"
            )
            try database.executeScript("ROLLBACK TO SAVEPOINT s")
            let insertCredit: SQL = """
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, report_area,
                    purchase_date, consumed, consumed_date, user_profile_id, consumed_by_job,
                    consumed_area, consumed_language)
                VALUES ($1, $2, $3, $4, 'career', now(), $5, $6, $7, $8,
                    CASE WHEN $5 THEN 'career' END, CASE WHEN $5 THEN 'en' END)
                """
            // Consumed without a date or profile, or available with them: refused.
            let invalid: [(Bool, Date?, UUID?)] = [
                (true, nil, profile), (true, Date(), nil), (false, Date(), nil), (false, nil, profile),
            ]
            for (consumed, date, consumedProfile) in invalid {
                #expect(
                    Self.sqlState {
                        try database.execute(
                            insertCredit,
                            [UUID(), record, transaction, user, consumed, date, consumedProfile, UUID?.none]
                        )
                    } == "23514"
                )
                try database.executeScript("ROLLBACK TO SAVEPOINT s")
            }
            // A valid consumed credit, then a second credit consumed by the same job: refused.
            let job = UUID()
            try database.execute(insertCredit, [UUID(), record, transaction, user, true, Date(), profile, job])
            try database.executeScript("SAVEPOINT t")
            #expect(
                Self.sqlState {
                    try database.execute(insertCredit, [UUID(), record, transaction, user, true, Date(), profile, job])
                } == "23505"
            )
            try database.executeScript("ROLLBACK TO SAVEPOINT t")
            // A user with purchases cannot be deleted out from under the ledger.
            #expect(Self.sqlState { try database.execute("DELETE FROM users WHERE id = $1", [user]) } == "23503")
        }
    }

    @Test func jobStatusesAreConstrained() async throws {
        try await inRolledBackTransaction { database in
            try database.executeScript("SAVEPOINT s")
            #expect(
                Self.sqlState {
                    try database.execute("INSERT INTO jobs (id, kind, status) VALUES ($1, 'x', 'exploded')", [UUID()])
                } == "23514"
            )
            try database.executeScript("ROLLBACK TO SAVEPOINT s")
            // A finished job must say when it finished.
            #expect(
                Self.sqlState {
                    try database.execute("INSERT INTO jobs (id, kind, status) VALUES ($1, 'x', 'succeeded')", [UUID()])
                } == "23514"
            )
        }
    }

    /// Migrations 0007 and 0009: charts and reports are compressed with lz4 (this machine's
    /// PostgreSQL has it), charts stay in their rows, and a stored chart comes back unchanged.
    @Test func chartsAndReportsAreCompressedWithLZ4() async throws {
        try await inRolledBackTransaction { database in
            let methods = try database.query(
                """
                SELECT attname, attcompression::text AS method FROM pg_attribute
                WHERE (attrelid, attname) IN (('birth_charts'::regclass, 'chart_data'),
                    ('report_purchases'::regclass, 'report_text'))
                ORDER BY attname
                """
            ).map { try $0.decode(String.self, "method") }
            #expect(methods == ["l", "l"])
            // Migration 0009: a chart stays in its row, compressed, not in the TOAST table.
            let storage = try database.query(
                """
                SELECT attstorage::text AS storage FROM pg_attribute
                WHERE attrelid = 'birth_charts'::regclass AND attname = 'chart_data'
                """
            ).first
            #expect(try storage?.decode(String.self, "storage") == "m")
            let (_, profile) = try Self.seedProfile(database)
            // Large enough to be compressed (over 2 kB).
            let chart = "{\"planets\": [" + (0..<200).map { "{\"n\": \($0)}" }.joined(separator: ",") + "]}"
            try database.execute(
                """
                INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                VALUES ($1, $2, $3::jsonb, 'placidus', 'd', 'v')
                """,
                [UUID(), profile, chart]
            )
            let stored = try database.query(
                """
                SELECT pg_column_compression(chart_data) AS method, chart_data = $2::jsonb AS same
                FROM birth_charts WHERE profile_id = $1
                """,
                [profile, chart]
            ).first
            #expect(try stored?.decode(String?.self, "method") == "lz4")
            #expect(try stored?.decode(Bool.self, "same") == true)
        }
    }
}
