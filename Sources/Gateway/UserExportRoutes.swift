import AstroDomain
import Foundation
import Hummingbird
import Postgres

// Export of a user's data (issue 19): `POST /v1/me/export` queues `user.export` (the story-worker
// copies the illustrations, the billing-worker packs everything into a zip stored in
// `user_exports`), `user.exported` on the event stream says it is ready, and
// `GET /v1/me/exports/{id}` downloads it with the same bearer token until it expires. A bearer
// GET rather than a signed URL: no signing key to share between replicas and rotate, the zip is
// served only to its own user, and any replica serves it from the database. Another user's
// export id answers 404, as every other resource does.

extension GatewayRoutes {
    /// `POST /v1/me/export`: queues `user.export` for the caller (202 with the job, whose id is
    /// the export's).
    static func exportCurrentUser(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws -> Response {
        let user = try authenticate(request, context: context, services)
        let idempotencyKey = try idempotencyKey(request)
        return try await accept(
            .userExport,
            user: user,
            idempotencyKey: idempotencyKey,
            requestHash: requestHash(.userExport, path: "POST /v1/me/export", Data()),
            context: context,
            services
        ) { jobID in
            (
                try UserExportRequest(jobID: jobID, userID: user).jsonData(),
                ["downloadPath": .string("/v1/me/exports/\(jobID)")]
            )
        }
    }

    /// `GET /v1/me/exports/{id}`: the zip (200 `application/zip`); 404 for no export of the
    /// caller, 409 `export-not-ready` from the 202 on while it is being built (or the code of its failure,
    /// `export-too-large`), 410 `export-expired` once past `expires_at`.
    static func getExport(
        _ request: Request,
        context: BasicRequestContext,
        _ services: GatewayServices
    ) async throws -> Response {
        let user = try authenticate(request, context: context, services)
        let id = try pathID(context, "id")
        guard let export = try await database(context, { try await services.store.export(id, user: user) }) else {
            throw Problem.notFound()
        }
        if let expires = export.expiresAt, expires <= Date() {
            throw Problem(
                status: 410,
                code: "export-expired",
                title: "Gone",
                detail: "the export expired; ask for a new one"
            )
        }
        guard let zip = export.zip else {
            if let failed = export.failedCode {
                throw Problem(status: 409, code: failed, title: "Conflict", detail: "the export could not be built")
            }
            throw Problem(
                status: 409,
                code: "export-not-ready",
                title: "Conflict",
                detail: "the export is still being built; wait for user.exported"
            )
        }
        let headers: HTTPFields = [
            .contentType: "application/zip",
            .contentDisposition: "attachment; filename=\"astrosvitla-export-\(id.uuidString.lowercased()).zip\"",
            .cacheControl: "private, no-store",
            .init("X-Content-Type-Options")!: "nosniff",
        ]
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: zip)))
    }
}

extension GatewayStore {
    /// A user's export as the download needs it.
    struct Export: Sendable {
        var zip: Data?
        var expiresAt: Date?
        var failedCode: String?
    }

    /// The export `id` of `user`; nil when there is none (or it is another user's). An export
    /// the gateway accepted (`POST /v1/me/export`, published) whose row the story-worker has not
    /// written yet is one with nothing in it: not ready, never 404, since the 202 named its path.
    /// Once that job has finished (it records the export in the same transaction), a missing row
    /// is an export deleted (expired, or its user's) or never made (the job failed): 404.
    /// - Throws: `PostgresError`.
    func export(_ id: UUID, user: UserID) async throws -> Export? {
        try await pool.withConnection { database -> Export? in
            let rows = try database.query(
                """
                SELECT zip, extract(epoch FROM expires_at)::float8 AS expires, failed_code, 0 AS rank
                FROM user_exports WHERE id = $1 AND user_id = $2
                UNION ALL
                SELECT NULL::bytea, NULL::float8, NULL::text, 1
                FROM gateway_jobs g LEFT JOIN jobs j ON j.id = g.job_id
                WHERE g.job_id = $1 AND g.user_id = $2 AND g.kind = $3 AND g.published_at IS NOT NULL
                  AND j.finished_at IS NULL
                ORDER BY rank LIMIT 1
                """,
                [id, user.uuid, JobType.userExport.rawValue]
            )
            return try rows.first.map { row in
                Export(
                    zip: try row.decode(Data?.self, "zip"),
                    expiresAt: try row.decode(Double?.self, "expires").map { Date(timeIntervalSince1970: $0) },
                    failedCode: try row.decode(String?.self, "failed_code")
                )
            }
        }
    }
}
