import AstroDomain
import Foundation
import Testing

@testable import Gateway

@Suite("Deleted users known to a replica")
struct DeletedUsersTests {
    @Test func anAcceptedDeletionIsRefusedAtOnceAndKeptUntilTheDatabaseListsIt() {
        let deleted = DeletedUsers(window: .seconds(60))
        let user = UserID(UUID())
        let other = UserID(UUID())
        #expect(!deleted.contains(user))
        deleted.accepted(user)
        #expect(deleted.contains(user) && !deleted.contains(other))
        // A read that does not list it yet (the billing-worker has not marked it): still refused.
        deleted.replace(recorded: [])
        #expect(deleted.contains(user))
        // Listed by the database: one entry, no longer a local one.
        deleted.replace(recorded: [user.uuid])
        #expect(deleted.contains(user) && deleted.count == 1)
        // Out of the window (its tokens have expired): forgotten.
        deleted.replace(recorded: [])
        #expect(!deleted.contains(user) && deleted.count == 0)
    }

    @Test func anAcceptedDeletionTheDatabaseNeverListsIsForgottenAfterTheWindow() async throws {
        let deleted = DeletedUsers(window: .milliseconds(50))
        let user = UserID(UUID())
        deleted.accepted(user)
        deleted.replace(recorded: [])
        #expect(deleted.contains(user))
        try await Task.sleep(for: .milliseconds(120))
        deleted.replace(recorded: [])
        #expect(!deleted.contains(user))
    }
}
