import ArgumentParser
import AstroDomain
import Billing
import Foundation
import Postgres
import StoreKitVerification
import Synchronization
import UUIDText

/// Credits for `bench e2e --type consume|consume-hot`, written straight into the ledger (the
/// purchase path is not what is measured): one profile with a chart per ten jobs, and one
/// credit per job.
enum BillingBenchSeed {
    /// - Parameter chartData: the NatalChart JSON stored for every profile (`{}` when only the
    ///   billing-worker runs, which never reads it).
    static func seed(
        pool: PostgresPool,
        jobs: Int,
        hotUser: Bool,
        chartData: String = "{}"
    ) async throws -> [(user: String, profile: String)] {
        let profiles = (jobs + 9) / 10
        // The jobs row of the seeding, so ledger entries name a job like every other entry.
        let seedJob = UUID()
        let rows = try await pool.withTransaction { database in
            try database.query(hotUser ? hotSQL : manySQL, [profiles, seedJob, chartData]).map {
                (user: try $0.decode(String.self, "user_id"), profile: try $0.decode(String.self, "profile_id"))
            }
        }
        FileHandle.standardError.write(
            Data(
                "seeded \(rows.count) profiles with \(profiles * 10) credits (\(hotUser ? "one user" : "one user each"))\n"
                    .utf8
            )
        )
        return rows
    }

    private static let manySQL: SQL = """
        WITH u AS (
            INSERT INTO users (id) SELECT gen_random_uuid() FROM generate_series(1, $1) RETURNING id
        ), p AS (
            INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
            SELECT gen_random_uuid(), id, 'Bench', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52 FROM u
            RETURNING id, user_id
        ), c AS (
            INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
            SELECT gen_random_uuid(), id, $3::jsonb, 'placidus', 'bench', 'bench' FROM p
        ), r AS (
            INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                purchase_date, price_usd, currency_code, credit_amount, environment)
            SELECT gen_random_uuid(), user_id, 'bench-' || id, 'bench-' || id, 'com.astrosvitla.report.credit.pack10',
                now(), 34.99, 'USD', 10, 'Sandbox'
            FROM p RETURNING id, user_id, transaction_id
        ), cr AS (
            INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date)
            SELECT gen_random_uuid(), r.id, r.transaction_id, r.user_id, now() FROM r, generate_series(1, 10)
            RETURNING id, user_id, transaction_id
        ), l AS (
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id)
            SELECT user_id, id, transaction_id, 'issued', $2 FROM cr
        )
        SELECT user_id::text, id::text AS profile_id FROM p
        """

    private static let hotSQL: SQL = """
        WITH u AS (
            INSERT INTO users (id) VALUES (gen_random_uuid()) RETURNING id
        ), p AS (
            INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
            SELECT gen_random_uuid(), u.id, 'Bench ' || g, '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52
            FROM u, generate_series(1, $1) g
            RETURNING id, user_id
        ), c AS (
            INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
            SELECT gen_random_uuid(), id, $3::jsonb, 'placidus', 'bench', 'bench' FROM p
        ), r AS (
            INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                purchase_date, price_usd, currency_code, credit_amount, environment)
            SELECT gen_random_uuid(), u.id, 'bench-' || u.id, 'bench-' || u.id, 'com.astrosvitla.report.credit.pack10',
                now(), 34.99, 'USD', $1 * 10, 'Sandbox'
            FROM u RETURNING id, user_id, transaction_id
        ), cr AS (
            INSERT INTO purchase_credits (id, purchase_record_id, transaction_id, user_id, purchase_date)
            SELECT gen_random_uuid(), r.id, r.transaction_id, r.user_id, now() + g * interval '1 microsecond'
            FROM r, generate_series(1, $1 * 10) g
            RETURNING id, user_id, transaction_id
        ), l AS (
            INSERT INTO credit_ledger (user_id, credit_id, transaction_id, entry, job_id)
            SELECT user_id, id, transaction_id, 'issued', $2 FROM cr
        )
        SELECT user_id::text, id::text AS profile_id FROM p
        """
}

