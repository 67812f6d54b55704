import Foundation

/// Where and how spans are exported, read from the OpenTelemetry SDK's environment variables.
///
/// Export is on only when an endpoint is set: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces
/// URL, used as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, to which `/v1/traces` is
/// appended); `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off. As the
/// specification asks, a value that cannot be used is ignored with a warning (the setting counts
/// as unset), never a crash: `warnings` says which.
public struct OTLPConfiguration: Sendable, Hashable {
    /// The URL spans are POSTed to; nil when export is off.
    public var tracesEndpoint: URL?
    /// `service.name` of the exported spans.
    public var serviceName: String
    /// Other resource attributes (`OTEL_RESOURCE_ATTRIBUTES`).
    public var resourceAttributes: [String: String]
    /// Extra request headers (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`), e.g. an API key.
    public var headers: [String: String]
    /// One export request's timeout (`OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`, ms; default 10 s).
    public var timeout: Duration
    /// How often buffered spans are sent (`OTEL_BSP_SCHEDULE_DELAY`, ms; default 5 s).
    public var scheduleDelay: Duration
    /// Spans buffered at most; more are dropped and counted (`OTEL_BSP_MAX_QUEUE_SIZE`, 2048).
    public var maxQueueSize: Int
    /// Spans per request at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, 512, at most the queue size).
    public var maxExportBatchSize: Int
    /// The settings that were ignored, and why (the caller logs them).
    public var warnings: [String]

    public init(
        tracesEndpoint: URL?,
        serviceName: String,
        resourceAttributes: [String: String] = [:],
        headers: [String: String] = [:],
        timeout: Duration = .seconds(10),
        scheduleDelay: Duration = .seconds(5),
        maxQueueSize: Int = 2_048,
        maxExportBatchSize: Int = 512,
        warnings: [String] = []
    ) {
        self.tracesEndpoint = tracesEndpoint
        self.serviceName = serviceName
        self.resourceAttributes = resourceAttributes
        self.headers = headers
        self.timeout = timeout
        self.scheduleDelay = scheduleDelay
        self.maxQueueSize = max(1, maxQueueSize)
        self.maxExportBatchSize = min(max(1, maxExportBatchSize), self.maxQueueSize)
        self.warnings = warnings
    }

    /// Whether spans are exported (an endpoint is set and export is not turned off).
    public var isExporting: Bool { tracesEndpoint != nil }

    /// The longest URL, header list or resource list read.
    static let maxValueLength = 4_096

