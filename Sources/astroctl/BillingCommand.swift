import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import Billing
import Foundation
import Postgres
import StoreKitVerification
import X509

/// `astroctl billing …`: verify App Store tokens, look at a user's credits and ledger, and — for
/// development only — make a local PKI and sign test purchases with it.
struct BillingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "billing",
        abstract: "Verify App Store purchases, show credits and the ledger, sign development purchases.",
        subcommands: [
            BillingVerify.self, BillingCredits.self, BillingLedger.self, BillingPurchase.self, BillingDevPKI.self,
            BillingDevSign.self,
            BillingOrder.self, BillingHistory.self, BillingRefunds.self, BillingNotifications.self,
        ]
    )
}

/// Who a verification trusts: the flags of `verify`, with the worker's environment variables
/// as defaults.
struct VerificationOptions: ParsableArguments {
    @Option(
        name: .customLong("root"),
        help: "Trusted root certificate, DER or PEM (repeatable; default: Apple Root CA - G3)."
    )
    var roots: [String] = []

    @Option(name: .customLong("bundle-id"), help: "The app's bundle id (default: $BILLING_BUNDLE_ID or ours).")
    var bundleID: String?

    @Option(help: "Production, Sandbox, Xcode or LocalTesting (default: $BILLING_ENVIRONMENT, else Sandbox).")
    var environment: String?

    @Option(
        name: .customLong("app-apple-id"),
        parsing: .unconditional,
        help: "The app's Apple ID, required for Production."
    )
    var appAppleID: Int64?

    func policy() throws -> VerificationPolicy {
        let variables = ProcessInfo.processInfo.environment
        let name = environment ?? variables["BILLING_ENVIRONMENT"] ?? StoreEnvironment.sandbox.rawValue
        guard let storeEnvironment = StoreEnvironment(rawValue: name) else {
            throw ValidationError(
                "--environment: expected one of \(StoreEnvironment.allCases.map(\.rawValue).joined(separator: ", ")), got \(name)"
            )
        }
        let certificates: [Certificate]
        if roots.isEmpty {
            certificates = [VerificationPolicy.appleRootCAG3]
        } else {
            var loaded: [Certificate] = []
            for path in roots {
                do {
                    loaded += try VerificationPolicy.loadCertificates(fromFile: path)
                } catch {
                    throw ValidationError("--root \(path): \(error.message)")
                }
            }
            certificates = loaded
        }
        do {
            return try VerificationPolicy(
                trustedRoots: certificates,
                bundleID: bundleID ?? variables["BILLING_BUNDLE_ID"] ?? BillingDefaults.bundleID,
                environment: storeEnvironment,
                appAppleID: appAppleID ?? variables["BILLING_APP_APPLE_ID"].flatMap { Int64($0) }
            )
        } catch {
            throw ValidationError(error.message)
        }
    }
}

struct BillingVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify one signed transaction (or notification) read from standard input.",
        discussion: """
            Prints a JSON verdict and exits 0 whatever it is:
              {"valid": true, "transactionId": "…", "productId": "…", "reason": null}
              {"valid": false, "transactionId": null, "productId": null,
               "reason": "invalid-signature", …}

            A notification is valid only if it and the transaction inside it both verify.
            """
    )

    @OptionGroup var verification: VerificationOptions

    @Flag(help: "The input is a notification's signedPayload (or Apple's {\"signedPayload\": …} body).")
    var notification = false

    func run() async throws {
        let policy = try verification.policy()
        let input = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        let token = Self.token(from: input)
        let verifier = SignedDataVerifier(policy: policy)
        var verdict: [String: JSONValue] = [
            "valid": false, "transactionId": nil, "productId": nil, "reason": nil,
            "environment": .string(policy.environment.rawValue),
        ]
        do {
            if notification {
                let verified = try await verifier.verifyNotification(token)
                verdict["valid"] = true
                verdict["notificationType"] = verified.payload.notificationType.map(JSONValue.string) ?? .null
                verdict["notificationUUID"] = verified.payload.notificationUUID.map(JSONValue.string) ?? .null
                verdict["transactionId"] = verified.transaction.map { .string($0.transactionID) } ?? .null
                verdict["productId"] = verified.transaction?.payload.productId.map(JSONValue.string) ?? .null
            } else {
                let verified = try await verifier.verifyTransaction(token)
                verdict["valid"] = true
                verdict["transactionId"] = .string(verified.transactionID)
                verdict["productId"] = verified.payload.productId.map(JSONValue.string) ?? .null
            }
        } catch {
            verdict["reason"] = .string(error.reason.rawValue)
            verdict["detail"] = .string(error.detail)
        }
        print(String(decoding: try JSONCoding.encoder.encode(JSONValue.object(verdict)), as: UTF8.self))
    }

    /// The JWS itself, also accepted wrapped as Apple posts notifications.
    static func token(from input: String) -> String {
        let trimmed = input.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{"),
            case .object(let object)? = try? JSONDecoder().decode(JSONValue.self, from: Data(trimmed.utf8)),
            let payload = object["signedPayload"]?.stringValue
        {
            return payload
        }
        return trimmed
    }
}

