import AstroDomain
import Hummingbird
import NIOCore

/// The context of every gateway request: Hummingbird's core context, the connection's peer
/// address (for the per-address rate limits) and, on the authenticated routes, the caller.
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The socket's peer; nil when the channel has none (in-process tests).
    public let remoteAddress: SocketAddress?
    /// The verified access token's claims, set by `Authenticator` before an authenticated route's
    /// handler runs; nil on the open routes.
    var claims: AccessTokenClaims?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The verified claims of an authenticated route's caller.
    /// - Throws: `Problem` 401 `missing-token` when no `Authenticator` ran (a route registered
    ///   outside the authenticated group fails closed).
    var verifiedClaims: AccessTokenClaims {
        get throws(Problem) {
            guard let claims else { throw Authenticator.missingToken }
            return claims
        }
    }

    /// The caller of an authenticated route (`verifiedClaims`' subject).
    /// - Throws: as `verifiedClaims`.
    var user: UserID {
        get throws(Problem) { try verifiedClaims.subject }
    }
}
