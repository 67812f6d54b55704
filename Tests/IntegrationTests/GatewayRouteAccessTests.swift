import AstroDomain
import Crypto
import Foundation
import Hummingbird
import Testing

@testable import Gateway

/// What every route of the gateway shares, walked over the whole route table in process
/// (RouteGateway): the access token (401 with the verifier's code, `WWW-Authenticate: Bearer`),
/// ids that cannot be anyone's (404 `not-found`), the rate limits (429 with `Retry-After`), and
/// a deleted user's token.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRouteAccessTests {
    /// An access token the gateway did not sign as it signs (another key, an expired one).
    static func forged(
        _ gateway: RouteGateway,
        user: UserID,
        otherKey: Bool = false,
        issuedAgo: Duration = .zero
    )
        throws -> String
    {
        let configuration = gateway.configuration
        let signer = AccessTokenSigner(
            keyID: otherKey ? "another-key" : configuration.signingKeyID,
            key: otherKey ? P256.Signing.PrivateKey() : configuration.signingKey,
            issuer: configuration.issuer,
            audience: configuration.audience,
            lifetime: configuration.accessTokenLifetime
        )
        return try signer.sign(user: user, now: Date().addingTimeInterval(-Double(issuedAgo.components.seconds)))
    }

    @Test func theTableHasEveryOperationOnceAndTheseTestsKnowWhichNeedAToken() {
        // 40 operations, each routed once.
        #expect(GatewayAPI.routes.count == GatewayRoute.Operation.allCases.count)
        #expect(Set(GatewayAPI.routes.map(\.operation)) == Set(GatewayRoute.Operation.allCases))
        #expect(RouteCatalogue.anonymous.isSubset(of: Set(GatewayRoute.Operation.allCases)))
    }

    @Test func everyAuthenticatedRouteRefusesAMissingMalformedForgedOrExpiredToken() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let expired = try Self.forged(
                gateway,
                user: user.id,
                issuedAgo: gateway.configuration.accessTokenLifetime + .seconds(120)
            )
            let otherKey = try Self.forged(gateway, user: user.id, otherKey: true)
            var tampered = Array(user.token)
            tampered[tampered.count - 2] = tampered[tampered.count - 2] == "A" ? "B" : "A"
            let cases: [(header: String?, code: String)] = [
                (nil, "missing-token"),
                ("Basic dXNlcjpwYXNz", "invalid-token"),
                ("Bearer not-a-token", "invalid-token"),
                ("Bearer \(expired)", "token-expired"),
                ("Bearer \(otherKey)", "unknown-token-key"),
                ("Bearer \(String(tampered))", "invalid-token-signature"),
            ]
            var checked = 0
            for route in GatewayAPI.routes where !RouteCatalogue.anonymous.contains(route.operation) {
                let path = RouteCatalogue.concretePath(route)
                for (header, code) in cases {
                    let answer = try await gateway.call(
                        route.method,
                        path,
                        json: route.method == .get || route.method == .delete ? nil : [:],
                        headers: header.map { ["Authorization": $0] } ?? [:]
                    )
                    gateway.expectProblem(
                        answer,
                        401,
                        code,
                        "\(route.method) \(route.path) with \(header ?? "no token")"
                    )
                    #expect(answer.header("WWW-Authenticate") == "Bearer", "\(route.method) \(route.path)")
                }
                checked += 1
            }
            #expect(checked == GatewayAPI.routes.count - RouteCatalogue.anonymous.count)
            // Nothing was recorded for the user by any refused request.
            #expect(try await gateway.recordedJobs(user) == 0)
        }
    }

    @Test func everyIdInAPathThatIsNotAUUIDIsNotFound() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            var checked = 0
            for route in GatewayAPI.routes where route.path.contains("{id}") {
                for bad in ["not-a-uuid", String(repeating: "a", count: 37), "0f0f0f0f-0f0f-0f0f-0f0f-0f0f0f0f0f0"] {
                    let path = RouteCatalogue.concretePath(route).replacingOccurrences(
                        of: #"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"#,
                        with: bad,
                        options: .regularExpression,
                        range: nil
                    )
                    let answer = try await gateway.call(
                        route.method,
                        path,
                        token: user.token,
                        json: route.method == .post || route.method == .put ? [:] : nil
                    )
                    gateway.expectProblem(answer, 404, "not-found", "\(route.method) \(path)")
                }
                checked += 1
            }
            #expect(checked == 18)
            #expect(try await gateway.recordedJobs(user) == 0)
        }
    }

    @Test func aUserOverThePerUserLimitGets429WithRetryAfterAndOthersDoNot() async throws {
        try await RouteGateway.run(environment: ["RATE_LIMIT_USER_PER_SECOND": "0.01", "RATE_LIMIT_USER_BURST": "3"]) {
            gateway in
            let user = try await gateway.register()
            for _ in 0..<3 { #expect(try await gateway.call(.get, "/v1/credits", token: user.token).status == 200) }
            let limited = try await gateway.call(.get, "/v1/profiles", token: user.token)
            gateway.expectProblem(limited, 429, "rate-limited", "the fourth request of a burst of 3")
            let retryAfter = try #require(limited.header("Retry-After").flatMap(Int.init), "\(limited.headers)")
            #expect((1...100).contains(retryAfter))
            // A forged token spends nothing of the user's budget: refused 401, not 429.
            gateway.expectProblem(try await gateway.call(.get, "/v1/credits", token: "x.y.z"), 401, "invalid-token")
            // Another user has a budget of their own.
            let other = try await gateway.register()
            #expect(try await gateway.call(.get, "/v1/credits", token: other.token).status == 200)
        }
    }

    @Test func anAddressOverItsLimitGets429ButProbesAreNeverLimited() async throws {
        // Requests in process have no peer address: they share the one bucket of unknown clients.
        try await RouteGateway.run(environment: ["RATE_LIMIT_IP_PER_SECOND": "0.01", "RATE_LIMIT_IP_BURST": "2"]) {
            gateway in
            let user = try await gateway.register()
            #expect(try await gateway.call(.get, "/v1/credits", token: user.token).status == 200)
            let limited = try await gateway.call(.get, "/v1/credits", token: user.token)
            gateway.expectProblem(limited, 429, "rate-limited", "the third /v1 request of an address's burst of 2")
            #expect(limited.header("Retry-After").flatMap(Int.init) != nil)
            // An unknown path under /v1 is limited too; the probes and the document never are.
            gateway.expectProblem(try await gateway.call(.get, "/v1/nothing-here"), 429, "rate-limited")
            for path in ["/healthz", "/openapi.yaml"] {
                #expect(try await gateway.call(.get, path).status == 200, "\(path)")
            }
        }
    }

    @Test func registrationsAndAppStoreNotificationsHaveLimitsOfTheirOwn() async throws {
        try await RouteGateway.run(
            environment: [
                "RATE_LIMIT_REGISTER_PER_MINUTE": "0.5", "RATE_LIMIT_REGISTER_BURST": "2",
                "RATE_LIMIT_APPSTORE_PER_MINUTE": "0.5", "RATE_LIMIT_APPSTORE_BURST": "1",
            ]
        ) { gateway in
            _ = try await gateway.register()
            _ = try await gateway.register()
            let third = try await gateway.call(.post, "/v1/devices")
            gateway.expectProblem(third, 429, "rate-limited", "a third registration of a burst of 2")
            #expect(third.header("Retry-After").flatMap(Int.init).map { $0 >= 60 } == true, "\(third.headers)")
            // The challenge route shares the registration budget.
            gateway.expectProblem(try await gateway.call(.post, "/v1/devices/challenge"), 429, "rate-limited")
            // The first notification is judged on its body; the second is over the limit first.
            let first = try await gateway.call(.post, "/v1/appstore/notifications", json: ["signedPayload": "a.b.c"])
            gateway.expectProblem(first, 400, "invalid-notification", field: "signedPayload")
            let second = try await gateway.call(.post, "/v1/appstore/notifications", json: ["signedPayload": "a.b.c"])
            gateway.expectProblem(second, 429, "rate-limited", "a second notification of a burst of 1")
        }
    }

    @Test func aDeletedUsersTokenIsRefusedEverywhereButDeleteMe() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let deletion = try await gateway.call(.delete, "/v1/me", token: user.token)
            let (deletionJob, _) = try await gateway.expectAccepted(deletion, .userDelete, user: user)
            for route in GatewayAPI.routes
            where !RouteCatalogue.anonymous.contains(route.operation) && route.operation != .deleteCurrentUser {
                let answer = try await gateway.call(
                    route.method,
                    RouteCatalogue.concretePath(route),
                    token: user.token,
                    json: route.method == .get || route.method == .delete ? nil : [:]
                )
                gateway.expectProblem(answer, 401, "user-deleted", "\(route.method) \(route.path) after DELETE /v1/me")
            }
            // The one thing the token still reads: the deletion job the 202's Location names.
            let followed = try await gateway.call(.get, "/v1/jobs/\(deletionJob)?wait=1", token: user.token)
            #expect(followed.status == 200 && followed.json?["type"] == "user.delete", "\(followed)")
            // The refresh token makes no new access token either.
            let refresh = try await gateway.call(.post, "/v1/token", json: ["refreshToken": .string(user.refreshToken)])
            gateway.expectProblem(refresh, 401, "user-deleted", "POST /v1/token after DELETE /v1/me")
            // Asking again still answers 202 (a client that lost the first answer), with the job
            // already queued, before any worker has marked the deletion: no second job.
            let again = try await gateway.call(.delete, "/v1/me", token: user.token)
            #expect(again.status == 202 && again.json?["jobId"]?.stringValue == deletionJob.description, "\(again)")
            #expect(try await gateway.recordedJobs(user, kind: .userDelete) == 1)
        }
    }
}
