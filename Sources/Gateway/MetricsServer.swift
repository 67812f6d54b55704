import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// `GET /metrics` on a port of its own (`GATEWAY_METRICS_PORT`), apart from the API.
///
/// Issue 29: served on the API's port, `/metrics` went out through the Ingress to anyone,
/// without a rate limit. On its own port it is reachable only where the deployment says: the
/// Kubernetes Service the Ingress routes to does not name the port, and the NetworkPolicy admits
/// it only from the monitoring namespace (deploy/k8s/base/gateway.yaml). Nothing else is served
/// here: every other path is 404.
enum MetricsServer {
    /// The metrics server, a `Service` to run beside the API (in its `services`).
    /// - Parameters:
    ///   - metrics: what `/metrics` renders.
    ///   - host: the address to listen on (the API's `HTTP_HOST`).
    ///   - port: the port; 0 for any free one, which is logged once listening.
    ///   - idleTimeout: how long an idle connection stays open.
    ///   - logger: the gateway's logger.
    static func application(
        metrics: GatewayMetrics,
        host: String,
        port: Int,
        idleTimeout: Duration,
        logger: Logger
    ) -> some Service {
        let router = Router(context: BasicRequestContext.self)
        router.get("/metrics") { _, _ in
            GatewayRoutes.text(metrics.render(), contentType: "text/plain; version=0.0.4")
        }
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .milliseconds(Int64(idleTimeout.milliseconds)))),
            configuration: .init(address: .hostname(host, port: port), serverName: "gateway-metrics"),
            onServerRunning: { channel in
                logger.info("metrics listening", metadata: ["metrics.port": "\(channel.localAddress?.port ?? port)"])
            },
            logger: logger
        )
    }
}