struct BillingCredits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "credits",
        abstract: "A user's available credits by area, with the ledger's audit of them."
    )

    @Option(help: "The user (UUID).") var user: String
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let userID = UserID(user) else {
            throw ValidationError("--user: expected a UUID, got \(InputQuote.short(user))")
        }
        let balance = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { try CreditLedger.balance(userID: userID, database: $0) }
        }
        if json {
            print(String(decoding: try JSONCoding.encoder.encode(balance), as: UTF8.self))
            return
        }
        print("credits of user \(userID): \(balance.available) available")
        for area in ReportArea.allCases.map(\.rawValue) + ["any"] {
            print("  \(area.padding(toLength: 14, withPad: " ", startingAt: 0)) \(balance.availableByArea[area] ?? 0)")
        }
        print(
            "ledger: issued \(balance.issued) − consumed \(balance.consumed) + refunded \(balance.refunded)"
                + " − revoked \(balance.revoked) + restored \(balance.restored)"
                + " + transferred in \(balance.transferredIn) − out \(balance.transferredOut)"
                + " = \(balance.ledgerAvailable)"
                + (balance.balanced ? " (balanced)" : " (DOES NOT BALANCE: \(balance.available) available)")
        )
        if balance.openDebts > 0 { print("open debts (refunded purchases already spent): \(balance.openDebts)") }
    }
}

struct BillingLedger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "A user's credit ledger: every issue, consumption, refund, revocation and restore."
    )

    @Option(help: "The user (UUID).") var user: String
    @Option(parsing: .unconditional, help: "Show at most this many entries (oldest first).") var limit = 1000
    @Flag(help: "Print JSON.") var json = false
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let userID = UserID(user) else {
            throw ValidationError("--user: expected a UUID, got \(InputQuote.short(user))")
        }
        let (entries, balance) = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database in
                (
                    try CreditLedger.entries(userID: userID, limit: limit, database: database),
                    try CreditLedger.balance(userID: userID, database: database)
                )
            }
        }
        if json {
            let object: JSONValue = [
                "entries": try JSONDecoder().decode(JSONValue.self, from: JSONCoding.encoder.encode(entries)),
                "balance": try JSONDecoder().decode(JSONValue.self, from: JSONCoding.encoder.encode(balance)),
            ]
            print(String(decoding: try JSONCoding.encoder.encode(object), as: UTF8.self))
            return
        }
        for entry in entries {
            var line =
                "\(ISO8601.string(from: entry.createdAt))  \(entry.entry.padding(toLength: 12, withPad: " ", startingAt: 0))"
            line += " credit \(entry.creditID.description.prefix(8))  tx \(entry.transactionID)"
            if let area = entry.area, let language = entry.language { line += "  \(area)/\(language)" }
            if let reason = entry.reason { line += "  (\(reason))" }
            print(Terminal.safe(line))
        }
        print(
            "\(entries.count) entries; available \(balance.available), ledger says \(balance.ledgerAvailable)"
                + (balance.balanced ? " (balanced)" : " (DOES NOT BALANCE)")
        )
    }
}

