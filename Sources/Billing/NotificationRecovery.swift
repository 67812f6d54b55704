import AppStoreServerAPI
import AstroDomain
import Foundation
import Postgres
import StoreKitVerification
import UUIDText
import WorkerRuntime

/// `billing.recover-notifications`: reads the App Store's notification history for a window
/// (Get Notification History, App Store Server API 1.5+, POST with `startDate`/`endDate` in
/// milliseconds, 20 per page, `paginationToken` for the next page) and feeds every notification,
/// oldest `signedDate` first, through `StoreNotificationHandler`'s own commit, in this job's transaction. A notification
/// already received (its `notificationUUID` is in `store_notifications`) is a duplicate there and
/// changes nothing, so each is applied once however often its window is read again. One that does
/// not verify is counted as rejected and not applied, as a live one would be dead-lettered.
///
/// The window ends recorded in `store_notification_recoveries` are the high-water mark the next
/// start-up recovery begins at (`scheduleOnStart`).
public struct RecoverNotificationsHandler: JobHandler {
    public let jobType = JobType.billingRecoverNotifications
    private let verifier: SignedDataVerifier
    private let appStore: AppStoreServerAPIClient?
    private let live: StoreNotificationHandler
    private let environment: StoreEnvironment

    /// The most pages one job reads (20 notifications each): past it the job fails with
    /// `history-too-long`, and the operator splits the window.
    public static let maxPages = 500
    /// How far back Apple keeps history: 180 days in production, 30 in the sandbox.
    public static func retention(for environment: StoreEnvironment) -> TimeInterval {
        environment == .production ? RecoverNotificationsRequest.maxWindow : 30 * 86_400
    }

    /// - Parameters:
    ///   - verifier: the same verifier as live notifications.
    ///   - appStore: the API client; without one the job is refused (`app-store-api-not-configured`).
    ///   - consumptionPolicy: the live handler's policy, so a recovered CONSUMPTION_REQUEST is
    ///     answered exactly as a live one would have been.
    public init(
        verifier: SignedDataVerifier,
        appStore: AppStoreServerAPIClient?,
        consumptionPolicy: ConsumptionPolicy = .default
    ) {
        self.verifier = verifier
        self.appStore = appStore
        self.live = StoreNotificationHandler(verifier: verifier, consumptionPolicy: consumptionPolicy)
        self.environment = verifier.policy.environment
    }

    public struct Prepared: Sendable {
        var request: RecoverNotificationsRequest
        var windowStart: Date
        var windowEnd: Date
        var pages: Int
        var fetched: Int
        var notifications: [StoreNotificationHandler.Prepared]
        var rejections: [Rejection]
        /// A note about the window (clamped to Apple's retention), when there is one.
        var note: String?
    }

    struct Rejection: Sendable, Codable, Hashable {
        var reason: String
        var detail: String
    }

    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        let request = try job.decode(RecoverNotificationsRequest.self)
        guard let appStore else {
            throw JobRejection(
                code: .appStoreAPINotConfigured,
                message: "the billing-worker has no App Store Server API key (APPSTORE_API_KEY_ID)"
            )
        }
        let now = Date()
        let end = min(request.until ?? job.receivedAt, now)
        var start = request.since
        var note: String?
        let oldest = now.addingTimeInterval(-Self.retention(for: environment) + 60)
        if start < oldest {
            note =
                "the window started \(ISO8601.string(from: start)); Apple keeps history only since "
                + ISO8601.string(from: oldest)
            start = oldest
        }
        guard start < end else {
            throw JobRejection(
                code: .invalidWindow,
                message: "since (\(ISO8601.string(from: start))) must be before until (\(ISO8601.string(from: end)))"
            )
        }
        let body = NotificationHistoryRequest(startDate: start, endDate: end)
        var token: String?
        var pages = 0
        var items: [NotificationHistoryItem] = []
        repeat {
            guard pages < Self.maxPages else {
                throw JobRejection(
                    code: .historyTooLong,
                    message: "more than \(Self.maxPages) pages of history; recover shorter windows"
                )
            }
            let page: NotificationHistoryPage
            do {
                page = try await appStore.notificationHistory(body, paginationToken: token)
            } catch {
                // A rate limit or outage is retried with the job; a refused request never succeeds.
                if error.isTransient { throw error }
                throw JobRejection(code: .appStore(error.code), message: error.description)
            }
            pages += 1
            items += page.notificationHistory
            token = page.hasMore ? page.paginationToken : nil
        } while token != nil

