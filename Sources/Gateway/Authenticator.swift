import Hummingbird

/// The one place a caller is authenticated: every route of the authenticated group (every `/v1/`
/// route but device registration, its challenge, token refresh and App Store notifications) runs
/// behind it, and its handler reads the caller from `GatewayRequestContext.user`.
///
/// In order, as the answers have always come:
/// 1. `Authorization: Bearer <access token>` verified: 401 `missing-token`, `invalid-token` or the
///    verifier's code;
/// 2. when App Attest assertions are required and the request writes (POST, PUT, PATCH, DELETE):
///    a deleted user is refused (401 `user-deleted`, even on `DELETE /v1/me`: the device key is
///    gone, and the answer should say why), then the assertion is checked (`AssertionCheck`);
/// 3. the user's request spent from the per-user rate limit (429), once per request and only once
///    the token is verified, so a forged token cannot spend another user's requests;
/// 4. a deleted user's token refused (401 `user-deleted`) unless `allowDeleted` (`DELETE /v1/me`,
///    and `GET /v1/jobs/{id}`, which shows such a user only their `user.delete` job).
struct Authenticator: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let verifier: AccessTokenVerifier
    let rateLimiter: RateLimiter
    let deletedUsers: DeletedUsers
    /// App Attest assertions on writes, when `APP_ATTEST_REQUIRE_ASSERTIONS=true`.
    let assertions: AssertionCheck?
    /// Whether a user whose deletion started is let through (`DELETE /v1/me`, so that a repeated
    /// deletion answers with the job that started it, and `GET /v1/jobs/{id}` for that job).
    var allowDeleted = false

    /// 401 for a request without `Authorization`.
    static let missingToken = Problem(
        .missingToken,
        "an Authorization: Bearer access token is required"
    )

    /// This authenticator, letting deleted users through (step 4).
    var allowingDeleted: Authenticator {
        var copy = self
        copy.allowDeleted = true
        return copy
    }

    func handle(
        _ request: Request,
        context: GatewayRequestContext,
        next: (Request, GatewayRequestContext) async throws -> Response
    ) async throws -> Response {
        var context = context
        var request = request
        let claims = try verify(request, context: context)
        if let assertions, AssertionCheck.methods.contains(request.method) {
            if deletedUsers.contains(claims.subject) { throw GatewayRoutes.userDeleted }
            request = try await assertions.check(request, user: claims.subject, context: context)
        }
        try rateLimiter.check(user: claims.subject)
        if !allowDeleted, deletedUsers.contains(claims.subject) { throw GatewayRoutes.userDeleted }
        context.claims = claims
        return try await next(request, context)
    }

    /// The verified claims of the request's bearer token.
    /// - Throws: `Problem` 401 when the header is missing, malformed or the token is refused.
    func verify(_ request: Request, context: GatewayRequestContext) throws -> AccessTokenClaims {
        guard let header = request.headers[.authorization] else { throw Self.missingToken }
        guard header.utf8.count <= AccessTokenVerifier.maxTokenBytes + 7, header.hasPrefix("Bearer ") else {
            throw Problem(.invalidToken, "expected Authorization: Bearer <access token>")
        }
        do {
            return try verifier.verify(String(header.dropFirst(7)))
        } catch {
            context.logger.notice("access token refused", metadata: ["token.error": "\(error.code)"])
            throw Problem(error.code, error.description)
        }
    }
}
