import Foundation
import WorkerRuntime

extension InMemoryJobStore {
    /// The in-memory store has no users: none is ever being deleted.
    package func usersBeingDeleted(_ users: [UUID], in transaction: Transaction) throws -> Set<UUID> { [] }
}