/// Development only: the files `dev-pki` writes and `dev-sign` reads.
struct BillingDevPKI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-pki",
        abstract: "DEVELOPMENT ONLY: create a local root, intermediate and leaf with Apple's marker extensions.",
        discussion: """
            Workers trust it only when told to (BILLING_TRUSTED_ROOTS=<dir>/root.der and \
            a non-Production BILLING_ENVIRONMENT). Nothing signed with it is accepted by \
            a worker that trusts Apple's root.
            """
    )

    @Option(help: "Folder to write root.der, root.pem, intermediate.pem, leaf.pem and leaf-key.pem to.")
    var out: String
    @Option(parsing: .unconditional, help: "Years the certificates are valid for, from yesterday.") var years = 5
    @Flag(help: "Replace an existing PKI in the folder.") var force = false

    func run() async throws {
        let directory = URL(fileURLWithPath: out)
        let marker = directory.appendingPathComponent("root.der").path
        if FileManager.default.fileExists(atPath: marker), !force {
            throw CommandFailure("\(out) already holds a PKI; pass --force to replace it")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let start = Date().addingTimeInterval(-86_400)
        let pki = try DevPKI.generate(
            notValidBefore: start,
            notValidAfter: start.addingTimeInterval(Double(years) * 365.25 * 86_400)
        )
        try pki.write(to: directory)
        print("development PKI written to \(out) (trust it with BILLING_TRUSTED_ROOTS=\(marker))")
    }
}

struct BillingDevSign: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dev-sign",
        abstract: "DEVELOPMENT ONLY: sign a test transaction (or notification) with a dev-pki folder.",
        discussion: """
            Prints the JWS. For a purchase:
              astroctl billing dev-sign --pki ./pki --user <uuid> \\
                  --product com.astrosvitla.astroinsight.report.career

            For a notification about an earlier transaction:
              astroctl billing dev-sign --pki ./pki --notification REFUND \\
                  --transaction-id 2000000000000001 --product …
            """
    )

    @Option(help: "The folder `dev-pki` wrote.") var pki: String
    @Option(help: "The product id bought.") var product: String
    @Option(help: "The buyer's user id (UUID), signed as appAccountToken.") var user: String?
    @Option(name: .customLong("transaction-id"), help: "Transaction id (default: a new random one).")
    var transactionID: String?
    @Option(name: .customLong("original-transaction-id"), help: "Original transaction id (default: the same).")
    var originalTransactionID: String?
    @Option(parsing: .unconditional, help: "Units bought.") var quantity = 1
    @Option(help: "The environment signed into the payload.") var environment = StoreEnvironment.sandbox.rawValue
    @Option(name: .customLong("bundle-id"), help: "The bundle id signed into the payload.")
    var bundleID = BillingDefaults.bundleID
    @Option(help: "Sign an App Store Server Notification V2 of this type (REFUND, REVOKE, …) about the transaction.")
    var notification: String?
    @Flag(help: "Mark the transaction refunded (revocationDate set).") var revoked = false

    func validate() throws {
        // A development token may break the catalog's limits on purpose, but not beyond what
        // a StoreKit transaction can carry.
        guard (1...10_000).contains(quantity) else { throw ValidationError("--quantity must be 1…10000") }
    }

    func run() async throws {
        let pkiFolder = try DevPKI.load(from: URL(fileURLWithPath: pki))
        let now = Date()
        let id = transactionID ?? DevTransactions.newTransactionID()
        let payload = DevTransactions.transaction(
            id: id,
            originalID: originalTransactionID ?? id,
            productID: product,
            userID: user,
            quantity: quantity,
            environment: environment,
            bundleID: bundleID,
            at: now,
            revoked: revoked
        )
        let signedTransaction = try pkiFolder.signer.sign(payload)
        guard let notification else {
            print(signedTransaction)
            return
        }
        let body = DevTransactions.notification(
            type: notification,
            signedTransaction: signedTransaction,
            environment: environment,
            bundleID: bundleID,
            at: now
        )
        print(try pkiFolder.signer.sign(body))
    }
}

