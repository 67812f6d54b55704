import AstroDomain
import Foundation
import Hummingbird
import Postgres
import UUIDText

// Account deletion (issue 19): `DELETE /v1/me` queues `user.delete` (the billing-worker erases
// the user), and from then on every other authenticated request of the user is refused with 401
// `user-deleted` (`Authenticator`, with the replica's `DeletedUsers`). 401, not 410 or 404: every authenticated route
// already documents 401 (a client handles it by registering again, which is what a deleted
// account must do), and the access token is what became invalid, not the resource asked for.

extension GatewayRoutes {
    /// The answer to a deleted user's token.
    static let userDeleted = Problem(
        .userDeleted,
        "this user was deleted; register the device again to start anew"
    )

}

extension GatewayStore {
    /// The job that started the user's deletion, or the `user.delete` the gateway already queued
    /// for them that no worker has marked yet (a second `DELETE /v1/me` then answers with it
    /// instead of queueing another); nil when neither exists.
    /// - Throws: `PostgresError`.
    func deletionJob(user: UserID) async throws -> JobID? {
        try await pool.withConnection { database -> JobID? in
            let rows = try database.query(
                """
                SELECT job_id FROM (
                    SELECT job_id, 0 AS rank, NULL::timestamptz AS created_at FROM user_deletions WHERE user_id = $1
                    UNION ALL
                    SELECT job_id, 1, created_at FROM gateway_jobs
                    WHERE user_id = $1 AND kind = 'user.delete' AND published_at IS NOT NULL
                ) found
                ORDER BY rank, created_at LIMIT 1
                """,
                [user.uuid]
            )
            return try rows.first.map { JobID(try $0.decode(UUID.self, "job_id")) }
        }
    }
}

extension GatewayRoutes {
    /// The caller's account: its deletion (the one route a deleted user may call again) and the
    /// export of its data.
    struct Me: GatewayController {
        let store: GatewayStore
        let deletedUsers: DeletedUsers
        let jobs: JobAcceptor

        func addRoutes(to routes: Registrar) {
            routes.authenticatedAllowingDeleted(.deleteCurrentUser, use: deleteCurrentUser)
            routes.authenticated(.exportCurrentUser, use: exportCurrentUser)
            routes.authenticated(.getExport, use: getExport)
        }

        /// `DELETE /v1/me`: queues `user.delete` for the caller (202 with the job). Once the
        /// deletion is marked, the same call answers 202 with the job that started it.
        func deleteCurrentUser(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            if let started = try await database(context, { try await store.deletionJob(user: user) }) {
                deletedUsers.accepted(user)
                var response = try respond(JobAccepted(started), status: .accepted)
                response.headers[.location] = "/v1/jobs/\(started)"
                return response
            }
            let response = try await jobs.accept(
                .userDelete,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.userDelete, path: "DELETE /v1/me", Data()),
                context: context
            ) { jobID in
                (try UserDeleteRequest(jobID: jobID, userID: user).jsonData(), JobAccepted(jobID))
            }
            // Only once the job is safely queued (a 202): refused from now on by this replica.
            if response.status == .accepted { deletedUsers.accepted(user) }
            return response
        }

        /// `POST /v1/me/export`: queues `user.export` for the caller (202 with the job, whose id is
        /// the export's); while an export of the caller is in progress, answers 202 with that one
        /// instead (`GatewayStore.recordExport`).
        func exportCurrentUser(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            let hash = requestHash(.userExport, path: "POST /v1/me/export", Data())
            let recorded = try await database(context) {
                try await store.recordExport(user: user, idempotencyKey: idempotencyKey, requestHash: hash)
            }
            return try await jobs.accept(recorded, .userExport, user: user, requestHash: hash, context: context) {
                jobID in
                (
                    try UserExportRequest(jobID: jobID, userID: user).jsonData(),
                    JobAccepted(jobID, downloadPath: "/v1/me/exports/\(jobID)")
                )
            }
        }

        /// `GET /v1/me/exports/{id}`: the zip (200 `application/zip`); 404 for no export of the
        /// caller, 409 `export-not-ready` from the 202 on while it is being built (or the code of its failure,
        /// `export-too-large`), 410 `export-expired` once past `expires_at`.
        func getExport(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = try pathID(context, "id")
            guard let export = try await database(context, { try await store.export(id, user: user) }) else {
                throw Problem.notFound()
            }
            if let expires = export.expiresAt, expires <= Date() {
                throw Problem(
                    .exportExpired,
                    "the export expired; ask for a new one"
                )
            }
            guard let bytes = export.bytes else {
                if let failed = export.failedCode {
                    throw Problem(ErrorCode(rawValue: failed), "the export could not be built")
                }
                throw Problem(
                    .exportNotReady,
                    "the export is still being built; wait for user.exported"
                )
            }
            let headers: HTTPFields = [
                .contentType: "application/zip",
                .contentDisposition: "attachment; filename=\"astrosvitla-export-\(id.lowercasedText).zip\"",
                .cacheControl: "private, no-store",
                .init("X-Content-Type-Options")!: "nosniff",
            ]
            let exportStore = store
            let logger = context.logger
            return Response(
                status: .ok,
                headers: headers,
                body: ResponseBody(contentLength: bytes) { writer in
                    // A chunk per lease, so a slow reader holds no connection. The export can be
                    // deleted meanwhile (expiry, a newer export, the user's deletion): a missing or
                    // wrong-sized chunk ends the response short of its Content-Length, which the
                    // client sees as a failed download.
                    var sent = 0
                    var seq = 0
                    while sent < bytes {
                        guard let chunk = try await exportStore.exportChunk(id, seq: seq), !chunk.isEmpty,
                            chunk.count <= bytes - sent
                        else {
                            logger.info(
                                "export download ended early",
                                metadata: ["export.id": "\(id)", "export.sent": "\(sent)", "export.bytes": "\(bytes)"]
                            )
                            throw ExportDownloadInterrupted()
                        }
                        try await writer.write(ByteBuffer(bytes: chunk))
                        sent += chunk.count
                        seq += 1
                    }
                    try await writer.finish(nil)
                }
            )
        }
    }
}
