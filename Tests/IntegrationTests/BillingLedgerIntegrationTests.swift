import AstroDomain
import Billing
import Foundation
import Postgres
import StoreKitVerification
import Testing
import WorkerRuntime

/// The billing handlers against the real database: each job's prepare, then its commit inside
/// a real transaction, exactly as the runtime runs them (the broker side is covered by
/// BillingWorkerProcessTests).
@Suite(.timeLimit(.minutes(2)))
struct BillingLedgerIntegrationTests {
    static let pki: DevPKI = {
        let start = Date().addingTimeInterval(-86_400)
        return try! DevPKI.generate(notValidBefore: start, notValidAfter: start.addingTimeInterval(3 * 365 * 86_400))
    }()
    static let verifier = SignedDataVerifier(
        policy: try! VerificationPolicy(
            trustedRoots: [pki.root],
            bundleID: BillingDefaults.bundleID,
            environment: .sandbox
        )
    )
    static let verify = VerifyPurchaseHandler(verifier: verifier, catalog: .defaults, appStore: nil)
    /// An operator who turned BILLING_REQUIRE_ACCOUNT_TOKEN off: tokens without an account token count.
    static let verifyWithoutAccountToken = VerifyPurchaseHandler(
        verifier: verifier,
        catalog: .defaults,
        appStore: nil,
        requireAccountToken: false
    )
    static let notifications = StoreNotificationHandler(verifier: verifier)