/// `astroctl billing purchase`: a whole development purchase in one command — sign with a
/// dev-pki folder, publish `billing.verify-purchase`, wait for the verdict.
struct BillingPurchase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purchase",
        abstract:
            "Publish billing.verify-purchase for a signed transaction (from a file, by id, or dev-signed), and wait.",
        discussion: """
            The signed transaction comes from a file (--signed-transaction-file) or is \
            signed here with a dev-pki folder (--dev-pki, development only); with only \
            --transaction-id, the worker fetches it from Apple.

            Examples:
              astroctl billing purchase --user <uuid> --signed-transaction-file tx.jws
              astroctl billing purchase --user <uuid> --dev-pki ./pki \\
                  --product com.astrosvitla.report.credit.pack5
              astroctl billing purchase --user <uuid> --transaction-id 2000000957300037
            """
    )

    @Option(help: "The buyer (UUID).") var user: String
    @Option(name: .customLong("signed-transaction-file"), help: "A file holding the JWS.")
    var signedTransactionFile: String?
    @Option(name: .customLong("transaction-id"), help: "Only the transaction id: the worker fetches it from Apple.")
    var transactionID: String?
    @Option(name: .customLong("dev-pki"), help: "DEVELOPMENT: sign a new purchase with this dev-pki folder.")
    var devPKI: String?
    @Option(help: "With --dev-pki: the product bought.") var product: String?
    @Option(parsing: .unconditional, help: "With --dev-pki: units bought.") var quantity = 1
    @Option(parsing: .unconditional, help: "Give up waiting after this many seconds.") var timeout = 60
    @OptionGroup var connection: ConnectionOptions

    func validate() throws {
        guard (1...10_000).contains(quantity) else { throw ValidationError("--quantity must be 1…10000") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() async throws {
        guard let userID = UserID(user) else {
            throw ValidationError("--user: expected a UUID, got \(InputQuote.short(user))")
        }
        let jobID = JobID.random()
        var request = VerifyPurchaseRequest(jobID: jobID, userID: userID)
        if let devPKI {
            guard let product else { throw ValidationError("--dev-pki needs --product") }
            let pki = try DevPKI.load(from: URL(fileURLWithPath: devPKI))
            let id = DevTransactions.newTransactionID()
            request.signedTransaction = try pki.signer.sign(
                DevTransactions.transaction(
                    id: id,
                    originalID: id,
                    productID: product,
                    userID: userID.description,
                    quantity: quantity,
                    environment: ProcessInfo.processInfo.environment["BILLING_ENVIRONMENT"] ?? "Sandbox",
                    bundleID: ProcessInfo.processInfo.environment["BILLING_BUNDLE_ID"] ?? BillingDefaults.bundleID,
                    at: Date(),
                    revoked: false
                )
            )
        } else if let signedTransactionFile {
            guard let data = FileManager.default.contents(atPath: signedTransactionFile) else {
                throw ValidationError("--signed-transaction-file: cannot read \(signedTransactionFile)")
            }
            request.signedTransaction = String(decoding: data, as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        } else if let transactionID {
            request.transactionID = transactionID
        } else {
            throw ValidationError("give --signed-transaction-file, --transaction-id or --dev-pki with --product")
        }
        let message = JobCommands.message(
            .billingVerifyPurchase,
            jobID: jobID,
            body: try JSONCoding.encoder.encode(request)
        )
        let event = try await EventWaiter.publishAndWait(
            message,
            jobID: jobID,
            events: [.billingCreditsIssued, .billingPurchaseRejected, .billingVerifyPurchaseFailed],
            timeout: .seconds(timeout),
            connection: connection
        )
        print(String(decoding: try JSONCoding.encoder.encode(event), as: UTF8.self))
        if event["type"]?.stringValue != EventType.billingCreditsIssued.rawValue { throw ExitCode(1) }
    }
}
