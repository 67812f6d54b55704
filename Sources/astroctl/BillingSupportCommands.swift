import AppStoreServerAPI
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Billing
import Foundation
import Postgres
import StoreKitVerification
import UUIDText

// Support look-ups and missed-notification tools (issue 18, parts 3 and 4). The App Store calls
// follow App Store Server API 1.x as Apple documents it (see AppStoreServerAPI/SupportEndpoints).

/// The App Store Server API client and verifier, configured as the billing-worker is (its
/// BILLING_* and APPSTORE_API_* variables).
enum SupportSetup {
    static func load() throws -> (AppStoreServerAPIClient, SignedDataVerifier) {
        let billing: BillingConfiguration
        do {
            billing = try BillingConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
        } catch {
            throw CommandFailure(
                "\(error) (astroctl reads the billing-worker's BILLING_* and APPSTORE_API_* variables)"
            )
        }
        guard let appStore = billing.appStore else {
            throw CommandFailure(
                "no App Store Server API key: set APPSTORE_API_KEY_ID, APPSTORE_API_ISSUER_ID and "
                    + "APPSTORE_API_PRIVATE_KEY_FILE (and APPSTORE_API_BASE_URL for a fake)"
            )
        }
        return (appStore, SignedDataVerifier(policy: billing.policy))
    }

    static func userID(_ text: String) throws -> UserID {
        guard text.utf8.count <= 64, let id = UserID(text) else {
            throw ValidationError("--user: expected a UUID, got \(InputQuote.short(text))")
        }
        return id
    }

    static func printJSON<T: Encodable>(_ value: T) throws {
        print(String(decoding: try JSONCoding.encoder.encode(value), as: UTF8.self))
    }

    static func date(_ date: Date?) -> String { date.map { ISO8601.string(from: $0) } ?? "-" }

    /// An App Store error as one line; exit status 1.
    static func failure(_ error: AppStoreAPIError, _ what: String) -> CommandFailure {
        CommandFailure("\(what): \(error.code): \(error.description)")
    }
}

struct BillingOrder: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "order",
        abstract: "Look up an order id from a customer's receipt: Apple's transactions and where their credits went.",
        discussion: """
            Calls Look Up Order ID (production only: the sandbox has no order ids), verifies \
            every signed transaction, and shows for each the user it was credited to, the \
            credits it granted and each credit's fate: available, spent (on which report), \
            refunded back, revoked. Exit status 1 when Apple does not know the order id.
            """
    )

    @Argument(help: "The order id from the receipt (letters and digits, e.g. MK5TTTVWJH).") var orderID: String
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard !orderID.isEmpty, orderID.utf8.count <= 64,
            orderID.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
            )
        else {
            throw ValidationError(
                "order id: expected 1 to 64 ASCII letters and digits, got \(InputQuote.short(orderID))"
            )
        }
    }

    func run() async throws {
        let (appStore, verifier) = try SupportSetup.load()
        let report: SupportLookups.OrderReport
        do {
            report = try await connection.withPool(size: 1) { pool in
                try await SupportLookups.order(orderID, appStore: appStore, verifier: verifier, pool: pool)
            }
        } catch let error as AppStoreAPIError {
            throw SupportSetup.failure(error, "order \(orderID)")
        }
        if json {
            try SupportSetup.printJSON(report)
        } else {
            print("order \(orderID): \(report.status), \(report.transactions.count) transaction(s)")
            for transaction in report.transactions { Self.printTransaction(transaction) }
        }
        if report.status != "valid" { throw ExitCode(1) }
    }

    static func printTransaction(_ transaction: SupportLookups.OrderTransaction) {
        if let failure = transaction.verificationFailure {
            print("  a signed transaction did NOT verify (\(failure)); not shown")
            return
        }
        var line = "  transaction \(transaction.transactionID ?? "?")"
        if let original = transaction.originalTransactionID, original != transaction.transactionID {
            line += " (original \(original))"
        }
        line += "  \(transaction.productID ?? "?")  bought \(SupportSetup.date(transaction.purchaseDate))"
        if let quantity = transaction.quantity { line += "  ×\(quantity)" }
        if let revoked = transaction.revocationDate { line += "  REFUNDED by Apple \(SupportSetup.date(revoked))" }
        print(Terminal.safe(line))
        guard let ledger = transaction.ledger else {
            print("    not in our ledger: never redeemed here")
            return
        }
        var record = "    credited to user \(ledger.userID): \(ledger.creditsGranted) credit(s)"
        if ledger.grantedBy != transaction.transactionID { record += " (granted by \(ledger.grantedBy))" }
        if let revoked = ledger.revokedAt {
            record += "; revoked \(SupportSetup.date(revoked)) (\(ledger.revocationReason ?? ""))"
        }
        print(Terminal.safe(record))
        for credit in ledger.credits {
            var text = "      credit \(credit.creditID.prefix(8))  \(credit.state)"
            if let report = credit.reportID {
                text += " on report \(report) (\(credit.reportArea ?? "?")/\(credit.reportLanguage ?? "?"))"
            } else if credit.spentWithoutReport {
                text += " (no report stored yet)"
            }
            if credit.openDebt { text += "  OPEN DEBT (refunded after it was spent)" }
            if !credit.entries.isEmpty { text += "  [\(credit.entries.joined(separator: "; "))]" }
            print(Terminal.safe(text))
        }
    }
}