        var seen: Set<UUID> = []
        var notifications: [StoreNotificationHandler.Prepared] = []
        var rejections: [Rejection] = []
        for item in items {
            do {
                let verified = try await verifier.verifyNotification(item.signedPayload)
                guard let text = verified.payload.notificationUUID, let uuid = UUID(text: text),
                    verified.payload.notificationType?.isEmpty == false
                else {
                    rejections.append(
                        Rejection(reason: ErrorCode.malformedPayload.rawValue, detail: "no notificationUUID or type")
                    )
                    continue
                }
                // Apple lists each notification once; a repeat in the answer is applied once too.
                guard seen.insert(uuid).inserted else { continue }
                let jobID = JobID.derived(from: request.jobID, purpose: "notification:\(uuid.lowercasedText)")
                notifications.append(
                    StoreNotificationHandler.Prepared(
                        request: StoreNotificationRequest(jobID: jobID, signedPayload: item.signedPayload),
                        notification: verified,
                        notificationUUID: uuid
                    )
                )
            } catch {
                rejections.append(Rejection(reason: error.reason.rawValue, detail: error.detail))
            }
        }
        return Prepared(
            request: request,
            windowStart: start,
            windowEnd: end,
            pages: pages,
            fetched: notifications.count + rejections.count,
            notifications: Self.inSignedOrder(notifications),
            rejections: rejections,
            note: note
        )
    }

    /// The notifications oldest first by `signedDate` (one without it last), in the history's
    /// order among equals: the ledger then records each refund and reversal in the order Apple
    /// signed them. The credits would end the same in any order (the latest refund notification
    /// decides, `NotificationLedger.applyRefundState`); this keeps the ledger's story readable.
    static func inSignedOrder(
        _ notifications: [StoreNotificationHandler.Prepared]
    ) -> [StoreNotificationHandler.Prepared] {
        notifications.enumerated().sorted { left, right in
            let leftDate = left.element.notification.payload.signedDate ?? .distantFuture
            let rightDate = right.element.notification.payload.signedDate ?? .distantFuture
            return leftDate == rightDate ? left.offset < right.offset : leftDate < rightDate
        }.map(\.element)
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        var applied: [JSONValue] = []
        var alreadySeen = 0
        var messages: [OutboxMessage] = []
        var measurements: [BusinessMeasurement] = []
        for notification in prepared.notifications {
            let envelope = JobEnvelope(
                jobID: notification.request.jobID,
                type: .billingStoreNotification,
                body: Data(),
                receivedAt: job.receivedAt
            )
            let outcome = try live.commit(notification, job: envelope, database: database)
            guard case .object(let fields)? = outcome.result, fields["action"] != "duplicate" else {
                alreadySeen += 1
                continue
            }
            messages += outcome.messages
            measurements += outcome.measurements
            if applied.count < 100 { applied.append(.object(fields)) }
        }
        let appliedCount = prepared.notifications.count - alreadySeen
        try database.execute(
            """
            INSERT INTO store_notification_recoveries (job_id, trigger, window_start, window_end, pages, fetched,
                applied, already_seen, rejected)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
            ON CONFLICT (job_id) DO NOTHING
            """,
            [
                job.jobID.uuid, prepared.request.trigger.rawValue, prepared.windowStart, prepared.windowEnd,
                prepared.pages, prepared.fetched, appliedCount, alreadySeen, prepared.rejections.count,
            ]
        )
        var fields: [String: JSONValue] = [
            "since": .string(ISO8601.string(from: prepared.windowStart)),
            "until": .string(ISO8601.string(from: prepared.windowEnd)),
            "trigger": .string(prepared.request.trigger.rawValue),
            "pages": .number(Double(prepared.pages)),
            "fetched": .number(Double(prepared.fetched)),
            "applied": .number(Double(appliedCount)),
            "alreadySeen": .number(Double(alreadySeen)),
            "rejected": .number(Double(prepared.rejections.count)),
            "notifications": .array(applied),
            "rejections": .array(
                prepared.rejections.prefix(20).map {
                    .object(["reason": .string($0.reason), "detail": .string(String($0.detail.prefix(300)))])
                }
            ),
        ]
        if let note = prepared.note { fields["note"] = .string(note) }
        messages.append(
            try .event(JobEvent(jobID: job.jobID, userID: nil, type: .billingNotificationsRecovered, fields: fields))
        )
        return JobOutcome(status: .succeeded, result: .object(fields), messages: messages, measurements: measurements)
    }
}

