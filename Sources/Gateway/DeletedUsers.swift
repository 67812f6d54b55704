import AstroDomain
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

// A deleted user's access token must be refused, but asking the database on every request would
// add a round trip to every call for something that happens rarely. Each replica instead keeps
// the users whose deletion started within the access token lifetime (plus a margin) in memory,
// re-read once a second: a token older than that window has expired anyway, and a deleted user
// cannot get a new one (the refresh tokens are erased, and a refresh is refused meanwhile). The
// replica that accepts a `DELETE /v1/me` refuses the user at once; the others within a second of
// the billing-worker marking the deletion. Workers refuse the user's jobs in the job's own
// transaction regardless, so this window lets nothing be written.

/// The users whose deletion started recently, as this replica knows them.
final class DeletedUsers: Sendable {
    private struct State {
        /// From the database's `user_deletions`, as of the last refresh.
        var recorded: Set<UUID> = []
        /// Deletions this replica accepted, until the database lists them (or the window ends).
        var accepted: [UUID: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    /// How long a deletion is remembered: the access token lifetime plus a margin.
    let window: Duration
    /// Told of each user this replica learns is being deleted (once per user, outside the lock):
    /// the event hub ends the user's open streams.
    private let onDeleted: @Sendable ([UserID]) -> Void

    /// - Parameters:
    ///   - window: how long a deletion is remembered.
    ///   - onDeleted: told of users newly known to be deleted, after they are recorded (so that
    ///     `contains` is already true for them).
    init(window: Duration, onDeleted: @escaping @Sendable ([UserID]) -> Void = { _ in }) {
        self.window = window
        self.onDeleted = onDeleted
    }

    /// Whether the user's deletion has started (as of the last refresh, or accepted here).
    func contains(_ user: UserID) -> Bool {
        state.withLock { $0.recorded.contains(user.uuid) || $0.accepted[user.uuid] != nil }
    }

    /// Remembers a deletion this replica accepted, so the user is refused at once.
    func accepted(_ user: UserID) {
        let now = ContinuousClock.now
        let isNew = state.withLock { state -> Bool in
            let known = state.recorded.contains(user.uuid) || state.accepted[user.uuid] != nil
            state.accepted[user.uuid] = now
            return !known
        }
        if isNew { onDeleted([user]) }
    }

    /// Replaces the recorded set with a fresh read and forgets accepted deletions the read lists
    /// or that are older than the window.
    func replace(recorded users: Set<UUID>) {
        let now = ContinuousClock.now
        let added = state.withLock { state -> [UUID] in
            let added = Array(users.filter { !state.recorded.contains($0) && state.accepted[$0] == nil })
            state.recorded = users
            state.accepted = state.accepted.filter { !users.contains($0.key) && now - $0.value < window }
            return added
        }
        if !added.isEmpty { onDeleted(added.map(UserID.init)) }
    }

    /// How many users are remembered (for the log and tests).
    var count: Int { state.withLock { $0.recorded.count + $0.accepted.count } }
}

/// Re-reads the recent deletions once a second while the gateway runs.
struct DeletedUsersRefresher: Service {
    let deleted: DeletedUsers
    let pool: PostgresPool
    let logger: Logger
    var interval: Duration = .seconds(1)

    /// The most deletions one read takes: more within the window than this would be a mass
    /// deletion, logged; the newest are kept.
    static let maxRows = 100_000

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do {
                    try await refresh()
                    if failing { logger.info("deleted users read again") }
                    failing = false
                } catch {
                    // The previous set stays in force; a database outage fails requests anyway.
                    if !failing { logger.warning("deleted users not read", metadata: ["db.error": "\(error)"]) }
                    failing = true
                }
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// One read of the deletions started within the window.
    /// - Throws: `PostgresError` when the database cannot be read.
    func refresh() async throws {
        let seconds = Double(deleted.window.components.seconds)
        let users = try await pool.withConnection { database -> Set<UUID> in
            let rows = try database.query(
                """
                SELECT user_id FROM user_deletions
                WHERE started_at > now() - make_interval(secs => $1)
                ORDER BY started_at DESC LIMIT $2
                """,
                [seconds, Self.maxRows]
            )
            return Set(try rows.map { try $0.decode(UUID.self, "user_id") })
        }
        if users.count >= Self.maxRows {
            logger.warning("more recent deletions than one read takes", metadata: ["users": "\(users.count)"])
        }
        deleted.replace(recorded: users)
    }
}