    /// Reads the environment.
    /// - Parameter defaultServiceName: the process's name, used when neither `OTEL_SERVICE_NAME`
    ///   nor `service.name` in `OTEL_RESOURCE_ATTRIBUTES` is set.
    public static func fromEnvironment(
        _ environment: [String: String],
        defaultServiceName: String
    )
        -> OTLPConfiguration
    {
        var warnings: [String] = []
        func value(_ name: String) -> String? {
            guard let raw = environment[name] else { return nil }
            let text = raw.trimmingCharacters(in: .whitespaces)
            if text.isEmpty { return nil }
            guard text.utf8.count <= maxValueLength else {
                warnings.append("\(name) is longer than \(maxValueLength) bytes; ignored")
                return nil
            }
            return text
        }
        // A traces-specific variable wins over the general one.
        func either(_ specific: String, _ general: String) -> (name: String, value: String)? {
            if let text = value(specific) { return (specific, text) }
            if let text = value(general) { return (general, text) }
            return nil
        }
        func milliseconds(
            _ name: String,
            _ text: String?,
            default fallback: Duration,
            range: ClosedRange<Int>
        )
            -> Duration
        {
            guard let text else { return fallback }
            guard let number = Int(text), range.contains(number) else {
                warnings.append("\(name)=\(text.prefix(40)) is not a whole number of milliseconds in \(range); ignored")
                return fallback
            }
            return .milliseconds(number)
        }
        func count(_ name: String, default fallback: Int, range: ClosedRange<Int>) -> Int {
            guard let text = value(name) else { return fallback }
            guard let number = Int(text), range.contains(number) else {
                warnings.append("\(name)=\(text.prefix(40)) is not a whole number in \(range); ignored")
                return fallback
            }
            return number
        }

        let resource =
            value("OTEL_RESOURCE_ATTRIBUTES").flatMap { text -> [String: String]? in
                guard let pairs = parsePairs(text) else {
                    warnings.append("OTEL_RESOURCE_ATTRIBUTES is not a list of key=value pairs; ignored")
                    return nil
                }
                return pairs
            } ?? [:]
        var serviceName = defaultServiceName
        if let name = value("OTEL_SERVICE_NAME") {
            serviceName = String(name.prefix(256))
        } else if let name = resource["service.name"], !name.isEmpty {
            serviceName = String(name.prefix(256))
        }

        var endpoint: URL?
        if let (name, text) = either("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") {
            let full =
                name == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
                ? text : (text.hasSuffix("/") ? text + "v1/traces" : text + "/v1/traces")
            if let url = URL(string: full), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https",
                url.host?.isEmpty == false
            {
                endpoint = url
            } else {
                warnings.append("\(name) is not an http or https URL; traces are not exported")
            }
        }
        if value("OTEL_SDK_DISABLED")?.lowercased() == "true" { endpoint = nil }
        if let exporter = value("OTEL_TRACES_EXPORTER")?.lowercased() {
            switch exporter {
            case "otlp": break
            case "none": endpoint = nil
            default:
                warnings.append("OTEL_TRACES_EXPORTER=\(exporter.prefix(40)) is not supported (otlp, none); using otlp")
            }
        }
        if let (name, text) = either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
            text != "http/json"
        {
            warnings.append("\(name)=\(text.prefix(40)) is not supported; spans are sent as http/json")
        }
        var headers: [String: String] = [:]
        if let (name, text) = either("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS") {
            if let pairs = parsePairs(text) {
                headers = pairs
            } else {
                warnings.append("\(name) is not a list of key=value pairs; ignored")
            }
        }
        let timeoutSetting = either("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
        let timeout = milliseconds(
            timeoutSetting?.name ?? "OTEL_EXPORTER_OTLP_TIMEOUT",
            timeoutSetting?.value,
            default: .seconds(10),
            range: 1...120_000
        )
        let delay = milliseconds(
            "OTEL_BSP_SCHEDULE_DELAY",
            value("OTEL_BSP_SCHEDULE_DELAY"),
            default: .seconds(5),
            range: 1...600_000
        )
        let queue = count("OTEL_BSP_MAX_QUEUE_SIZE", default: 2_048, range: 1...1_000_000)
        let batch = count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", default: 512, range: 1...100_000)
        return OTLPConfiguration(
            tracesEndpoint: endpoint,
            serviceName: serviceName,
            resourceAttributes: resource.filter { $0.key != "service.name" },
            headers: headers,
            timeout: timeout,
            scheduleDelay: delay,
            maxQueueSize: queue,
            maxExportBatchSize: batch,
            warnings: warnings
        )
    }

    /// `key=value,key=value` with percent-encoded values (the W3C Baggage shape the SDK variables
    /// use), at most 64 pairs; nil when malformed.
    static func parsePairs(_ text: String) -> [String: String]? {
        var pairs: [String: String] = [:]
        for member in text.split(separator: ",", omittingEmptySubsequences: true) {
            guard let equals = member.firstIndex(of: "=") else { return nil }
            let key = member[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = member[member.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty, let value = raw.removingPercentEncoding else { return nil }
            // Header names and values must not smuggle line breaks into the request.
            guard !key.contains(where: \.isNewline), !value.contains(where: \.isNewline) else { return nil }
            pairs[key] = value
            guard pairs.count <= 64 else { return nil }
        }
        return pairs
    }
}