/// Scheduling recoveries: the high-water mark and the start-up job.
public enum NotificationRecovery {
    /// Notifications delivered just before the mark may still have been in flight: the start-up
    /// window begins this long before it.
    public static let overlap: TimeInterval = 600
    /// With no mark at all (nothing ever received or recovered), the start-up window is the last day.
    public static let firstWindow: TimeInterval = 86_400

    /// The newest of: the end of the last recovered window, the last notification received.
    public static func highWaterMark(database: PostgresConnection) throws -> Date? {
        let row = try database.query(
            """
            SELECT greatest((SELECT max(window_end) FROM store_notification_recoveries),
                            (SELECT max(received_at) FROM store_notifications)) AS mark
            """
        ).first
        guard let row else { return nil }
        return try row.decode(Date?.self, "mark")
    }

    /// Writes a `billing.recover-notifications` job to the outbox (the relay publishes it) for
    /// the time since the high-water mark minus `overlap`, at most Apple's retention back. The
    /// job id follows from the window's start, so replicas starting together schedule one job.
    /// - Returns: the request scheduled.
    /// - Throws: `PostgresError`.
    @discardableResult
    public static func scheduleOnStart(
        pool: PostgresPool,
        environment: StoreEnvironment,
        now: Date = Date()
    ) async throws -> RecoverNotificationsRequest {
        try await pool.withTransaction { database in
            let mark = try highWaterMark(database: database)
            let oldest = now.addingTimeInterval(-RecoverNotificationsHandler.retention(for: environment) + 60)
            var since = mark.map { $0.addingTimeInterval(-overlap) } ?? now.addingTimeInterval(-firstWindow)
            since = max(min(since, now.addingTimeInterval(-overlap)), oldest)
            let millis = Int64((since.timeIntervalSince1970 * 1000).rounded(.down))
            let jobID = JobID.derived(from: startUpNamespace, purpose: "start-up:\(millis)")
            let request = RecoverNotificationsRequest(jobID: jobID, since: since, until: now, trigger: .startUp)
            let message = OutboxMessage.job(.billingRecoverNotifications, body: try JSONCoding.encoder.encode(request))
            try database.execute(
                """
                INSERT INTO outbox (exchange, routing_key, body, mandatory, job_id)
                VALUES ($1, $2, $3, $4, $5)
                """,
                [message.exchange, message.routingKey, message.body, message.mandatory, jobID.uuid]
            )
            return request
        }
    }

    /// The parent of start-up job ids (a fixed, arbitrary UUID).
    static let startUpNamespace = JobID(UUID(text: "5e1f0a6e-2b7c-4d38-9a51-0c3e7f1d2a90")!)
}

/// The billing-worker's start-up recovery, from its environment.
public enum NotificationRecoveryStartUp {
    /// `BILLING_RECOVER_ON_START`: `true` (default) schedules a recovery at every start when the
    /// App Store Server API is configured; `false` never does.
    public static let variable = WorkerConfiguration.Variable(
        name: "BILLING_RECOVER_ON_START",
        defaultValue: "true",
        meaning: "at start-up, recover the notifications Apple sent since the last one received (needs APPSTORE_API_*)"
    )

    /// The start-up step, or nil when it is off or there is no API key to call Apple with.
    /// - Throws: `ConfigurationError` for a value other than true or false.
    public static func setup(_ environment: [String: String]) throws(ConfigurationError) -> DatabaseSetup? {
        let text = environment[variable.name]?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        switch text {
        case "", "1", "true", "yes", "on": break
        case "0", "false", "no", "off": return nil
        default: throw ConfigurationError(variable: variable.name, problem: "expected true or false")
        }
        guard environment["APPSTORE_API_KEY_ID"]?.trimmingCharacters(in: .whitespaces).isEmpty == false,
            let name = environment["BILLING_ENVIRONMENT"]?.trimmingCharacters(in: .whitespaces),
            let storeEnvironment = StoreEnvironment(rawValue: name)
        else { return nil }
        // The job is logged like any other when the worker consumes it. Failing to schedule it
        // (e.g. migration 0026 not applied yet) must not keep the worker from its live work: the
        // next start, or an operator's `astroctl billing notifications recover`, covers the window.
        return { pool in
            do {
                try await NotificationRecovery.scheduleOnStart(pool: pool, environment: storeEnvironment)
            } catch {
                FileHandle.standardError.write(
                    Data("billing-worker: the start-up notification recovery was not scheduled: \(error)\n".utf8)
                )
            }
        }
    }
}
