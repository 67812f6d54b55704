import AstroDomain
import Foundation
import Postgres
import Schema
import Testing

/// Least privilege in PostgreSQL (migration 0004): each worker's role can do what its jobs need
/// and nothing more. The journeys through real worker processes run under these roles too
/// (ReportJourneyTests, BillingWorkerProcessTests, AstroctlChartTests), which shows the grants
/// suffice; these tests show what they refuse.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct WorkerRoleTests {
    let owner: PostgresPool

    init() async throws {
        owner = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// A connection as `role`, with the login password the test environment gives it.
    func connect(as role: WorkerRole) async throws -> PostgresPool {
        PostgresPool(
            configuration: try PostgresConfiguration(url: try await RuntimeTestEnvironment.databaseURL(as: role)),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
    }

    /// The SQLSTATE a statement fails with, or nil when it succeeds.
    func failure(_ pool: PostgresPool, _ sql: SQL, _ parameters: [any PostgresBindable] = []) async -> String? {
        do {
            try await pool.withConnection { _ = try $0.execute(sql, parameters) }
            return nil
        } catch let error as PostgresError {
            return error.sqlState ?? "\(error)"
        } catch {
            return "\(error)"
        }
    }

    /// A user with a profile and one unspent credit, written by the owner.
    func creditHolder() async throws -> (user: UUID, credit: UUID) {
        let user = UUID()
        let record = UUID()
        let credit = UUID()
        let transaction = "role-test-\(UUID().uuidString)"
        try await owner.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user])
            try database.execute(
                """
                INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                    purchase_date, price_usd, currency_code, credit_amount, environment)
                VALUES ($1, $2, $3, $3, 'com.astrosvitla.report.credit.single', now(), 4.99, 'USD', 1, 'Sandbox')
                """,
                [record, user, transaction]
            )
            try database.execute(
                """
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date)
                VALUES ($1, $2, $3, $4, now())
                """,
                [credit, record, transaction, user]
            )
        }
        return (user, credit)
    }

    @Test func theReportWorkersRoleCannotChangeACredit() async throws {
        let (user, credit) = try await creditHolder()
        let report = try await connect(as: .reportWorker)
        // It reads what a report needs...
        #expect(await failure(report, "SELECT count(*) FROM birth_charts") == nil)
        #expect(await failure(report, "SELECT consumed FROM purchase_credits WHERE id = $1", [credit]) == nil)
        // ...and cannot spend, give back, create, delete or forge a credit or its ledger.
        let denied = "42501"
        #expect(await failure(report, "UPDATE purchase_credits SET consumed = true WHERE id = $1", [credit]) == denied)
        #expect(await failure(report, "DELETE FROM purchase_credits WHERE id = $1", [credit]) == denied)
        #expect(
            await failure(
                report,
                """
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date)
                SELECT gen_random_uuid(), purchase_record_id, transaction_id, user_id, now()
                FROM purchase_credits WHERE id = $1
                """,
                [credit]
            ) == denied
        )
        #expect(
            await failure(
                report,
                """
                INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id)
                SELECT user_id, id, transaction_id, 'issued', gen_random_uuid() FROM purchase_credits WHERE id = $1
                """,
                [credit]
            ) == denied
        )
        #expect(
            await failure(report, "UPDATE purchase_records SET credit_amount = 100 WHERE user_id = $1", [user])
                == denied
        )
        // Locking a credit row needs UPDATE rights, which it does not have: it uses the advisory lock.
        #expect(await failure(report, "SELECT 1 FROM purchase_credits WHERE id = $1 FOR SHARE", [credit]) == denied)
        #expect(await failure(report, "SELECT pg_advisory_xact_lock_shared(credit_lock_key($1))", [credit]) == nil)
        // Nor does it touch charts or profiles, or the schema.
        #expect(await failure(report, "UPDATE birth_charts SET engine_version = 'x' WHERE false") == denied)
        #expect(await failure(report, "CREATE TABLE report_worker_table (id int)") == denied)
        let unchanged = try await owner.withConnection { database in
            try database.query("SELECT consumed, revoked FROM purchase_credits WHERE id = $1", [credit]).first
        }
        #expect(try unchanged?.decode(Bool.self, "consumed") == false)
        #expect(try unchanged?.decode(Bool.self, "revoked") == false)
        await report.close()
    }

    @Test func theChartWorkersRoleWritesChartsButNeverSeesCredits() async throws {
        let (_, credit) = try await creditHolder()
        let chart = try await connect(as: .chartWorker)
        #expect(await failure(chart, "INSERT INTO users (id) VALUES (gen_random_uuid())") == nil)
        #expect(await failure(chart, "UPDATE birth_charts SET engine_version = engine_version WHERE false") == nil)
        #expect(await failure(chart, "SELECT 1 FROM purchase_credits WHERE id = $1", [credit]) == "42501")
        #expect(await failure(chart, "SELECT 1 FROM credit_ledger") == "42501")
        #expect(await failure(chart, "SELECT 1 FROM report_purchases") == "42501")
        await chart.close()
    }

    @Test func onlyTheBillingWorkersRoleMovesCreditsAndTheLedgerStaysAppendOnly() async throws {
        let (_, credit) = try await creditHolder()
        let billing = try await connect(as: .billingWorker)
        #expect(await failure(billing, "UPDATE purchase_credits SET revoked = revoked WHERE id = $1", [credit]) == nil)
        #expect(await failure(billing, "DELETE FROM purchase_credits WHERE id = $1", [credit]) == "42501")
        #expect(await failure(billing, "UPDATE credit_ledger SET entry = entry WHERE false") == "42501")
        #expect(await failure(billing, "UPDATE birth_charts SET engine_version = 'x' WHERE false") == "42501")
        #expect(await failure(billing, "INSERT INTO report_purchases DEFAULT VALUES") == "42501")
        await billing.close()
    }

    @Test func theStoryWorkersRoleKeepsToTheStoriesSchema() async throws {
        let (_, credit) = try await creditHolder()
        let story = try await connect(as: .storyWorker)
        #expect(await failure(story, "INSERT INTO users (id) VALUES (gen_random_uuid())") == nil)
        #expect(await failure(story, "UPDATE stories.pages SET text = text WHERE false") == nil)
        #expect(await failure(story, "SELECT count(*) FROM stories.achievements") == nil)
        // Readings are history: recorded, never rewritten or removed; stories are never deleted.
        #expect(await failure(story, "UPDATE stories.story_reads SET read_at = read_at WHERE false") == "42501")
        #expect(await failure(story, "DELETE FROM stories.stories WHERE false") == "42501")
        #expect(await failure(story, "SELECT 1 FROM purchase_credits WHERE id = $1", [credit]) == "42501")
        #expect(await failure(story, "SELECT 1 FROM birth_charts") == "42501")
        #expect(await failure(story, "CREATE TABLE stories.sneaky (id int)") == "42501")
        await story.close()
    }

    /// Issue 14: a worker's role cannot write another service's jobs or mint its messages, and
    /// cannot redirect a message already in the outbox.
    @Test func aWorkersRoleWritesOnlyItsOwnJobsAndMessages() async throws {
        let chart = try await connect(as: .chartWorker)
        let report = try await connect(as: .reportWorker)
        func outbox(_ exchange: String, _ key: String) -> SQL {
            SQL(
                unsafeSQL:
                    "INSERT INTO outbox (exchange, routing_key, body, mandatory) VALUES ('\(exchange)', '\(key)', '\\x7b7d', true)"
            )
        }
        // Its own: an event, a dead letter of its queue (through astro.retry, migration 0013).
        #expect(await failure(chart, outbox("astro.events", "chart.calculated")) == nil)
        #expect(await failure(chart, outbox("astro.retry", "chart.calculate.dead")) == nil)
        // Another service's event, an internal job, a dead letter elsewhere or through the
        // broker's own dead-letter exchange, another producer's name.
        #expect(await failure(chart, outbox("astro.events", "billing.credits-issued")) == "42501")
        #expect(await failure(chart, outbox("astro.jobs", "billing.refund-credit")) == "42501")
        #expect(await failure(chart, outbox("astro.retry", "report.generate.dead")) == "42501")
        #expect(await failure(chart, outbox("astro.dlx", "chart.calculate.dead")) == "42501")
        #expect(await failure(report, outbox("astro.jobs", "report.generate")) == "42501")
        #expect(await failure(report, outbox("astro.jobs", "billing.refund-credit")) == nil)
        #expect(
            await failure(
                chart,
                "INSERT INTO outbox (exchange, routing_key, body, producer) VALUES ('astro.events', 'chart.x', '\\x7b7d', 'astro_billing_worker')"
            ) == "42501"
        )
        // Rows already written stay where they were going: only a relay's progress can change.
        #expect(await failure(chart, "UPDATE outbox SET routing_key = 'billing.refund-credit' WHERE false") == "42501")
        #expect(await failure(chart, "UPDATE outbox SET sent_at = now() WHERE false") == nil)
        // Another worker's rows are invisible to its relay.
        let billingRow = try await owner.withConnection { database in
            try database.query(
                "INSERT INTO outbox (exchange, routing_key, body, producer, sent_at) VALUES ('astro.events', 'billing.x', '\\x7b7d', 'astro_billing_worker', now()) RETURNING id"
            ).first?.decode(Int64.self, "id")
        }
        let seen = try await chart.withConnection { database in
            try database.query("SELECT count(*)::int AS n FROM outbox WHERE id = $1", [billingRow]).first?.decode(
                Int.self,
                "n"
            )
        }
        #expect(seen == 0)
        // Jobs: its own types only.
        #expect(
            await failure(
                chart,
                "INSERT INTO jobs (id, kind, status) VALUES (gen_random_uuid(), 'chart.calculate', 'queued')"
            ) == nil
        )
        #expect(
            await failure(
                chart,
                "INSERT INTO jobs (id, kind, status) VALUES (gen_random_uuid(), 'billing.refund-credit', 'queued')"
            ) == "42501"
        )
        #expect(await failure(chart, "UPDATE jobs SET kind = 'report.generate' WHERE false") == "42501")
        await chart.close()
        await report.close()
    }

    /// Issue 14: a role's password reaches the server only as a SCRAM verifier, never in clear
    /// text (which a statement log or an error would keep).
    @Test func aRolesPasswordIsSentAsAVerifierOnly() async throws {
        let folder = try RuntimeTestEnvironment.variable("ASTRO_STACK_DIR")
        let password = "clear-text-\(UUID().uuidString.prefix(8))"
        try await owner.withConnection { database in
            // The stack's owner is a superuser: log every statement of this session.
            try database.executeScript("SET log_statement = 'all'")
            defer { try? database.executeScript("RESET log_statement") }
            try WorkerRole.storyWorker.enableLogin(password: password, database: database)
        }
        let log = try String(contentsOfFile: folder + "/pg/pg.log", encoding: .utf8)
        #expect(log.contains("ALTER ROLE astro_story_worker LOGIN PASSWORD 'SCRAM-SHA-256$"))
        #expect(!log.contains(password))
        // And the role logs in with it.
        var configuration = try await RuntimeTestEnvironment.database()
        configuration.user = WorkerRole.storyWorker.rawValue
        configuration.password = password
        let pool = PostgresPool(
            configuration: configuration,
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        #expect(await pool.ping())
        await pool.close()
        // Restore the password the other tests use.
        _ = try await RuntimeTestEnvironment.databaseURL(as: .storyWorker)
    }

    /// Migration 0013: pending rows written before 0012 get their producer (by their job, else by
    /// their routing key), and pending dead letters move from astro.dlx to astro.retry.
    @Test func legacyOutboxRowsGetAProducerAndDeadLettersGoThroughTheRetryExchange() async throws {
        let configuration = try await RuntimeTestEnvironment.freshDatabase()
        let pool = PostgresPool(
            configuration: configuration,
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await pool.close() } }
        let all = try AstroSchema.migrations()
        let logger = RuntimeTestEnvironment.logger
        _ = try await Migrator(migrations: all.filter { $0.version <= 12 }, logger: logger).migrate(pool: pool)
        let reportJob = UUID()
        let (user, profile, credit, request) = (UUID(), UUID(), UUID(), UUID())
        try await pool.withTransaction { database in
            // A credit spent on a report request, and the refund an earlier report-worker queued
            // for it (creditId and requestJobId only, uppercase as Swift's encoder writes UUIDs).
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user])
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, 'Legacy', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [profile, user]
            )
            let record = UUID()
            try database.execute(
                """
                INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                    purchase_date, price_usd, currency_code, credit_amount, environment)
                VALUES ($1, $2, 'legacy-1', 'legacy-1', 'com.astrosvitla.report.credit.single', now(), 4.99, 'USD', 1,
                    'Sandbox')
                """,
                [record, user]
            )
            try database.execute(
                """
                INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date, consumed,
                    consumed_date, user_profile_id, consumed_by_job, consumed_area, consumed_language)
                VALUES ($1, $2, 'legacy-1', $3, now(), true, now(), $4, $5, 'career', 'uk')
                """,
                [credit, record, user, profile, request]
            )
            let legacyRefund =
                #"{"jobId":"\#(UUID().uuidString)","creditId":"\#(credit.uuidString)","requestJobId":"\#(request.uuidString)","reason":"llm-unavailable"}"#
            try database.execute(
                """
                INSERT INTO outbox (exchange, routing_key, body, mandatory, producer)
                VALUES ('astro.jobs', 'billing.refund-credit', convert_to($1, 'UTF8'), true, NULL)
                """,
                [legacyRefund]
            )
            try database.execute(
                "INSERT INTO jobs (id, kind, status, finished_at) VALUES ($1, 'report.request', 'dead', now())",
                [reportJob]
            )
            for (exchange, key, job, sent) in [
                ("astro.events", "report.failed", reportJob as UUID?, false),
                ("astro.dlx", "report.request.dead", reportJob, false),
                ("astro.jobs", "billing.refund-credit", nil, false),
                ("astro.events", "story.generated", nil, false),
                ("astro.dlx", "chart.calculate.dead", nil, true),
            ] {
                try database.execute(
                    """
                    INSERT INTO outbox (exchange, routing_key, body, job_id, producer, sent_at)
                    VALUES ($1, $2, '\\x7b7d', $3, NULL, CASE WHEN $4 THEN now() END)
                    """,
                    [exchange, key, job, sent]
                )
            }
        }
        #expect(try await Migrator(migrations: all, logger: logger).migrate(pool: pool).map(\.version).contains(13))
        let rows = try await pool.withConnection { database in
            try database.query("SELECT exchange, routing_key, producer::text AS producer FROM outbox ORDER BY id").map {
                "\(try $0.decode(String.self, "exchange")) \(try $0.decode(String.self, "routing_key")) "
                    + (try $0.decode(String?.self, "producer") ?? "-")
            }
        }
        #expect(
            rows == [
                "astro.jobs billing.refund-credit astro_report_worker",
                "astro.events report.failed astro_billing_worker",
                "astro.retry report.request.dead astro_billing_worker",
                "astro.jobs billing.refund-credit astro_report_worker",
                "astro.events story.generated astro_story_worker",
                // Sent long ago: left as it was.
                "astro.dlx chart.calculate.dead -",
            ]
        )
        // The legacy refund now names what the credit was spent on, as the billing-worker requires.
        let refund = try await pool.withConnection { database in
            try database.query(
                "SELECT convert_from(body, 'UTF8') AS body FROM outbox WHERE routing_key = 'billing.refund-credit'"
            ).first!.decode(String.self, "body")
        }
        let decoded = try JSONCoding.decoder.decode(RefundCreditRequest.self, from: Data(refund.utf8))
        #expect(decoded.userID.uuid == user && decoded.profileID.uuid == profile)
        #expect(decoded.area == .career && decoded.language == .uk && decoded.reason == "llm-unavailable")
    }
}