struct BillingHistory: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract:
            "A user's billing timeline: purchases, ledger entries, App Store notifications, consumption answers, reports.",
        discussion: "From our own tables only (no App Store call); oldest first, the newest --limit items."
    )

    @Option(help: "The user (UUID).") var user: String
    @Option(parsing: .unconditional, help: "At most this many items (1…5000).") var limit = 500
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard (1...SupportLookups.maxTimelineItems).contains(limit) else {
            throw ValidationError("--limit must be 1…\(SupportLookups.maxTimelineItems)")
        }
    }

    func run() async throws {
        let userID = try SupportSetup.userID(user)
        let limit = self.limit
        let items = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { try SupportLookups.timeline(userID: userID, limit: limit, database: $0) }
        }
        if json {
            try SupportSetup.printJSON(items)
            return
        }
        for item in items {
            var line =
                "\(ISO8601.string(from: item.at))  \(item.kind.padding(toLength: 18, withPad: " ", startingAt: 0))"
            if let transaction = item.transactionID { line += " tx \(transaction)" }
            line += "  \(item.detail)"
            print(Terminal.safe(line))
        }
        print("\(items.count) item(s) for user \(userID)")
    }
}

struct BillingRefunds: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refunds",
        abstract: "Apple's refund history for a user (Get Refund History v2), compared with our ledger.",
        discussion: """
            Asks with the user's newest transaction (or --transaction-id), reads every page, \
            verifies each refunded transaction and flags the refunds our ledger does not \
            show: missing-in-ledger (we still count it as paid: a notification was missed; \
            run `astroctl billing notifications recover`) or unknown-transaction (never \
            redeemed here). Exit status 1 when anything is flagged.
            """
    )

    @Option(help: "The user (UUID).") var user: String
    @Option(name: .customLong("transaction-id"), help: "Ask with this transaction id instead.")
    var transactionID: String?
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        if let transactionID {
            guard !transactionID.isEmpty, transactionID.utf8.count <= 64,
                transactionID.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else { throw ValidationError("--transaction-id: expected 1 to 64 digits") }
        }
    }

    func run() async throws {
        let userID = try SupportSetup.userID(user)
        let (appStore, verifier) = try SupportSetup.load()
        let transactionID = self.transactionID
        let report: SupportLookups.RefundReport?
        do {
            report = try await connection.withPool(size: 1) { pool in
                try await SupportLookups.refunds(
                    userID: userID,
                    transactionID: transactionID,
                    appStore: appStore,
                    verifier: verifier,
                    pool: pool
                )
            }
        } catch let error as AppStoreAPIError {
            throw SupportSetup.failure(error, "refund history")
        }
        guard let report else {
            throw CommandFailure("user \(userID) has no purchase to ask Apple with; pass --transaction-id")
        }
        if json {
            try SupportSetup.printJSON(report)
        } else {
            print(
                "refund history of user \(userID) (asked with \(report.askedWith), \(report.pages) page(s)): "
                    + "\(report.refunds.count) refund(s), \(report.flagged) flagged"
            )
            for line in report.refunds {
                var text =
                    "  \(line.flagged ? "FLAG" : "ok  ") \(line.status.padding(toLength: 19, withPad: " ", startingAt: 0))"
                text +=
                    " tx \(line.transactionID)  \(line.productID ?? "?")  refunded \(SupportSetup.date(line.revocationDate))"
                if let user = line.ledgerUserID, user != userID.description { text += "  (credited to user \(user))" }
                print(Terminal.safe(text))
            }
            for transaction in report.revokedHereOnly {
                print(Terminal.safe("  note revoked here, not in Apple's refunds: tx \(transaction) (a REVOKE?)"))
            }
            for reason in report.unverified { print("  a refunded transaction did NOT verify (\(reason))") }
        }
        if report.flagged > 0 { throw ExitCode(1) }
    }
}

