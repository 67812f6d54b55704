import AMQP
import AppAttest
import AstroDomain
import Billing
import Foundation
import Hummingbird
import Postgres
import StoreKitVerification
import Testing
import WorkerRuntime

@testable import Gateway

/// The gateway's own routes and the account's, in process (RouteGateway): probes and the
/// document, devices and tokens, App Attest challenges, App Store notifications, jobs and their
/// long poll, the event stream, consent, deletion and export.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRouteAccountTests {
    // MARK: Probes and the document

    @Test func healthzAnswersOkAndReadyzWaitsForTheEventSubscription() async throws {
        try await RouteGateway.run(events: true) { gateway in
            let health = try await gateway.call(.get, "/healthz")
            #expect(health.status == 200 && health.text == "ok\n", "\(health)")
            #expect(health.header("X-Request-Id")?.isEmpty == false)
            try await RuntimeTestEnvironment.eventually("GET /readyz answers 200 once the events are subscribed") {
                try await gateway.call(.get, "/readyz").status == 200
            }
            #expect(try await gateway.call(.get, "/readyz").text == "ready\n")
        }
    }

    @Test func readyzIs503NotReadyWithoutTheEventSubscription() async throws {
        try await RouteGateway.run(events: false) { gateway in
            let answer = try await gateway.call(.get, "/readyz")
            gateway.expectProblem(answer, 503, "not-ready", "no event subscription")
            #expect(answer.json?["detail"]?.stringValue?.contains("events not subscribed") == true, "\(answer)")
        }
    }

    @Test func theOpenAPIDocumentIsServedAsYAMLAndAClientsRequestIdIsEchoed() async throws {
        try await RouteGateway.run { gateway in
            let answer = try await gateway.call(.get, "/openapi.yaml", headers: ["X-Request-Id": "abc-123.x_y"])
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "application/yaml")
            #expect(answer.text.hasPrefix("openapi: 3.1.0"))
            #expect(answer.header("X-Request-Id") == "abc-123.x_y")
            // An unusable id is replaced; an unknown path is a 404 problem; a known path with
            // another method 405 with Allow.
            let unknown = try await gateway.call(.get, "/nowhere", headers: ["X-Request-Id": "bad id!"])
            gateway.expectProblem(unknown, 404, "not-found")
            #expect(unknown.header("X-Request-Id") != "bad id!")
            let wrongMethod = try await gateway.call(.patch, "/v1/credits")
            gateway.expectProblem(wrongMethod, 405, "method-not-allowed")
            #expect(wrongMethod.header("Allow") == "GET")
        }
    }

    // MARK: Devices and tokens

    @Test func registeringADeviceMakesAUserWithTokensAndRefusesMisshapenBodies() async throws {
        try await RouteGateway.run { gateway in
            let answer = try await gateway.call(.post, "/v1/devices", json: [:])
            #expect(answer.status == 201, "\(answer)")
            let json = try #require(answer.json)
            let user = try #require(json["userId"]?.stringValue.flatMap(UserID.init))
            #expect(json["tokenType"] == "Bearer")
            #expect(json["expiresIn"] == .number(900))
            #expect(json["refreshToken"]?.stringValue.map(RefreshToken.isWellFormed) == true)
            let users = try await gateway.admin.withConnection { database in
                try database.query("SELECT count(*)::int AS n FROM users WHERE id = $1", [user.uuid]).first?
                    .decode(Int.self, "n")
            }
            #expect(users == 1)
            // The token works.
            let token = try #require(json["accessToken"]?.stringValue)
            #expect(try await gateway.call(.get, "/v1/credits", token: token).status == 200)

            let refusals: [(raw: String, code: String, field: String?)] = [
                ("[1]", "invalid-json", nil),
                ("{", "invalid-json", nil),
                (#"{"keyId": 5}"#, "invalid-key-id", "keyId"),
                (#"{"attestation": false}"#, "invalid-attestation", "attestation"),
                (#"{"challenge": "\#(String(repeating: "c", count: 129))"}"#, "invalid-challenge", "challenge"),
            ]
            for refusal in refusals {
                let refused = try await gateway.call(.post, "/v1/devices", raw: refusal.raw)
                gateway.expectProblem(refused, 400, refusal.code, field: refusal.field, refusal.raw)
            }
        }
    }

    @Test func aRefreshTokenRotatesOnceAndItsReuseRevokesTheFamily() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let rotated = try await gateway.call(.post, "/v1/token", json: ["refreshToken": .string(user.refreshToken)])
            #expect(rotated.status == 200, "\(rotated)")
            #expect(rotated.json?["userId"] == .string(user.id.description))
            let next = try #require(rotated.json?["refreshToken"]?.stringValue)
            #expect(next != user.refreshToken)
            let access = try #require(rotated.json?["accessToken"]?.stringValue)
            #expect(try await gateway.call(.get, "/v1/credits", token: access).status == 200)
            // The used token again: refused, and the family with it (the live token too).
            let reused = try await gateway.call(.post, "/v1/token", json: ["refreshToken": .string(user.refreshToken)])
            gateway.expectProblem(reused, 401, "invalid-refresh-token", "a used refresh token")
            let revoked = try await gateway.call(.post, "/v1/token", json: ["refreshToken": .string(next)])
            gateway.expectProblem(revoked, 401, "invalid-refresh-token", "the live token of a revoked family")
            // Unknown and malformed tokens; bodies that are not the document's.
            let unknown = try await gateway.call(
                .post,
                "/v1/token",
                json: ["refreshToken": .string(RefreshToken.make())]
            )
            gateway.expectProblem(unknown, 401, "invalid-refresh-token", "an unknown token")
            for body in [#"{"refreshToken": "short"}"#, #"{"refreshToken": 7}"#, "{}"] {
                let refused = try await gateway.call(.post, "/v1/token", raw: body)
                gateway.expectProblem(refused, 401, "invalid-refresh-token", field: "refreshToken", body)
            }
            gateway.expectProblem(try await gateway.call(.post, "/v1/token", raw: "nope"), 400, "invalid-json")
        }
    }

    @Test func challengesAre404WithoutAppAttest() async throws {
        try await RouteGateway.run { gateway in
            gateway.expectProblem(try await gateway.call(.post, "/v1/devices/challenge"), 404, "not-found")
        }
    }

    @Test func withAppAttestAChallengeWorksOnceForOneValidAttestation() async throws {
        let (authority, rootFile) = try GatewayAppAttestTests.authority()
        defer { try? FileManager.default.removeItem(at: rootFile) }
        try await RouteGateway.run(
            environment: [
                "APP_ATTEST_APP_ID": GatewayAppAttestTests.appID, "APP_ATTEST_ENVIRONMENT": "development",
                "APP_ATTEST_ROOT_CA_FILE": rootFile.path,
            ]
        ) { gateway in
            let issued = try await gateway.call(.post, "/v1/devices/challenge")
            #expect(issued.status == 201, "\(issued)")
            #expect(issued.json?["expiresIn"] == .number(300))
            let challenge = try #require(issued.json?["challenge"]?.stringValue)
            let stored = try await gateway.admin.withConnection { database in
                try database.query(
                    "SELECT count(*)::int AS n FROM gateway_attest_challenges WHERE challenge_hash = $1",
                    [sha256Hex(Data(challenge.utf8))]
                ).first?.decode(Int.self, "n")
            }
            #expect(stored == 1)
            // Without an attestation: 400; a device without App Attest cannot register.
            gateway.expectProblem(
                try await gateway.call(.post, "/v1/devices", json: [:]),
                400,
                "invalid-key-id",
                field: "keyId"
            )
            let device = DevAppAttest.Device()
            let body = GatewayAppAttestTests.registration(
                keyID: device.keyID,
                attestation: try authority.attest(
                    device: device,
                    challenge: Data(challenge.utf8),
                    appID: GatewayAppAttestTests.appID
                ),
                challenge: challenge
            )
            let registered = try await gateway.call(.post, "/v1/devices", raw: String(decoding: body, as: UTF8.self))
            #expect(registered.status == 201, "\(registered)")
            let again = try await gateway.call(.post, "/v1/devices", raw: String(decoding: body, as: UTF8.self))
            gateway.expectProblem(again, 422, "challenge-invalid", "the challenge a second time")
        }
    }

    // MARK: App Store notifications

    @Test func aVerifiedNotificationIsPublishedAndOthersAreRefusedBeforeIt() async throws {
        try await RouteGateway.run { gateway in
            let transaction = try BillingLedgerIntegrationTests.signedPurchase(
                "com.astrosvitla.report.credit.single",
                user: nil
            ).jws
            let jws = try GatewayAppleTests.signedNotification("REFUND", about: transaction, uuid: UUID())
            let answer = try await gateway.call(
                .post,
                "/v1/appstore/notifications",
                json: ["signedPayload": .string(jws)]
            )
            #expect(answer.status == 200, "\(answer)")
            let jobID = try #require(answer.json?["jobId"]?.stringValue.flatMap(JobID.init))
            let message = try await gateway.publishedMessage(jobID)
            #expect(message.routingKey == JobType.billingStoreNotification.rawValue)
            #expect(try JSONValue.parse(message.body)["signedPayload"] == .string(jws))
            // The same notification again (Apple retries) is the same job.
            let again = try await gateway.call(
                .post,
                "/v1/appstore/notifications",
                json: ["signedPayload": .string(jws)]
            )
            #expect(again.json?["jobId"] == .string(jobID.description))

            let start = Date().addingTimeInterval(-86_400)
            let forger = try DevPKI.generate(
                notValidBefore: start,
                notValidAfter: start.addingTimeInterval(86_400 * 30)
            )
            let forged = try GatewayAppleTests.signedNotification(
                "REFUND",
                about: transaction,
                uuid: UUID(),
                signer: forger.signer
            )
            let refused = try await gateway.call(
                .post,
                "/v1/appstore/notifications",
                json: ["signedPayload": .string(forged)]
            )
            gateway.expectProblem(refused, 403, "notification-unverified", "a notification of another PKI")
            gateway.expectProblem(
                try await gateway.call(.post, "/v1/appstore/notifications", json: ["signedPayload": 5]),
                400,
                "invalid-notification",
                field: "signedPayload"
            )
            gateway.expectProblem(
                try await gateway.call(.post, "/v1/appstore/notifications", raw: "[]"),
                400,
                "invalid-json"
            )
            let huge = try await gateway.call(
                .post,
                "/v1/appstore/notifications",
                raw: #"{"signedPayload": ""# + String(repeating: "a", count: 70_000) + #""}"#
            )
            gateway.expectProblem(huge, 413, "body-too-large")
            // Only the verified one was published.
            let types = gateway.published.all.map(\.routingKey)
            #expect(types == [JobType.billingStoreNotification.rawValue, JobType.billingStoreNotification.rawValue])
        }
    }

    @Test func notificationsAre503WithoutAnAppStorePolicy() async throws {
        try await RouteGateway.run(environment: ["BILLING_ENVIRONMENT": "", "BILLING_TRUSTED_ROOTS": ""]) { gateway in
            let answer = try await gateway.call(.post, "/v1/appstore/notifications", json: ["signedPayload": "a.b.c"])
            gateway.expectProblem(answer, 503, "appstore-notifications-off")
        }
    }

    // MARK: Jobs

    @Test func aJobIsItsUsersToReadAndTheLongPollAnswersWhenItEnds() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let (jobID, _) = try await gateway.expectAccepted(
                try await gateway.call(.post, "/v1/me/export", token: user.token),
                .userExport,
                user: user
            )
            let queued = try await gateway.call(.get, "/v1/jobs/\(jobID)", token: user.token)
            #expect(queued.status == 200, "\(queued)")
            #expect(queued.json?["jobId"] == .string(jobID.description))
            #expect(queued.json?["type"] == "user.export")
            #expect(queued.json?["status"] == "queued")
            #expect(queued.json?["attempts"] == 0)
            #expect(queued.json?["createdAt"]?.stringValue != nil)
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/jobs/\(jobID)", token: other.token),
                404,
                "not-found",
                "another user's job"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/jobs/\(UUID().uuidString.lowercased())", token: user.token),
                404,
                "not-found",
                "an unknown job"
            )
            for wait in ["31", "-1", "1.5", "x"] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/jobs/\(jobID)?wait=\(wait)", token: user.token),
                    400,
                    "invalid-wait",
                    field: "wait",
                    "wait=\(wait)"
                )
            }
            // A wait on a running job answers after the wait with its state.
            let started = ContinuousClock.now
            let waited = try await gateway.call(.get, "/v1/jobs/\(jobID)?wait=1", token: user.token)
            #expect(waited.json?["status"] == "queued")
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            // The worker's row, finished: shown with its result, at once even with a wait.
            try await gateway.admin.withConnection { database in
                _ = try database.execute(
                    """
                    INSERT INTO jobs (id, kind, status, attempts, user_id, result, finished_at)
                    VALUES ($1, 'user.export', 'succeeded', 1, $2, '{"exportId": "x"}', now())
                    """,
                    [jobID.uuid, user.id.uuid]
                )
            }
            let quick = ContinuousClock.now
            let done = try await gateway.call(.get, "/v1/jobs/\(jobID)?wait=20", token: user.token)
            #expect(ContinuousClock.now - quick < .seconds(5))
            #expect(done.json?["status"] == "succeeded", "\(done)")
            #expect(done.json?["result"]?["exportId"] == "x")
            #expect(done.json?["finishedAt"]?.stringValue != nil)
        }
    }

    @Test func aJobsErrorIsAProblemDocumentWithTheCataloguesStatusAndTitle() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            // Rows as workers write them: `jobs.error` is `{"code", "message"}`.
            func failedJob(_ status: String, _ error: String) async throws -> JSONValue? {
                let jobID = JobID.random()
                try await gateway.admin.withConnection { database in
                    _ = try database.execute(
                        """
                        INSERT INTO jobs (id, kind, status, attempts, user_id, error, result, finished_at)
                        VALUES ($1, 'chart.calculate', $2, 1, $3, $4::jsonb, '{"userId": "u"}', now())
                        """,
                        [jobID.uuid, status, user.id.uuid, error]
                    )
                }
                let answer = try await gateway.call(.get, "/v1/jobs/\(jobID)", token: user.token)
                #expect(answer.status == 200, "\(answer)")
                #expect(answer.json?["status"]?.stringValue == status, "\(answer)")
                #expect(answer.json?["result"]?["userId"] == "u", "the result is shown beside the error: \(answer)")
                return answer.json?["error"]
            }
            let refused = try await failedJob(
                "failed",
                #"{"code": "nonexistent-local-time", "message": "profile.birthTime: 02:30 did not happen"}"#
            )
            #expect(
                refused
                    == [
                        "type": "https://astrosvitla.app/problems/nonexistent-local-time",
                        "title": "Invalid request",
                        "status": 422,
                        "detail": "profile.birthTime: 02:30 did not happen",
                        "code": "nonexistent-local-time",
                        // The old shape's member, kept for one release.
                        "message": "profile.birthTime: 02:30 did not happen",
                    ],
                "\(String(describing: refused))"
            )
            let dead = try await failedJob("dead", #"{"code": "profile-not-found", "message": "no such profile"}"#)
            #expect(dead?["status"] == 404 && dead?["title"] == "Not found", "\(String(describing: dead))")
            // A code this build does not know is answered as the catalogue answers one: 500.
            let unknown = try await failedJob("failed", #"{"code": "brand-new-code", "message": "m"}"#)
            #expect(
                unknown?["status"] == 500 && unknown?["title"] == "Internal error"
                    && unknown?["code"] == "brand-new-code" && unknown?["detail"] == "m",
                "\(String(describing: unknown))"
            )
        }
    }

    // MARK: Events

    @Test func anEventStreamCarriesTheUsersEventsAndEndsWhenTheUserIsDeleted() async throws {
        try await RouteGateway.run(events: true) { gateway in
            try await RuntimeTestEnvironment.eventually("the gateway's events are subscribed") {
                try await gateway.call(.get, "/readyz").status == 200
            }
            let user = try await gateway.register()
            let stream = Task { try await gateway.call(.get, "/v1/events", token: user.token) }
            try await RuntimeTestEnvironment.eventually(
                "the stream is open (gateway_event_streams_open)",
                observe: { MaintenanceMetricsTests.value(gateway.metrics.render(), "gateway_event_streams_open") },
                until: { $0 == 1 }
            )
            // A user's event, as a worker's outbox publishes it, reaches the stream.
            let publisher = try await RuntimeTestEnvironment.contractPublisher(purging: [])
            let eventID = UUID().uuidString.lowercased()
            var properties = MessageProperties(contentType: "application/json")
            properties.messageID = eventID
            properties.type = "chart.calculated"
            try await publisher.publish(
                OutgoingMessage(
                    exchange: BrokerNames.eventsExchange,
                    routingKey: "chart.calculated",
                    body: JSONValue.object([
                        "type": "chart.calculated", "userId": .string(user.id.description),
                        "jobId": .string(JobID.random().description),
                    ]).jsonData(),
                    properties: properties
                )
            )
            await publisher.close()
            try await RuntimeTestEnvironment.eventually(
                "the event is delivered (gateway_events_delivered_total)",
                observe: { MaintenanceMetricsTests.value(gateway.metrics.render(), "gateway_events_delivered_total") },
                until: { ($0 ?? 0) >= 1 }
            )
            try await gateway.expectAccepted(
                try await gateway.call(.delete, "/v1/me", token: user.token),
                .userDelete,
                user: user
            )
            let answer = try await stream.value
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "text/event-stream")
            #expect(answer.text.hasPrefix(": live events\nretry: 3000\n\n"), "\(answer)")
            #expect(answer.text.contains("id: \(eventID)\nevent: chart.calculated\n"), "\(answer)")
            #expect(answer.text.contains("event: end\ndata: {\"code\":\"user-deleted\""), "\(answer)")
        }
    }

    // MARK: Consent

    @Test func consentIsRecordedOncePerAnswerAndReadBackByItsUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            gateway.expectProblem(try await gateway.call(.get, "/v1/consent", token: user.token), 404, "not-found")
            let now = ISO8601.string(from: Date().addingTimeInterval(-60))
            let body: JSONValue = ["consented": true, "textVersion": "v1.2", "answeredAt": .string(now)]
            let put = try await gateway.call(.put, "/v1/consent", token: user.token, json: body)
            #expect(put.status == 200, "\(put)")
            #expect(put.json?["consented"] == true && put.json?["textVersion"] == "v1.2")
            #expect(put.json?["recordedAt"]?.stringValue != nil)
            #expect(try await gateway.call(.put, "/v1/consent", token: user.token, json: body).status == 200)
            let rows = try await gateway.admin.withConnection { database in
                try database.query(
                    "SELECT count(*)::int AS n FROM consumption_consents WHERE user_id = $1",
                    [user.id.uuid]
                ).first?.decode(Int.self, "n")
            }
            #expect(rows == 1, "a repeated answer adds no row")
            let read = try await gateway.call(.get, "/v1/consent", token: user.token)
            #expect(read.status == 200 && read.json?["consented"] == true, "\(read)")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/consent", token: other.token),
                404,
                "not-found",
                "another user's consent"
            )

            let future = ISO8601.string(from: Date().addingTimeInterval(3600))
            let refusals: [(body: JSONValue, status: Int, code: String, field: String?)] = [
                (["textVersion": "v1", "answeredAt": .string(now)], 422, "missing-field", "consented"),
                (
                    ["consented": "yes", "textVersion": "v1", "answeredAt": .string(now)], 422, "invalid-field-type",
                    "consented"
                ),
                (["consented": true, "answeredAt": .string(now)], 422, "missing-field", "textVersion"),
                (
                    ["consented": true, "textVersion": "v 1", "answeredAt": .string(now)], 422, "invalid-text-version",
                    "textVersion"
                ),
                (["consented": true, "textVersion": "v1"], 422, "missing-field", "answeredAt"),
                (
                    ["consented": true, "textVersion": "v1", "answeredAt": .string(future)], 422, "invalid-answered-at",
                    "answeredAt"
                ),
                ([1, 2], 400, "invalid-json", nil),
            ]
            for refusal in refusals {
                let answer = try await gateway.call(.put, "/v1/consent", token: user.token, json: refusal.body)
                gateway.expectProblem(answer, refusal.status, refusal.code, field: refusal.field, "\(refusal.body)")
            }
        }
    }

    // MARK: Deletion and export

    @Test func deletingTheAccountQueuesUserDeleteWithIdempotency() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            try await gateway.expectIdempotent(
                .delete,
                "/v1/me",
                user: user,
                kind: .userDelete,
                body: nil,
                // Every other request of a deleted user is refused before its key is read.
                other: nil
            )
        }
    }

    @Test func anExportIsQueuedOnceAtATimeAndDownloadedByItsUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let first = try await gateway.call(.post, "/v1/me/export", token: user.token)
            let (jobID, body) = try await gateway.expectAccepted(first, .userExport, user: user)
            #expect(first.json?["downloadPath"] == .string("/v1/me/exports/\(jobID)"))
            #expect(body["userId"] == .string(user.id.description))
            // While it is built, asking again answers the same export and queues nothing.
            let again = try await gateway.call(.post, "/v1/me/export", token: user.token)
            #expect(again.status == 202 && again.json?["jobId"] == .string(jobID.description), "\(again)")
            #expect(try await gateway.recordedJobs(user, kind: .userExport) == 1)
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/me/exports/\(jobID)", token: user.token),
                409,
                "export-not-ready"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/me/exports/\(jobID)", token: other.token),
                404,
                "not-found",
                "another user's export"
            )

            // Exports as the billing-worker stores them: ready, expired, failed.
            let ready = UUID()
            let expired = UUID()
            let failed = UUID()
            let zip = Data("PK-not-really-a-zip".utf8)
            try await gateway.admin.withTransaction { database in
                _ = try database.execute(
                    """
                    INSERT INTO user_exports (id, user_id, ready_at, expires_at, bytes)
                    VALUES ($1, $3, now(), now() + interval '1 day', $4),
                           ($2, $3, now() - interval '2 days', now() - interval '1 day', $4)
                    """,
                    [ready, expired, user.id.uuid, zip.count]
                )
                _ = try database.execute(
                    "INSERT INTO user_export_chunks (export_id, seq, data) VALUES ($1, 0, $2)",
                    [ready, zip]
                )
                _ = try database.execute(
                    "INSERT INTO user_exports (id, user_id, failed_code) VALUES ($1, $2, 'export-too-large')",
                    [failed, user.id.uuid]
                )
            }
            let download = try await gateway.call(
                .get,
                "/v1/me/exports/\(ready.uuidString.lowercased())",
                token: user.token
            )
            #expect(download.status == 200, "\(download)")
            #expect(download.body == zip)
            #expect(download.header("Content-Type") == "application/zip")
            #expect(download.header("Cache-Control") == "private, no-store")
            #expect(download.header("Content-Disposition")?.contains(ready.uuidString.lowercased()) == true)
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/me/exports/\(ready.uuidString.lowercased())", token: other.token),
                404,
                "not-found",
                "another user's ready export"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/me/exports/\(expired.uuidString.lowercased())", token: user.token),
                410,
                "export-expired"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/me/exports/\(failed.uuidString.lowercased())", token: user.token),
                409,
                "export-too-large"
            )
        }
    }

    @Test func exportIdempotencyKeysReplayAndRefuseAnotherRequest() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            try await gateway.expectIdempotent(
                .post,
                "/v1/me/export",
                user: user,
                kind: .userExport,
                body: nil,
                other: .init(method: .delete, uri: "/v1/me", body: nil)
            )
        }
    }
}
