import AstroDomain
import Foundation
import Hummingbird
import Postgres

// Account deletion (issue 19): `DELETE /v1/me` queues `user.delete` (the billing-worker erases
// the user), and from then on every other authenticated request of the user is refused with 401
// `user-deleted` (`authenticate`, with the replica's `DeletedUsers`). 401, not 410 or 404: every authenticated route
// already documents 401 (a client handles it by registering again, which is what a deleted
// account must do), and the access token is what became invalid, not the resource asked for.

extension GatewayRoutes {
    /// The answer to a deleted user's token.
    static let userDeleted = Problem.unauthorized(
        UserDeletion.refusedCode,
        "this user was deleted; register the device again to start anew"
    )

    /// `DELETE /v1/me`: queues `user.delete` for the caller (202 with the job). Once the
    /// deletion is marked, the same call answers 202 with the job that started it.
    static func deleteCurrentUser(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws -> Response {
        let user = try authenticate(request, context: context, services, allowDeleted: true)
        let idempotencyKey = try idempotencyKey(request)
        if let started = try await database(context, { try await services.store.deletionJob(user: user) }) {
            services.deletedUsers.accepted(user)
            var response = json(["jobId": .string(started.description)], status: .accepted)
            response.headers[.location] = "/v1/jobs/\(started)"
            return response
        }
        let response = try await accept(
            .userDelete,
            user: user,
            idempotencyKey: idempotencyKey,
            requestHash: requestHash(.userDelete, path: "DELETE /v1/me", Data()),
            context: context,
            services
        ) { jobID in
            (try UserDeleteRequest(jobID: jobID, userID: user).jsonData(), [:])
        }
        // Only once the job is safely queued (a 202): refused from now on by this replica.
        if response.status == .accepted { services.deletedUsers.accepted(user) }
        return response
    }
}

extension GatewayStore {
    /// The job that started the user's deletion; nil when the user is not deleted.
    /// - Throws: `PostgresError`.
    func deletionJob(user: UserID) async throws -> JobID? {
        try await pool.withConnection { database -> JobID? in
            let rows = try database.query("SELECT job_id FROM user_deletions WHERE user_id = $1", [user.uuid])
            return try rows.first.map { JobID(try $0.decode(UUID.self, "job_id")) }
        }
    }
}