struct BillingNotifications: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "App Store Server Notifications: recover missed ones, test the whole delivery path.",
        subcommands: [BillingNotificationsRecover.self, BillingNotificationsTest.self]
    )
}

struct BillingNotificationsRecover: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recover",
        abstract: "Publish billing.recover-notifications for a window and wait for what it applied.",
        discussion: """
            The billing-worker reads Get Notification History from --since to --until (now), \
            verifies each notification and applies those never received through the live \
            handler (each once: already-seen ones change nothing). Apple keeps 180 days of \
            history in production, 30 in the sandbox; an older --since is clamped.

            Examples:
              astroctl billing notifications recover --since 2d
              astroctl billing notifications recover --since 2026-11-20T00:00:00Z --until 2026-11-21T00:00:00Z
            """
    )

    @Option(help: "The window's start: a duration back (30m, 12h, 7d) or an ISO 8601 time.") var since: String
    @Option(help: "The window's end (ISO 8601 or a duration back; default: now).") var until: String?
    @Option(parsing: .unconditional, help: "Give up waiting after this many seconds (1…3600).") var timeout = 120
    @Flag(help: "Print the event as JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard (1...3600).contains(timeout) else { throw ValidationError("--timeout must be 1…3600") }
    }

    func run() async throws {
        let now = Date()
        let start = try SinceOption.parse(since, now: now)
        let end = try until.map { try SinceOption.parse($0, now: now) }
        guard start < (end ?? now) else { throw ValidationError("--since must be before --until (or now)") }
        guard (end ?? now).timeIntervalSince(start) <= RecoverNotificationsRequest.maxWindow else {
            throw ValidationError("the window is longer than Apple's 180 days of history; split it")
        }
        let jobID = JobID.random()
        let request = RecoverNotificationsRequest(jobID: jobID, since: start, until: end, trigger: .operatorRequest)
        let event = try await EventWaiter.publishAndWait(
            JobCommands.message(
                .billingRecoverNotifications,
                jobID: jobID,
                body: try JSONCoding.encoder.encode(request)
            ),
            jobID: jobID,
            events: [.billingNotificationsRecovered, .billingRecoverNotificationsFailed],
            timeout: .seconds(timeout),
            connection: connection
        )
        let recovered = event["type"]?.stringValue == EventType.billingNotificationsRecovered.rawValue
        if json {
            print(String(decoding: try JSONCoding.encoder.encode(event), as: UTF8.self))
        } else if recovered, case .object(let fields) = event {
            func count(_ name: String) -> String {
                switch fields[name] {
                case .string(let text)?: return text
                case .number(let number)?: return String(Int(number))
                default: return "?"
                }
            }
            print(
                "recovered \(count("since"))…\(count("until")): \(count("fetched")) in Apple's history, "
                    + "\(count("applied")) applied, \(count("alreadySeen")) already seen, \(count("rejected")) rejected"
            )
        } else {
            print(String(decoding: try JSONCoding.encoder.encode(event), as: UTF8.self))
        }
        if !recovered { throw ExitCode(1) }
    }
}

