import AstroDomain
import Testing

@testable import Gateway

/// Every series the gateway exports is a `MetricName` (dashboards and alerts are checked against
/// that list), and every gateway `MetricName` is exported.
@Suite struct GatewayMetricNamesTests {
    @Test func everyExportedSeriesIsAMetricName() {
        let metrics = GatewayMetrics()
        metrics.recordRequest(route: "/v1/jobs/{id}", status: 200, duration: .milliseconds(3))
        metrics.recordPublish(outcome: "confirmed")
        metrics.recordRateLimited(limit: "ip")
        metrics.streamOpened()
        metrics.streamClosed(reason: .slowClient)
        metrics.eventDelivered()
        metrics.eventDropped(reason: "no-user")
        metrics.recordAppStoreNotification(outcome: "unverified")
        let connections = ConnectionLimit(limit: 1, metrics: metrics)
        #expect(connections.acquire())
        #expect(!connections.acquire())
        let text = metrics.render()
        let exported = Set(
            text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
                .map { String($0.prefix { $0 != "{" && $0 != " " }) }
        )
        let known = Set(MetricName.allCases.flatMap(\.seriesNames))
        #expect(exported.subtracting(known).isEmpty, "not in MetricName: \(exported.subtracting(known).sorted())")
        let gateway = Set(MetricName.allCases.filter { $0.rawValue.hasPrefix("gateway_") }.flatMap(\.seriesNames))
        #expect(gateway.subtracting(exported).isEmpty, "never exported: \(gateway.subtracting(exported).sorted())")
        #expect(text.contains(#"gateway_requests_total{route="/v1/jobs/{id}",status="2xx"}"#))
    }
}
