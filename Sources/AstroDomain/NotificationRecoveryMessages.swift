import Foundation

/// The body of `billing.recover-notifications`: read the App Store's notification history from
/// `since` to `until` and apply every notification not received yet, as if it had just arrived.
public struct RecoverNotificationsRequest: Sendable, Hashable, Codable {
    /// Why a recovery was asked for.
    public enum Trigger: String, Sendable, Hashable, Codable {
        /// The billing-worker started and covers the time since its high-water mark.
        case startUp = "start-up"
        /// An operator asked (`astroctl billing notifications recover`).
        case operatorRequest = "operator"
    }

    /// The longest window one job reads: Apple keeps 180 days of history in production (30 in
    /// the sandbox), so a longer one could never be served.
    public static let maxWindow: TimeInterval = 180 * 86_400

    public var jobID: JobID
    public var since: Date
    /// The end of the window; `nil` means when the job runs.
    public var until: Date?
    public var trigger: Trigger

    public init(jobID: JobID, since: Date, until: Date? = nil, trigger: Trigger) {
        self.jobID = jobID
        self.since = since
        self.until = until
        self.trigger = trigger
    }

    enum CodingKeys: String, CodingKey {
        case jobID = "jobId"
        case since, until, trigger
    }
}