struct BillingNotificationsTest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Ask Apple for a TEST notification and wait until the billing-worker has recorded it.",
        discussion: """
            Calls Request a Test Notification, reads the notification's id from Get Test \
            Notification Status, then waits (--timeout) for it in store_notifications: proof \
            that Apple → gateway (POST /v1/appstore/notifications) → broker → billing-worker \
            → database works. If it does not arrive, prints Apple's send attempts (e.g. \
            NO_RESPONSE, UNSUCCESSFUL_HTTP_RESPONSE_CODE) and exits 1.
            """
    )

    @Option(parsing: .unconditional, help: "Wait at most this many seconds (1…600).") var timeout = 60
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard (1...600).contains(timeout) else { throw ValidationError("--timeout must be 1…600") }
    }

    func run() async throws {
        let (appStore, verifier) = try SupportSetup.load()
        let token: String
        let status: TestNotificationStatus
        do {
            token = try await appStore.requestTestNotification()
            status = try await appStore.testNotificationStatus(token: token)
        } catch {
            throw SupportSetup.failure(error, "test notification")
        }
        let uuid: UUID
        do {
            let verified = try await verifier.verifyNotification(status.signedPayload)
            guard let text = verified.payload.notificationUUID, let parsed = UUID(text: text) else {
                throw CommandFailure("Apple's TEST notification has no notificationUUID")
            }
            uuid = parsed
        } catch let error as VerificationFailure {
            throw CommandFailure(
                "Apple's TEST notification does not verify here (\(error.reason.rawValue)): \(error.detail)"
            )
        }
        let deadline = ContinuousClock.now + .seconds(timeout)
        let received: (Date, String)? = try await connection.withPool(size: 1) { pool in
            while true {
                let row = try await pool.withConnection { database in
                    try database.query(
                        "SELECT received_at, outcome ->> 'action' AS action FROM store_notifications WHERE notification_uuid = $1",
                        [uuid]
                    ).first.map {
                        (try $0.decode(Date.self, "received_at"), try $0.decode(String?.self, "action") ?? "")
                    }
                }
                if let row, row.1 != "processing" { return row }
                if ContinuousClock.now >= deadline { return nil }
                try await Task.sleep(for: .milliseconds(250))
            }
        }
        var result: [String: JSONValue] = [
            "testNotificationToken": .string(token), "notificationUUID": .string(uuid.lowercasedText),
            "received": .bool(received != nil),
        ]
        if let received {
            result["receivedAt"] = .string(ISO8601.string(from: received.0))
            result["action"] = .string(received.1)
            if json {
                try SupportSetup.printJSON(JSONValue.object(result))
            } else {
                print(
                    "TEST notification \(uuid.lowercasedText) received \(ISO8601.string(from: received.0)) "
                        + "and recorded (\(received.1)): the notification path works"
                )
            }
            return
        }
        // Not here in time: Apple's own record of its tries says where it broke.
        let attempts = (try? await appStore.testNotificationStatus(token: token).sendAttempts) ?? status.sendAttempts
        result["sendAttempts"] = .array(
            attempts.map {
                .object([
                    "attemptDate": $0.attemptDate.map { .number(Double($0)) } ?? .null,
                    "sendAttemptResult": $0.sendAttemptResult.map(JSONValue.string) ?? .null,
                ])
            }
        )
        if json {
            try SupportSetup.printJSON(JSONValue.object(result))
        } else {
            print("TEST notification \(uuid.lowercasedText) NOT recorded within \(timeout) s")
            if attempts.isEmpty { print("  Apple reports no send attempt yet") }
            for attempt in attempts {
                let when = attempt.attemptDate.map {
                    ISO8601.string(from: Date(timeIntervalSince1970: Double($0) / 1000))
                }
                print("  Apple's attempt \(when ?? "?"): \(attempt.sendAttemptResult ?? "?")")
            }
        }
        throw ExitCode(1)
    }
}
