/// The type of a job: the routing key on `astro.jobs` and the name of the queue that holds it.
public struct JobType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    /// Compute a natal chart and store the profile and chart (chart-worker).
    public static let chartCalculate: JobType = "chart.calculate"
    /// Verify a StoreKit 2 transaction and issue credits once (billing-worker).
    public static let billingVerifyPurchase: JobType = "billing.verify-purchase"
    /// Consume one credit atomically, then publish `report.generate` (billing-worker).
    public static let reportRequest: JobType = "report.request"
    /// Write and store a report (report-worker).
    public static let reportGenerate: JobType = "report.generate"
    /// Give a consumed credit back, the compensation for an undelivered report (billing-worker).
    public static let billingRefundCredit: JobType = "billing.refund-credit"
    /// An App Store Server Notification V2 (billing-worker).
    public static let billingStoreNotification: JobType = "billing.store-notification"
    /// Write a children's story and store it with its pages (story-worker).
    public static let storyGenerate: JobType = "story.generate"
    /// Illustrate a story's pages in order, or retry chosen pages (story-worker).
    public static let storyIllustrate: JobType = "story.illustrate"
    /// Record that a child read a story; update collections and award achievements (story-worker).
    public static let storyRead: JobType = "story.read"
    /// Answer one App Store CONSUMPTION_REQUEST with Send Consumption Information, once
    /// (billing-worker; published by `billing.store-notification`).
    public static let billingSendConsumption: JobType = "billing.send-consumption"
    /// Fetch the App Store's notification history for a window and apply the notifications
    /// never received (billing-worker; on start-up and `astroctl billing notifications recover`).
    public static let billingRecoverNotifications: JobType = "billing.recover-notifications"
    /// Erase a user: their personal data, keeping the money records pseudonymised (billing-worker).
    public static let userDelete: JobType = "user.delete"
    /// Erase the illustration files of a deleted user's stories (story-worker; published only by
    /// `user.delete`).
    public static let storyEraseIllustrations: JobType = "story.erase-illustrations"
    /// Export everything stored about a user: copy their illustration files (story-worker),
    /// then `user.export-pack`.
    public static let userExport: JobType = "user.export"
    /// Write a user's export document and zip (billing-worker; published only by `user.export`).
    public static let userExportPack: JobType = "user.export-pack"

    /// Every job type of the contract, in the order of CONTRACT.md.
    public static let all: [JobType] = [
        .chartCalculate, .billingVerifyPurchase, .reportRequest, .reportGenerate, .billingRefundCredit,
        .billingStoreNotification, .storyGenerate, .storyIllustrate, .storyRead, .billingSendConsumption,
        .billingRecoverNotifications,
        .userDelete, .storyEraseIllustrations,
        .userExport, .userExportPack,
        .chartSynastry, .chartTransits, .chartReturn, .chartRender,
    ]

    /// The job types a client of the backend may ask for (astroctl's job commands, the app's
    /// gateway), through `astro.requests`; the others (`report.generate`,
    /// `billing.refund-credit`) only a worker publishes, as a step of another job.
    public static let requestable: [JobType] = [
        .chartCalculate, .billingVerifyPurchase, .reportRequest, .billingStoreNotification, .storyGenerate,
        .storyIllustrate, .storyRead, .billingRecoverNotifications, .userDelete,
        .userExport,
        .chartSynastry, .chartTransits, .chartReturn, .chartRender,
    ]

    /// Whether a client may ask for a job of this type (see `requestable`).
    public var isRequestable: Bool { Self.requestable.contains(self) }

    /// The event type published when a job of this type cannot be done (`<type>.failed`).
    public var failedEvent: EventType {
        // The contract names failures by the job's domain (`chart.failed`, `report.failed`);
        // the billing jobs keep their own full name so each stays distinguishable.
        switch self {
        case .chartCalculate, .chartSynastry, .chartTransits, .chartReturn, .chartRender: return .chartFailed
        case .billingVerifyPurchase: return .billingVerifyPurchaseFailed
        case .reportRequest, .reportGenerate: return .reportFailed
        case .billingRefundCredit: return .billingRefundCreditFailed
        case .billingStoreNotification: return .billingStoreNotificationFailed
        case .billingSendConsumption: return .billingSendConsumptionFailed
        case .storyGenerate, .storyIllustrate, .storyRead: return .storyFailed
        case .billingRecoverNotifications: return .billingRecoverNotificationsFailed
        case .userDelete: return .userDeleteFailed
        case .storyEraseIllustrations: return .storyEraseIllustrationsFailed
        case .userExport: return .userExportFailed
        case .userExportPack: return .userExportPackFailed
        // A queue outside the contract (the sample worker's, a benchmark's) follows the rule.
        default: return EventType(rawValue: rawValue + ".failed")
        }
    }

    /// The event type published when a job of this type was cancelled before it started
    /// (`<type>.cancelled`, the job's full name: one per job type, see `EventType.cancelled`).
    public var cancelledEvent: EventType { EventType(rawValue: rawValue + ".cancelled") }
}

