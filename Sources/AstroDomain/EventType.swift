/// The type of an event: the routing key on the `astro.events` topic exchange.
///
/// Every event type of the contract is a constant here, and `all` lists them, so a publisher, a
/// listener (astroctl waiting for an outcome) and CONTRACT.md cannot disagree on a name.
public struct EventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    // chart.calculate

    /// A chart was computed and stored, with its profile (`userId`, `profileId`, `chartId`, `unchanged`).
    public static let chartCalculated: EventType = "chart.calculated"
    /// A `chart.calculate` job could not be done (`error`).
    public static let chartFailed: EventType = "chart.failed"

    // billing.verify-purchase

    /// A verified purchase granted its credits, or had granted them already (`alreadyProcessed`).
    public static let billingCreditsIssued: EventType = "billing.credits-issued"
    /// A purchase was refused: not verified, not this user's, revoked… (`error`).
    public static let billingPurchaseRejected: EventType = "billing.purchase-rejected"
    /// A `billing.verify-purchase` job could not be done (invalid body, out of retries).
    public static let billingVerifyPurchaseFailed: EventType = "billing.verify-purchase.failed"

    // report.request and report.generate

    /// A credit was spent on a report; `report.generate` is queued (`reportJobId`).
    public static let billingCreditConsumed: EventType = "billing.credit-consumed"
    /// A report is stored (`reportId`), or already was.
    public static let reportCompleted: EventType = "report.completed"
    /// No report: no credit to spend, or it could not be written (`error`; a spent credit is refunded).
    public static let reportFailed: EventType = "report.failed"

    // billing.refund-credit

    /// A consumed credit was given back.
    public static let billingCreditRefunded: EventType = "billing.credit-refunded"
    /// A `billing.refund-credit` job could not be done.
    public static let billingRefundCreditFailed: EventType = "billing.refund-credit.failed"

    // billing.store-notification

    /// An App Store notification was recorded without changing credits.
    public static let billingNotificationRecorded: EventType = "billing.notification-recorded"
    /// `REFUND`/`REVOKE`: the purchase's unspent credits were revoked (spent ones became debts).
    public static let billingCreditsRevoked: EventType = "billing.credits-revoked"
    /// `REFUND_REVERSED`: revoked credits were restored.
    public static let billingCreditsRestored: EventType = "billing.credits-restored"
    /// `CONSUMPTION_REQUEST`: Apple asked for consumption information; it was recorded.
    public static let billingConsumptionRequested: EventType = "billing.consumption-requested"
    /// A `billing.store-notification` job could not be done.
    public static let billingStoreNotificationFailed: EventType = "billing.store-notification.failed"

    // billing.send-consumption

    /// A consumption request was answered or settled: `state` `sent` (Apple accepted the
    /// information), `declined-no-consent` (nothing sent: the user has not consented) or
    /// `failed` (Apple refused it; `error`).
    public static let billingConsumptionAnswered: EventType = "billing.consumption-answered"
    /// A `billing.send-consumption` job could not be done.
    public static let billingSendConsumptionFailed: EventType = "billing.send-consumption.failed"

    // story.generate, story.illustrate and story.read

    /// A story was written and stored with its pages.
    public static let storyGenerated: EventType = "story.generated"
    /// A `story.illustrate` job ended: the pages drawn, failed, skipped and unchanged (`error`
    /// when a page failed).
    public static let storyIllustrated: EventType = "story.illustrated"
    /// A reading was recorded, with the new counts and the achievements it earned.
    public static let storyReadRecorded: EventType = "story.read-recorded"
    /// A child earned an achievement (one event per achievement, once per child and rule).
    public static let achievementEarned: EventType = "achievement.earned"
    /// A story job could not be done (`error`).
    public static let storyFailed: EventType = "story.failed"

    // billing.recover-notifications

    /// The notification history of a window was read: how many notifications were new and
    /// applied, already seen, or did not verify.
    public static let billingNotificationsRecovered: EventType = "billing.notifications-recovered"
    /// A `billing.recover-notifications` job could not be done.
    public static let billingRecoverNotificationsFailed: EventType = "billing.recover-notifications.failed"

    // user.delete and story.erase-illustrations

    /// A user was erased (`forfeitedCredits`, `alreadyDeleted`); their later jobs are refused
    /// with `user-deleted`.
    public static let userDeleted: EventType = "user.deleted"
    /// A `user.delete` job could not be done (`error`).
    public static let userDeleteFailed: EventType = "user.delete.failed"
    /// A `story.erase-illustrations` job could not be done (`error`).
    public static let storyEraseIllustrationsFailed: EventType = "story.erase-illustrations.failed"

    // user.export and user.export-pack

    /// A user's export is ready for download (`exportId`, `bytes`, `expiresAt`).
    public static let userExported: EventType = "user.exported"
    /// A `user.export` job could not be done (`error`).
    public static let userExportFailed: EventType = "user.export.failed"
    /// A `user.export-pack` job could not be done (`error`: `export-too-large`…).
    public static let userExportPackFailed: EventType = "user.export-pack.failed"

    // Any job type, cancelled by an operator before it started (`astroctl job cancel`)

    /// A job was cancelled before it started: its handler never ran (`error.code` `cancelled`).
    /// One per job type, `<type>.cancelled`, in the order of `JobType.all`.
    public static let cancelled: [EventType] = JobType.all.map(\.cancelledEvent)

    /// Every event type of the contract, in the order of CONTRACT.md (by the job that publishes it).
    public static let all: [EventType] =
        [
            .chartCalculated, .chartFailed,
            .billingCreditsIssued, .billingPurchaseRejected, .billingVerifyPurchaseFailed,
            .billingCreditConsumed, .reportCompleted, .reportFailed,
            .billingCreditRefunded, .billingRefundCreditFailed,
            .billingNotificationRecorded, .billingCreditsRevoked, .billingCreditsRestored, .billingConsumptionRequested,
            .billingStoreNotificationFailed,
            .storyGenerated, .storyIllustrated, .storyReadRecorded, .achievementEarned, .storyFailed,
            .billingConsumptionAnswered, .billingSendConsumptionFailed,
            .billingNotificationsRecovered, .billingRecoverNotificationsFailed,
            .userDeleted, .userDeleteFailed, .storyEraseIllustrationsFailed,
            .userExported, .userExportFailed, .userExportPackFailed,
            .chartComputed,
        ] + cancelled
}
