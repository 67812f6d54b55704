import AppAttest
import AstroDomain
import Foundation
import Hummingbird
import Logging
import Postgres

extension GatewayRoutes {
    /// Devices and tokens: `POST /v1/devices`, `POST /v1/devices/challenge` (App Attest) and
    /// `POST /v1/token`; none of them takes a bearer token.
    struct Identity: GatewayController {
        let store: GatewayStore
        let signer: AccessTokenSigner
        let refreshTokenLifetime: Duration
        let deletedUsers: DeletedUsers
        let appAttest: AppAttestService?
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.open(.registerDevice, use: registerDevice)
            routes.open(.createDeviceChallenge, use: createDeviceChallenge)
            routes.open(.refreshToken, use: refresh)
        }

        func registerDevice(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            if appAttest != nil {
                return try await registerAttestedDevice(request, context: context)
            }
            // Without App Attest no member is read, but a body that is not an object, or App Attest
            // members not shaped as the document says, is a client bug to report, not to ignore.
            let data = try await body(request)
            if !data.allSatisfy({ [0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
                let object = try jsonObject(data)
                for (name, code, maxBytes) in [
                    ("keyId", ErrorCode.invalidKeyID, Int.max), ("attestation", .invalidAttestation, Int.max),
                    ("challenge", .invalidChallenge, 128),
                ] {
                    guard let member = object[name] else { continue }
                    guard case .string(let text) = member, text.utf8.count <= maxBytes else {
                        throw Problem(code, "\(name): not shaped as documented", field: name)
                    }
                }
            }
            let refreshToken = RefreshToken.make()
            let user = try await database(context) {
                try await store.createUser(
                    refreshTokenHash: RefreshToken.hash(refreshToken),
                    lifetime: refreshTokenLifetime
                )
            }
            context.logger.info("device registered", metadata: ["user.id": "\(user)"])
            return try tokens(user: user, refreshToken: refreshToken, status: .created)
        }

        func refresh(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws
            -> Response
        {
            let json = try jsonObject(try await body(request))
            guard case .string(let presented)? = json["refreshToken"], RefreshToken.isWellFormed(presented) else {
                throw Problem(
                    .invalidRefreshToken,
                    "refreshToken: expected the refresh token",
                    field: "refreshToken"
                )
            }
            let next = RefreshToken.make()
            let rotation = try await database(context) {
                try await store.rotate(
                    refreshTokenHash: RefreshToken.hash(presented),
                    newHash: RefreshToken.hash(next),
                    lifetime: refreshTokenLifetime
                )
            }
            let user: UserID
            switch rotation {
            case .rotated(let owner):
                user = owner
            case .reused(let owner):
                // A used token came back: a copy exists, so the family (the live token too) is gone.
                context.logger.notice("refresh token reused; its family revoked", metadata: ["user.id": "\(owner)"])
                throw Problem(.invalidRefreshToken, "the refresh token is unknown, used or expired")
            case .refused:
                throw Problem(.invalidRefreshToken, "the refresh token is unknown, used or expired")
            }
            // A refresh is rare enough to ask the database: no new access token once a deletion
            // started, even one this replica has not read yet (the erasure sweeps the rotated token).
            if deletedUsers.contains(user) { throw userDeleted }
            if try await database(context, { try await store.deletionJob(user: user) }) != nil {
                throw userDeleted
            }
            return try tokens(user: user, refreshToken: next, status: .ok)
        }

        func tokens(
            user: UserID,
            refreshToken: String,
            status: HTTPResponse.Status
        )
            throws -> Response
        {
            let access = try signer.sign(user: user)
            let answer = TokensAnswer(
                userId: user,
                accessToken: access,
                expiresIn: signer.lifetime.components.seconds,
                refreshToken: refreshToken
            )
            return try respond(answer, status: status)
        }

        /// `POST /v1/devices/challenge`: a new challenge, stored (as its hash) until it expires.
        /// - Throws: `Problem` 404 when App Attest is off, 503 when the database is unreachable.
        func createDeviceChallenge(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            guard let appAttest = appAttest else {
                throw Problem.notFound("App Attest is not enabled on this gateway (APP_ATTEST_APP_ID)")
            }
            // The route takes no body; whatever was sent is not read.
            let challenge = RefreshToken.make()
            let lifetime = appAttest.settings.challengeLifetime
            try await database(context) {
                try await store.createChallenge(hash: sha256Hex(Data(challenge.utf8)), lifetime: lifetime)
            }
            let answer = DeviceChallengeAnswer(challenge: challenge, expiresIn: lifetime.components.seconds)
            return try respond(answer, status: .created)
        }

        /// `POST /v1/devices` when App Attest is on: the challenge is consumed (it works once, even
        /// when the attestation then fails), the attestation verified, and the user made with its key.
        /// - Throws: `Problem` 400 for a malformed body, 422 `challenge-invalid` or
        ///   `attestation-invalid`, 409 `device-key-registered` for a key registered before.
        func registerAttestedDevice(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            guard let appAttest = appAttest else { throw Problem.notFound() }
            let json = try jsonObject(try await body(request))
            guard case .string(let keyIDText)? = json["keyId"], keyIDText.utf8.count <= 64,
                let keyID = Data(base64Encoded: keyIDText), keyID.count == 32
            else {
                throw Problem(
                    .invalidKeyID,
                    "keyId: the App Attest key identifier in base64",
                    field: "keyId"
                )
            }
            guard case .string(let attestationText)? = json["attestation"],
                attestationText.utf8.count <= (AttestationVerifier.maxAttestationBytes / 3 + 1) * 4,
                let attestation = Data(base64Encoded: attestationText)
            else {
                throw Problem(
                    .invalidAttestation,
                    "attestation: the attestation object in base64, at most \(AttestationVerifier.maxAttestationBytes) bytes",
                    field: "attestation"
                )
            }
            guard case .string(let challenge)? = json["challenge"], (1...128).contains(challenge.utf8.count) else {
                throw Problem(
                    .invalidChallenge,
                    "challenge: the challenge from /v1/devices/challenge",
                    field: "challenge"
                )
            }
            let live = try await database(context) {
                try await store.consumeChallenge(hash: sha256Hex(Data(challenge.utf8)))
            }
            guard live else {
                throw Problem(
                    .challengeInvalid,
                    "the challenge is unknown, used or expired; ask /v1/devices/challenge for another",
                    field: "challenge"
                )
            }
            let key: AttestedKey
            do {
                key = try await appAttest.attestations.verify(
                    attestation: attestation,
                    challenge: Data(challenge.utf8),
                    keyID: keyID
                )
            } catch {
                context.logger.notice("attestation refused", metadata: ["attest.error": "\(error)"])
                throw Problem(
                    .attestationInvalid,
                    "the App Attest attestation was refused: \(error.code.rawValue)",
                    field: "attestation"
                )
            }
            let refreshToken = RefreshToken.make()
            let user = try await database(context) {
                try await store.createUser(
                    refreshTokenHash: RefreshToken.hash(refreshToken),
                    lifetime: refreshTokenLifetime,
                    deviceKey: key,
                    environment: appAttest.settings.environment.rawValue
                )
            }
            guard let user else {
                throw Problem(
                    .deviceKeyRegistered,
                    "this App Attest key is registered already; generate a new key to register again",
                    field: "keyId"
                )
            }
            context.logger.info("device registered", metadata: ["user.id": "\(user)", "attest": "verified"])
            return try tokens(user: user, refreshToken: refreshToken, status: .created)
        }
    }
}