/// `astro-bench verify`: signed-transaction verifications per second in this process.
struct BenchVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "StoreKit signed-transaction verifications per second in one process (development PKI).",
        discussion: """
            Signs --count distinct transactions with a fresh development PKI (same chain, \
            as Apple's tokens from one leaf are), then verifies them all with --tasks \
            concurrent tasks. Prints the rate, the first (cold) verification's time, and \
            a cold rate with a new verifier per token (chain validation every time).

            Example:
              astro-bench verify --count 20000 --tasks 1 --tasks 2
            """
    )

    @Option(parsing: .unconditional, help: "Tokens to verify per measurement.") var count = 20000
    @Option(parsing: .unconditionalSingleValue, help: "Concurrent verifying tasks (repeatable: one measurement each).")
    var tasks: [Int] = [1, 2]

    func validate() throws {
        guard count > 0, !tasks.isEmpty, tasks.allSatisfy({ $0 > 0 && $0 <= 64 }) else {
            throw ValidationError("--count must be positive and --tasks 1…64")
        }
    }

    func run() async throws {
        let start = Date().addingTimeInterval(-86_400)
        let pki = try DevPKI.generate(notValidBefore: start, notValidAfter: start.addingTimeInterval(365 * 86_400))
        let policy = try VerificationPolicy(
            trustedRoots: [pki.root],
            bundleID: BillingDefaults.bundleID,
            environment: .sandbox
        )
        let signStart = ContinuousClock.now
        let tokens = try (0..<count).map { _ in
            let id = DevTransactions.newTransactionID()
            return try pki.signer.sign(
                DevTransactions.transaction(
                    id: id,
                    originalID: id,
                    productID: "com.astrosvitla.report.credit.single",
                    userID: UUID().lowercasedText,
                    quantity: 1,
                    environment: "Sandbox",
                    bundleID: BillingDefaults.bundleID,
                    at: Date(),
                    revoked: false
                )
            )
        }
        let signSeconds = Self.seconds(ContinuousClock.now - signStart)
        print(String(format: "signed %d tokens in %.2f s (%.0f/s)", count, signSeconds, Double(count) / signSeconds))

        // Cold: a new verifier per token, so the chain is validated every time.
        let coldCount = min(count, 500)
        let coldStart = ContinuousClock.now
        for token in tokens.prefix(coldCount) {
            _ = try await SignedDataVerifier(policy: policy).verifyTransaction(token)
        }
        let coldSeconds = Self.seconds(ContinuousClock.now - coldStart)
        print(
            String(
                format: "cold (chain validated every time, 1 task): %.0f verifications/s, %.0f µs each",
                Double(coldCount) / coldSeconds,
                coldSeconds / Double(coldCount) * 1e6
            )
        )
        for taskCount in tasks {
            let verifier = SignedDataVerifier(policy: policy)
            let first = ContinuousClock.now
            _ = try await verifier.verifyTransaction(tokens[0])
            let firstSeconds = Self.seconds(ContinuousClock.now - first)
            let failures = FailureCounter()
            let begin = ContinuousClock.now
            await withTaskGroup(of: Void.self) { group in
                for lane in 0..<taskCount {
                    group.addTask {
                        var index = lane
                        while index < tokens.count {
                            do {
                                _ = try await verifier.verifyTransaction(tokens[index])
                            } catch {
                                failures.count.add(1, ordering: .relaxed)
                            }
                            index += taskCount
                        }
                    }
                }
            }
            let seconds = Self.seconds(ContinuousClock.now - begin)
            print(
                String(
                    format: "%d task%@: %8.0f verifications/s (%d in %.2f s, first %.1f ms, failures %d)",
                    taskCount,
                    taskCount == 1 ? "" : "s",
                    Double(count) / seconds,
                    count,
                    seconds,
                    firstSeconds * 1000,
                    failures.count.load(ordering: .relaxed)
                )
            )
        }
    }

    /// Atomics cannot be captured by the tasks' closures; a class holding one can.
    final class FailureCounter: Sendable {
        let count = Atomic<Int>(0)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