    let pool: PostgresPool

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 4),
            logger: RuntimeTestEnvironment.logger
        )
    }

    // MARK: - Helpers

    static func signedPurchase(
        _ product: String,
        user: UserID?,
        id: String = DevTransactions.newTransactionID(),
        originalID: String? = nil,
        quantity: Int = 1,
        revoked: Bool = false,
        signer: JWSSigner = pki.signer
    ) throws -> (jws: String, transactionID: String) {
        let payload = DevTransactions.transaction(
            id: id,
            originalID: originalID ?? id,
            productID: product,
            userID: user?.description,
            quantity: quantity,
            environment: "Sandbox",
            bundleID: BillingDefaults.bundleID,
            at: Date(),
            revoked: revoked
        )
        return (try signer.sign(payload), id)
    }

    /// Runs one job through a handler: prepare, then commit in a transaction.
    func run<H: JobHandler>(_ handler: H, _ body: JSONValue, type: JobType) async throws -> JobOutcome {
        let jobID = JobID(body["jobId"]?.stringValue.flatMap(UUID.init(uuidString:)) ?? UUID())
        let envelope = JobEnvelope(jobID: jobID, type: type, body: try JSONCoding.encoder.encode(body))
        let prepared = try await handler.prepare(envelope)
        return try await pool.withTransaction { database in
            try handler.commit(prepared, job: envelope, database: database)
        }
    }

    func purchase(_ jws: String, user: UserID, handler: VerifyPurchaseHandler = verify) async throws -> JobOutcome {
        try await run(
            handler,
            [
                "jobId": .string(JobID.random().description), "userId": .string(user.description),
                "signedTransaction": .string(jws),
            ],
            type: .billingVerifyPurchase
        )
    }

    func request(
        _ user: UserID,
        _ profile: ProfileID,
        _ area: ReportArea,
        _ language: ReportLanguage = .en,
        jobID: JobID = .random()
    )
        async throws -> JobOutcome
    {
        try await run(
            ReportRequestHandler(),
            try JSONDecoder().decode(
                JSONValue.self,
                from: JSONCoding.encoder.encode(
                    ReportRequest(jobID: jobID, userID: user, profileID: profile, area: area, language: language)
                )
            ),
            type: .reportRequest
        )
    }

    /// A billing.refund-credit as the report-worker sends it: naming what the credit was spent
    /// on (read from the credit's row unless `user`, `profile`, `area` or `language` say otherwise).
    func refund(
        _ credit: String,
        requestJob: JobID,
        user: UserID? = nil,
        profile: ProfileID? = nil,
        area: String? = nil,
        language: String? = nil
    ) async throws -> JobOutcome {
        let row = try await pool.withConnection { database in
            try database.query(
                "SELECT user_id, user_profile_id, consumed_area, consumed_language FROM purchase_credits WHERE id::text = $1",
                [credit]
            ).first
        }
        let storedUser = try row?.decode(UUID.self, "user_id").uuidString.lowercased()
        let storedProfile = try row?.decode(UUID?.self, "user_profile_id")?.uuidString.lowercased()
        return try await run(
            RefundCreditHandler(),
            [
                "jobId": .string(JobID.random().description), "creditId": .string(credit),
                "requestJobId": .string(requestJob.description), "reason": "llm-unavailable",
                "userId": .string(user?.description ?? storedUser ?? UserID.random().description),
                "profileId": .string(profile?.description ?? storedProfile ?? ProfileID.random().description),
                "area": .string(area ?? (try row?.decode(String?.self, "consumed_area")) ?? "career"),
                "language": .string(language ?? (try row?.decode(String?.self, "consumed_language")) ?? "en"),
            ],
            type: .billingRefundCredit
        )
    }

    func notify(_ signedPayload: String) async throws -> JobOutcome {
        try await run(
            Self.notifications,
            ["jobId": .string(JobID.random().description), "signedPayload": .string(signedPayload)],
            type: .billingStoreNotification
        )
    }

    /// A user with a profile that has a chart (consumption requires one).
    func userWithProfile(chart: Bool = true) async throws -> (UserID, ProfileID) {
        let user = UserID.random()
        let profile = ProfileID.random()
        try await pool.withTransaction { database in
            try database.execute("INSERT INTO users (id) VALUES ($1)", [user.uuid])
            try database.execute(
                """
                INSERT INTO user_profiles (id, user_id, name, birth_date, birth_time, timezone, latitude, longitude)
                VALUES ($1, $2, 'Me', '1990-10-07', '15:00', 'Europe/Kyiv', 50.45, 30.52)
                """,
                [profile.uuid, user.uuid]
            )
            if chart {
                try database.execute(
                    """
                    INSERT INTO birth_charts (id, profile_id, chart_data, house_system, input_digest, engine_version)
                    VALUES ($1, $2, '{}', 'placidus', 'test', 'test')
                    """,
                    [UUID(), profile.uuid]
                )
            }
        }
        return (user, profile)
    }

    func balance(_ user: UserID) async throws -> CreditBalance {
        try await pool.withConnection { try CreditLedger.balance(userID: user, database: $0) }
    }

    static func credits(_ outcome: JobOutcome) -> [String] {
        outcome.result?["credits"]?.arrayValue?.compactMap(\.stringValue) ?? []
    }

    static func failureCode(_ outcome: JobOutcome) -> String? {
        if case .failed(let error) = outcome.status { return error.code }
        return nil
    }

    // MARK: - Purchases

    @Test func aPurchaseIssuesItsCreditsOnceAndARepeatAnswersTheSame() async throws {
        let (user, _) = try await userWithProfile()
        let (jws, id) = try Self.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        let first = try await purchase(jws, user: user)
        #expect(first.status == .succeeded)
        #expect(Self.credits(first).count == 5)
        #expect(first.messages.first?.routingKey == "billing.credits-issued")
        let again = try await purchase(jws, user: user)
        #expect(again.status == .succeeded)
        #expect(again.result?["alreadyProcessed"] == true)
        #expect(Set(Self.credits(again)) == Set(Self.credits(first)))
        let balance = try await balance(user)
        #expect(balance.available == 5 && balance.issued == 5 && balance.balanced)
        #expect(balance.availableByArea["any"] == 5)
        let records = try await pool.withConnection { database in
            try database.query(
                "SELECT count(*)::int AS n, min(price_usd)::text AS price FROM purchase_records WHERE transaction_id = $1",
                [id]
            ).first
        }
        #expect(try records?.decode(Int.self, "n") == 1)
        #expect(try records?.decode(String.self, "price") == "19.99")
    }

    @Test func anAreaPurchaseGrantsOneCreditOfItsArea() async throws {
        let (user, _) = try await userWithProfile()
        let (jws, _) = try Self.signedPurchase("com.astrosvitla.astroinsight.report.career", user: user)
        let outcome = try await purchase(jws, user: user)
        #expect(Self.credits(outcome).count == 1)
        #expect(outcome.result?["area"] == "career")
        #expect(try await balance(user).availableByArea == ["career": 1])
    }

    @Test func aQuantityMultipliesTheCredits() async throws {
        let (user, _) = try await userWithProfile()
        let (jws, _) = try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user, quantity: 3)
        #expect(Self.credits(try await purchase(jws, user: user)).count == 3)
    }

    @Test func anotherUserCannotRedeemATransaction() async throws {
        let (owner, _) = try await userWithProfile()
        let (thief, _) = try await userWithProfile()
        // Bought without an account token: refused by default, so a leaked or guessed transaction
        // cannot be redeemed by whoever sends it first.
        let (plain, _) = try Self.signedPurchase("com.astrosvitla.report.credit.single", user: nil)
        #expect(Self.failureCode(try await purchase(plain, user: thief)) == "account-token-missing")
        // Where the operator allows such tokens, the first redeemer owns it.
        #expect(try await purchase(plain, user: owner, handler: Self.verifyWithoutAccountToken).status == .succeeded)
        let stolen = try await purchase(plain, user: thief, handler: Self.verifyWithoutAccountToken)
        #expect(Self.failureCode(stolen) == "transaction-owned-by-another-user")
        #expect(stolen.messages.first?.routingKey == "billing.purchase-rejected")
        // Bought for the owner's account: refused to anyone else before anything is written.
        let (tokened, id) = try Self.signedPurchase("com.astrosvitla.report.credit.single", user: owner)
        #expect(Self.failureCode(try await purchase(tokened, user: thief)) == "account-mismatch")
        #expect(try await balance(thief).available == 0)
        let rows = try await pool.withConnection { database in
            try database.query("SELECT 1 FROM purchase_records WHERE transaction_id = $1", [id]).count
        }
        #expect(rows == 0)
    }

    @Test func rejectedPurchasesWriteNothing() async throws {
        let (user, _) = try await userWithProfile()
        let foreign = try DevPKI.generate(
            commonNamePrefix: "Foreign",
            notValidBefore: Date().addingTimeInterval(-86_400),
            notValidAfter: Date().addingTimeInterval(86_400 * 30)
        )
        let cases: [(String, String)] = [
            (
                try Self.signedPurchase("com.astrosvitla.astroinsight.subscription.monthly", user: user).jws,
                "unknown-product"
            ),
            (
                try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user, revoked: true).jws,
                "transaction-revoked"
            ),
            (
                try Self.signedPurchase("com.astrosvitla.report.credit.pack10", user: user, signer: foreign.signer).jws,
                "untrusted-certificate-chain"
            ),
            ("not a token", "malformed-jws"),
        ]
        for (jws, code) in cases {
            let outcome = try await purchase(jws, user: user)
            #expect(Self.failureCode(outcome) == code)
            #expect(outcome.messages.map(\.routingKey) == ["billing.purchase-rejected"])
        }
        #expect(try await balance(user).issued == 0)
    }

    @Test func aRestoredTransactionIsRecordedWithoutNewCredits() async throws {
        let (user, _) = try await userWithProfile()
        let (original, originalID) = try Self.signedPurchase("com.astrosvitla.astroinsight.report.general", user: user)
        _ = try await purchase(original, user: user)
        let (restore, _) = try Self.signedPurchase(
            "com.astrosvitla.astroinsight.report.general",
            user: user,
            originalID: originalID
        )
        let outcome = try await purchase(restore, user: user)
        #expect(outcome.status == .succeeded)
        #expect(outcome.result?["restoredFrom"]?.stringValue == originalID)
        #expect(Self.credits(outcome).isEmpty)
        #expect(try await balance(user).available == 1)
    }

    /// Issue 14: a restore (T2, original T1) delivered before T1 granted a second credit when T1 came.
    @Test func aRestoreDeliveredBeforeItsOriginalGrantsOnce() async throws {
        let (user, _) = try await userWithProfile()
        let originalID = DevTransactions.newTransactionID()
        let (restore, restoreID) = try Self.signedPurchase(
            "com.astrosvitla.astroinsight.report.career",
            user: user,
            originalID: originalID
        )
        let (original, _) = try Self.signedPurchase(
            "com.astrosvitla.astroinsight.report.career",
            user: user,
            id: originalID
        )
        let first = try await purchase(restore, user: user)
        #expect(Self.credits(first).count == 1)
        let second = try await purchase(original, user: user)
        #expect(second.status == .succeeded)
        #expect(Self.credits(second).isEmpty)
        #expect(second.result?["restoredFrom"]?.stringValue == restoreID)
        let balance = try await balance(user)
        #expect(balance.issued == 1 && balance.available == 1 && balance.balanced)
    }

    /// Originals and restores of one purchase delivered at the same moment grant once per purchase.
    @Test func concurrentOriginalsAndRestoresGrantOncePerPurchase() async throws {
        let (user, _) = try await userWithProfile()
        var tokens: [String] = []
        let purchases = 12
        for _ in 0..<purchases {
            let originalID = DevTransactions.newTransactionID()
            tokens.append(
                try Self.signedPurchase("com.astrosvitla.astroinsight.report.health", user: user, id: originalID).jws
            )
            for _ in 0..<2 {
                tokens.append(
                    try Self.signedPurchase(
                        "com.astrosvitla.astroinsight.report.health",
                        user: user,
                        originalID: originalID
                    )
                    .jws
                )
            }
        }
        tokens.shuffle()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for token in tokens {
                group.addTask {
                    // A unique violation of a race that slipped past the lock would be retried by
                    // the runtime; here one retry stands in for that.
                    do {
                        _ = try await purchase(token, user: user)
                    } catch let error as PostgresError where error.isUniqueViolation {
                        _ = try await purchase(token, user: user)
                    }
                }
            }
            try await group.waitForAll()
        }
        let balance = try await balance(user)
        #expect(balance.issued == purchases, "issued \(balance.issued) credits for \(purchases) purchases")
        #expect(balance.available == purchases && balance.balanced)
        // The schema itself refuses a second grant for one original purchase.
        let granted = try await pool.withConnection { database in
            try database.query(
                "SELECT original_transaction_id FROM purchase_records WHERE user_id = $1 AND restored_from IS NULL LIMIT 1",
                [user.uuid]
            ).first?.decode(String.self, "original_transaction_id")
        }
        let original = try #require(granted)
        await #expect(throws: PostgresError.self) {
            try await pool.withConnection { database in
                try database.execute(
                    """
                    INSERT INTO purchase_records (id, user_id, transaction_id, original_transaction_id, product_id,
                        purchase_date, price_usd, credit_amount, environment, transaction_payload)
                    VALUES (gen_random_uuid(), $1, $2, $3, 'com.astrosvitla.astroinsight.report.health', now(), 5.99, 1,
                        'Sandbox', '{}')
                    """,
                    [user.uuid, DevTransactions.newTransactionID(), original]
                )
            }
        }
    }

    /// Signed values are outside input: bounded before they multiply credits or reach a column.
    @Test func quantitiesAndDatesOutOfRangeAreRefusedWithAReason() async throws {
        let (user, _) = try await userWithProfile()
        for (product, quantity) in [
            ("com.astrosvitla.report.credit.pack5", 11), ("com.astrosvitla.report.credit.single", 0),
            ("com.astrosvitla.report.credit.single", -3), ("com.astrosvitla.report.credit.pack10", 1 << 62),
            ("com.astrosvitla.astroinsight.report.career", 2),
        ] {
            let (jws, id) = try Self.signedPurchase(product, user: user, quantity: quantity)
            let outcome = try await purchase(jws, user: user)
            #expect(Self.failureCode(outcome) == "invalid-quantity", "quantity \(quantity) of \(product)")
            let rows = try await pool.withConnection { database in
                try database.query("SELECT 1 FROM purchase_records WHERE transaction_id = $1", [id]).count
            }
            #expect(rows == 0)
        }
        for (field, value) in [("purchaseDate", 1e300), ("revocationDate", 1e300), ("expiresDate", -5.0)] {
            guard
                case .object(var payload) = DevTransactions.transaction(
                    id: DevTransactions.newTransactionID(),
                    originalID: DevTransactions.newTransactionID(),
                    productID: "com.astrosvitla.report.credit.single",
                    userID: user.description,
                    quantity: 1,
                    environment: "Sandbox",
                    bundleID: BillingDefaults.bundleID,
                    at: Date(),
                    revoked: false
                )
            else { return }
            payload[field] = .number(value)
            let outcome = try await purchase(try Self.pki.signer.sign(JSONValue.object(payload)), user: user)
            #expect(Self.failureCode(outcome) == "malformed-payload", "\(field) \(value)")
        }
        #expect(try await balance(user).issued == 0)
    }

    @Test func aBodyWithNeitherTokenNorIdIsDeadLettered() async throws {
        await #expect(throws: JobRejection.self) {
            _ = try await run(
                Self.verify,
                ["jobId": .string(JobID.random().description), "userId": .string(UserID.random().description)],
                type: .billingVerifyPurchase
            )
        }
    }

    // MARK: - Consumption and refunds

    @Test func consumptionTakesTheAreaCreditFirstThenAnyAreaThenRefuses() async throws {
        let (user, profile) = try await userWithProfile()
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user).jws,
            user: user
        )
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.astroinsight.report.career", user: user).jws,
            user: user
        )
        let career = try await request(user, profile, .career)
        #expect(career.status == .succeeded)
        #expect(career.messages.map(\.routingKey) == ["billing.credit-consumed", "report.generate"])
        let generate = try JSONCoding.decoder.decode(ReportGenerateRequest.self, from: career.messages[1].body)
        #expect(generate.area == .career && generate.profileID == profile)
        #expect(try await balance(user).availableByArea == ["any": 1])
        // A career-only credit cannot pay for health; the any-area one can.
        let health = try await request(user, profile, .health, .uk)
        #expect(health.status == .succeeded)
        let none = try await request(user, profile, .finances)
        #expect(Self.failureCode(none) == "insufficient-credits")
        #expect(none.messages.map(\.routingKey) == ["report.failed"])
        let balance = try await balance(user)
        #expect(balance.available == 0 && balance.consumed == 2 && balance.balanced)
    }

    @Test func oneReportIsNeverPaidTwice() async throws {
        let (user, profile) = try await userWithProfile()
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.report.credit.pack5", user: user).jws,
            user: user
        )
        let firstJob = JobID.random()
        let first = try await request(user, profile, .general, jobID: firstJob)
        let second = try await request(user, profile, .general)
        #expect(second.status == .succeeded)
        #expect(second.result?["inProgress"] == true)
        #expect(second.messages.isEmpty)
        #expect(try await balance(user).available == 4)
        // Once the report exists, a new request returns it.
        let credit = try #require(first.result?["creditId"]?.stringValue)
        let transaction = try #require(first.result?["transactionId"]?.stringValue)
        let reportID = UUID()
        _ = try await pool.withConnection { database in
            try database.execute(
                """
                INSERT INTO report_purchases (id, user_id, profile_id, area, language, report_text, word_count, price,
                    currency, transaction_id, credit_id, purchase_date, generated_at, writer)
                VALUES ($1, $2, $3, 'general', 'en', 'text', 1, 9.99, 'USD', $4, $5::uuid, now(), now(), 'test')
                """,
                [reportID, user.uuid, profile.uuid, transaction, credit]
            )
        }
        let third = try await request(user, profile, .general)
        #expect(third.result?["reportId"]?.stringValue == reportID.uuidString.lowercased())
        #expect(third.messages.map(\.routingKey) == ["report.completed"])
        #expect(try await balance(user).available == 4)
        // And a delivered report's credit is not refunded.
        do {
            _ = try await refund(credit, requestJob: firstJob)
            Issue.record("refunded the credit of a delivered report")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "report-already-delivered")
        }
    }

    @Test func requestsForAProfileOfAnotherUserOrWithoutAChartAreRejected() async throws {
        let (user, _) = try await userWithProfile()
        let (_, otherProfile) = try await userWithProfile()
        let (_, chartless) = try await userWithProfile(chart: false)
        do {
            _ = try await request(user, otherProfile, .career)
            Issue.record("consumed for another user's profile")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "profile-not-found")
        }
        let (chartlessOwner, ownChartless) = try await userWithProfile(chart: false)
        do {
            _ = try await request(chartlessOwner, ownChartless, .career)
            Issue.record("consumed for a profile without a chart")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "chart-not-found")
        }
        do {
            _ = try await request(user, chartless, .career)
            Issue.record("accepted a profile of another user")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "profile-not-found")
        }
    }

    /// Issue 14: a refund must name what its credit was spent on; a forged one changes nothing.
    @Test func aForgedRefundIsRefusedByTheHandler() async throws {
        let (user, profile) = try await userWithProfile()
        let (_, otherProfile) = try await userWithProfile()
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user).jws,
            user: user
        )
        let requestJob = JobID.random()
        let consumed = try await request(user, profile, .career, jobID: requestJob)
        let credit = try #require(consumed.result?["creditId"]?.stringValue)
        for (forgedUser, forgedProfile, area, language) in [
            (UserID.random(), profile, "career", "en"), (user, otherProfile, "career", "en"),
            (user, profile, "health", "en"), (user, profile, "career", "uk"),
        ] {
            do {
                _ = try await refund(
                    credit,
                    requestJob: requestJob,
                    user: forgedUser,
                    profile: forgedProfile,
                    area: area,
                    language: language
                )
                Issue.record("a forged refund was applied")
            } catch let rejection as JobRejection {
                #expect(rejection.code == "credit-mismatch")
            }
        }
        let balance = try await balance(user)
        #expect(balance.available == 0 && balance.refunded == 0 && balance.balanced)
        // The genuine one still works.
        #expect(
            try await refund(credit, requestJob: requestJob).messages.map(\.routingKey) == ["billing.credit-refunded"]
        )
    }

    @Test func aRefundGivesTheCreditBackOnce() async throws {
        let (user, profile) = try await userWithProfile()
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user).jws,
            user: user
        )
        let requestJob = JobID.random()
        let consumed = try await request(user, profile, .career, jobID: requestJob)
        let credit = try #require(consumed.result?["creditId"]?.stringValue)
        #expect(try await balance(user).available == 0)
        let refunded = try await refund(credit, requestJob: requestJob)
        #expect(refunded.messages.map(\.routingKey) == ["billing.credit-refunded"])
        #expect(try await balance(user).available == 1)
        // A second copy of the refund changes nothing.
        let again = try await refund(credit, requestJob: requestJob)
        #expect(again.result?["alreadyRefunded"] == true)
        #expect(again.messages.isEmpty)
        // The credit is spent again by a new request; the old refund still changes nothing.
        let next = try await request(user, profile, .career)
        #expect(next.status == .succeeded)
        #expect(try await refund(credit, requestJob: requestJob).result?["alreadyRefunded"] == true)
        let balance = try await balance(user)
        #expect(balance.available == 0 && balance.consumed == 2 && balance.refunded == 1 && balance.balanced)
        // A refund naming a request that never spent it is refused.
        do {
            _ = try await refund(credit, requestJob: .random())
            Issue.record("refunded for a request that did not spend it")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "credit-not-consumed-by-request")
        }
        do {
            _ = try await refund(UUID().uuidString, requestJob: requestJob)
            Issue.record("refunded a credit that does not exist")
        } catch let rejection as JobRejection {
            #expect(rejection.code == "credit-not-found")
        }
    }

    @Test func theLedgerIsAppendOnly() async throws {
        let (user, _) = try await userWithProfile()
        _ = try await purchase(
            try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user).jws,
            user: user
        )
        for statement: SQL in [
            "UPDATE credit_ledger SET entry = 'refunded' WHERE user_id = $1",
            "DELETE FROM credit_ledger WHERE user_id = $1",
        ] {
            let outcome = await postgresOutcome {
                try await pool.withConnection { try $0.execute(statement, [user.uuid]) }
            }
            guard case .failure(let error as PostgresError) = outcome else {
                Issue.record("the ledger accepted \(statement.text)")
                continue
            }
            #expect(error.message.contains("append-only"))
        }
        #expect(try await balance(user).issued == 1)
    }

    // MARK: - Notifications

    func signedNotification(
        _ type: String,
        about transactionJWS: String,
        uuid: UUID = UUID(),
        at signedDate: Date = Date()
    ) throws -> String {
        try Self.pki.signer.sign(
            DevTransactions.notification(
                type: type,
                uuid: uuid,
                signedTransaction: transactionJWS,
                environment: "Sandbox",
                bundleID: BillingDefaults.bundleID,
                at: signedDate
            )
        )
    }

    @Test func aRefundRevokesUnspentCreditsRecordsDebtsAndAReversalUndoesIt() async throws {
        let (user, profile) = try await userWithProfile()
        let (jws, id) = try Self.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        _ = try await purchase(jws, user: user)
        _ = try await request(user, profile, .career)
        _ = try await request(user, profile, .health)
        let refundUUID = UUID()
        let refund = try await notify(try signedNotification("REFUND", about: jws, uuid: refundUUID))
        #expect(refund.messages.map(\.routingKey) == ["billing.credits-revoked"])
        #expect(refund.result?["credits"]?.arrayValue?.count == 3)
        #expect(refund.result?["debts"]?.arrayValue?.count == 2)
        var balance = try await balance(user)
        #expect(balance.available == 0 && balance.revoked == 3 && balance.openDebts == 2 && balance.balanced)
        // Apple redelivers: nothing changes.
        let duplicate = try await notify(try signedNotification("REFUND", about: jws, uuid: refundUUID))
        #expect(duplicate.result?["action"] == "duplicate")
        #expect(duplicate.messages.isEmpty)
        #expect(try await self.balance(user).revoked == 3)
        // Revoked credits cannot be spent.
        #expect(Self.failureCode(try await request(user, profile, .general)) == "insufficient-credits")
        let reversed = try await notify(try signedNotification("REFUND_REVERSED", about: jws))
        #expect(reversed.messages.map(\.routingKey) == ["billing.credits-restored"])
        balance = try await self.balance(user)
        #expect(balance.available == 3 && balance.restored == 3 && balance.openDebts == 0 && balance.balanced)
        let revokedAt = try await pool.withConnection { database in
            try database.query("SELECT revoked_at FROM purchase_records WHERE transaction_id = $1", [id]).first?
                .decode(Date?.self, "revoked_at")
        }
        #expect(revokedAt == nil)
    }

    /// A restore delivered before its original holds the purchase's credits; a refund naming the
    /// original (recorded as a restore of it, or never recorded here at all) revokes them.
    @Test(arguments: [true, false])
    func aRefundOfAnOriginalWhoseRestoreGrantedRevokesTheCredits(originalRecorded: Bool) async throws {
        let (user, _) = try await userWithProfile()
        let originalID = DevTransactions.newTransactionID()
        let product = "com.astrosvitla.astroinsight.report.career"
        let (restore, restoreID) = try Self.signedPurchase(product, user: user, originalID: originalID)
        let (original, _) = try Self.signedPurchase(product, user: user, id: originalID)
        #expect(Self.credits(try await purchase(restore, user: user)).count == 1)
        if originalRecorded { _ = try await purchase(original, user: user) }
        let refund = try await notify(try signedNotification("REFUND", about: original))
        #expect(refund.result?["action"] == "revoked")
        #expect(refund.result?["credits"]?.arrayValue?.count == 1)
        #expect(refund.result?["note"]?.stringValue?.contains(restoreID) == true)
        var balance = try await balance(user)
        #expect(balance.available == 0 && balance.revoked == 1 && balance.balanced, "\(balance)")
        let reversed = try await notify(try signedNotification("REFUND_REVERSED", about: original))
        #expect(reversed.result?["credits"]?.arrayValue?.count == 1)
        balance = try await self.balance(user)
        #expect(balance.available == 1 && balance.restored == 1 && balance.balanced, "\(balance)")
    }

    /// Without the user's consent a CONSUMPTION_REQUEST records its answer, sends nothing and
    /// says why; the answer is still computed from the ledger (a credit spent on a report not
    /// stored yet is not consumption).
    @Test func aConsumptionRequestWithoutConsentRecordsTheAnswerAndWhyNothingIsSent() async throws {
        let (user, profile) = try await userWithProfile()
        let (jws, _) = try Self.signedPurchase("com.astrosvitla.report.credit.pack5", user: user)
        _ = try await purchase(jws, user: user)
        _ = try await request(user, profile, .career)
        let uuid = UUID()
        let outcome = try await notify(try signedNotification("CONSUMPTION_REQUEST", about: jws, uuid: uuid))
        #expect(
            outcome.messages.map(\.routingKey) == ["billing.consumption-requested", "billing.consumption-answered"]
        )
        #expect(outcome.result?["action"] == "consumption-declined-no-consent")
        let row = try await pool.withConnection { database in
            try database.query(
                "SELECT state, reason, request_body::text AS body FROM consumption_answers WHERE notification_uuid = $1",
                [uuid]
            ).first.map {
                (
                    try $0.decode(String.self, "state"), try $0.decode(String?.self, "reason"),
                    try $0.decode(String.self, "body")
                )
            }
        }
        #expect(row?.0 == "declined-no-consent")
        #expect(row?.1?.contains("not consented") == true)
        let body = try #require(row?.2)
        #expect(body.contains("\"deliveryStatus\": \"DELIVERED\"") || body.contains("\"deliveryStatus\":\"DELIVERED\""))
        #expect(body.contains("\"consumptionPercentage\": 0") || body.contains("\"consumptionPercentage\":0"))
    }

    @Test func aForgedOrUnknownNotificationChangesNothing() async throws {
        let (user, _) = try await userWithProfile()
        let (jws, _) = try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user)
        _ = try await purchase(jws, user: user)
        let foreign = try DevPKI.generate(
            notValidBefore: Date().addingTimeInterval(-86_400),
            notValidAfter: Date().addingTimeInterval(86_400 * 30)
        )
        let forged = try foreign.signer.sign(
            DevTransactions.notification(
                type: "REFUND",
                signedTransaction: jws,
                environment: "Sandbox",
                bundleID: BillingDefaults.bundleID,
                at: Date()
            )
        )
        await #expect(throws: JobRejection.self) { _ = try await notify(forged) }
        #expect(try await balance(user).available == 1)
        // A refund for a transaction never redeemed here is recorded and does nothing.
        let (unknown, _) = try Self.signedPurchase("com.astrosvitla.report.credit.single", user: user)
        let outcome = try await notify(try signedNotification("REFUND", about: unknown))
        #expect(outcome.result?["action"] == "recorded")
        #expect(try await balance(user).available == 1)
    }
}
