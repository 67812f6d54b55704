import Prometheus

/// The live events' figures: open streams, events written to streams, events not delivered (by
/// reason) and streams ended (by reason).
extension GatewayMetrics {
    private var openStreams: Gauge {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "event_streams",
                unitName: "open",
                helpText: "Open GET /v1/events streams on this replica"
            )
        )
    }

    /// One more open stream.
    func streamOpened() { openStreams.increment() }

    /// One stream fewer, and why it ended (`client` when it simply went away or was cut short).
    func streamClosed(reason: StreamEnd?) {
        openStreams.decrement()
        let label: String
        switch reason {
        case .shutdown: label = "shutdown"
        case .slowClient: label = "slow-client"
        case .tokenExpired: label = "token-expired"
        case .userDeleted: label = "user-deleted"
        case .clientGone, nil: label = "client"
        }
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "event_streams_closed",
                unitName: "total",
                helpText: "Event streams ended, by reason"
            ),
            labels: [("reason", label)]
        ).increment()
    }

    /// One event written to a stream.
    func eventDelivered() {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "events_delivered",
                unitName: "total",
                helpText: "Events written to event streams"
            )
        ).increment()
    }

    /// Events not delivered: `slow-client` (a stream's queue was full), `no-user` (the event names
    /// no user), `invalid` (not a JSON object), `too-large` (over the consumer's body limit).
    func eventDropped(reason: String, count: Int = 1) {
        registry.makeCounter(
            descriptor: MetricNameDescriptor(
                namespace: "gateway",
                metricName: "events_dropped",
                unitName: "total",
                helpText: "Events not delivered to a stream, by reason"
            ),
            labels: [("reason", reason)]
        ).increment(by: Int64(count))
    }
}