/// The lifecycle of a job as recorded in the `jobs` table.
public enum JobStatus: String, Sendable, Codable, CaseIterable {
    case queued, running, succeeded, failed, dead
    /// Cancelled by an operator before it started (`astroctl job cancel`): its message is
    /// acknowledged without running and `<type>.cancelled` is published.
    case cancelled

    /// A job in a terminal state is never run again; a redelivery is acknowledged and dropped.
    /// (`dead` ends only until an operator replays the job: `astroctl dead replay`.)
    public var isTerminal: Bool {
        switch self {
        case .succeeded, .failed, .dead, .cancelled: return true
        case .queued, .running: return false
        }
    }
}

extension JobStatus {
    /// The error code of a cancelled job (`jobs.error` and its `<type>.cancelled` event): not
    /// `cancelled`, which is the transient code of an interrupted attempt.
    public static let cancelledErrorCode = ErrorCode.cancelledByOperator.rawValue
}

/// Names of the broker objects of the contract.
public enum BrokerNames {
    /// Durable topic exchange every job is published to (routing key = job type; each queue is
    /// bound with its own name, so routing is exact). A topic exchange, not a direct one, so the
    /// broker's topic permissions can say which job types each user may publish.
    public static let jobsExchange = "astro.jobs"
    /// Durable topic exchange astroctl's job commands (user `astro-client`) publish their jobs to
    /// (routing key = job type): the queue of each requestable job type is bound to it directly,
    /// with its own name, and nothing else is — no exchange, so the routing keys of a message's
    /// `CC`/`BCC` headers (which RabbitMQ before 4.0 checks against no topic permission, and routes
    /// again at every exchange-to-exchange hop) reach only queues the client may name anyway, and
    /// whatever arrives under another key (a message a client's own queue dead-letters there) goes
    /// nowhere. Clients have no right to publish to `astro.jobs` itself.
    public static let requestsExchange = "astro.requests"
    /// Durable topic exchange the app's gateway (user `gateway`) publishes its jobs to, bound like
    /// `astro.requests` but only to the queues of the job types the gateway may ask for (not
    /// `billing.recover-notifications`): an exchange of its own, since a header can reach every
    /// queue bound to the exchange a message is published to.
    public static let gatewayRequestsExchange = "astro.gateway-requests"
    /// Durable topic exchange of what a worker sends back to its own queues: retry copies
    /// (routing key = the delay queue's name, `<queue>.retry.<ms>ms`) and dead letters (routing
    /// key `<queue>.dead`), each bound with its own name; the broker's topic permissions keep
    /// each service to its own queues.
    public static let retryExchange = "astro.retry"
    /// Durable topic exchange every outcome is published to (routing key = event type).
    public static let eventsExchange = "astro.events"
    /// Durable direct exchange the broker dead-letters to (a message rejected without requeue,
    /// or past a queue's delivery limit); `<queue>.dead` is bound to it with its own name. No
    /// service publishes to it: workers send their dead letters through `astro.retry`.
    public static let deadLetterExchange = "astro.dlx"

    /// The dead-letter queue of a work queue.
    public static func deadLetterQueue(of queue: String) -> String { queue + ".dead" }

    /// Message header names the runtime sets; defined once so producers and tests agree.
    public enum Header {
        /// How many times the job has been attempted before this delivery (0 on the first).
        public static let attempt = "x-astro-attempt"
        /// Stable machine-readable reason code of a dead letter or retry.
        public static let reasonCode = "x-astro-reason-code"
        /// Human-readable reason of a dead letter or retry.
        public static let reasonMessage = "x-astro-reason"
        /// The queue a dead letter or retried message came from.
        public static let originalQueue = "x-astro-original-queue"
        /// When the message was dead-lettered (ISO 8601).
        public static let deadLetteredAt = "x-astro-dead-lettered-at"
        /// On a job an operator replayed (`astroctl dead replay`): the `operator_actions` row's id.
        public static let replayAction = "x-astro-replay-action"
        /// Deliveries of the message before this one without an outcome, as a quorum queue
        /// counts them (RabbitMQ sets it; read, never written).
        public static let deliveryCount = "x-delivery-count"
    }
}
