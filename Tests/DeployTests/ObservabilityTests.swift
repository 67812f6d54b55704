import AstroDomain
import Foundation
import Testing
import Yams

// Offline checks of deploy/observability: every metric a dashboard or an alert queries is one
// the code exports (AstroDomain's MetricName) or the broker's exporter's; the PrometheusRule
// carries exactly the rule file's groups; every alert has a threshold, a why and a promtool test;
// Prometheus in docker compose scrapes every worker. (`promtool check rules` / `test rules`
// themselves run in scripts/test.sh.)

/// The repository: ASTRO_REPO_ROOT when set, else three levels above this file.
private let repositoryRoot: URL = {
    if let override = ProcessInfo.processInfo.environment["ASTRO_REPO_ROOT"], !override.isEmpty {
        return URL(fileURLWithPath: override, isDirectory: true)
    }
    return URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent()  // DeployTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()
}()

private let observability = repositoryRoot.appendingPathComponent("deploy/observability")

/// Metrics from outside this code base that dashboards and rules may query: Prometheus' own `up`
/// and RabbitMQ's exporter (rabbitmq_prometheus with per-object metrics, checked against the
/// exporter of RabbitMQ 3.10).
let externalMetrics: Set<String> = [
    "up",
    "rabbitmq_queue_messages", "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked",
    "rabbitmq_queue_consumers", "rabbitmq_connections", "rabbitmq_channels",
    "rabbitmq_process_resident_memory_bytes", "rabbitmq_resident_memory_limit_bytes",
]

/// The workers Prometheus must scrape (and the gateway).
private let scrapedServices = ["chart-worker", "billing-worker", "report-worker", "story-worker", "gateway"]

/// The metric names a PromQL expression selects: identifiers that are not functions, keywords,
/// label names (inside `{…}` or a `by (…)` list) or durations.
func metricNames(inPromQL expression: String) -> Set<String> {
    var text = ""
    // String literals out first: a label value may contain anything.
    var inString = false
    var escaped = false
    for character in expression {
        if inString {
            if escaped {
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                inString = false
            }
            continue
        }
        if character == "\"" {
            inString = true
            text.append("\"\"")
            continue
        }
        text.append(character)
    }
    text = text.replacing(/\{[^}]*\}/, with: "{}")
    text = text.replacing(/\[[^\]]*\]/, with: "[]")
    text = text.replacing(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/, with: " ")
    let keywords: Set<String> = [
        "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
        "inf", "nan",
    ]
    var names: Set<String> = []
    for match in text.matches(of: /[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?/) {
        guard match.output.1 == nil else { continue }  // a function call
        let name = String(match.output.0)
        // A number's exponent (1e3) or unit is not a name.
        if let start = text.index(match.range.lowerBound, offsetBy: -1, limitedBy: text.startIndex),
            start >= text.startIndex, text[start].isNumber || text[start] == "."
        {
            continue
        }
        if !keywords.contains(name.lowercased()) { names.insert(name) }
    }
    return names
}

/// The series names the code can export.
private var exportedSeries: Set<String> { Set(MetricName.allCases.flatMap(\.seriesNames)) }

private func yaml(_ path: String) throws -> Any {
    let text = try String(contentsOf: observability.appendingPathComponent(path), encoding: .utf8)
    return try #require(try Yams.load(yaml: text))
}

/// The alert rules of alerts.yml: each rule's mapping.
private func alertRules() throws -> [[String: Any]] {
    let document = try #require(try yaml("alerts.yml") as? [String: Any])
    let groups = try #require(document["groups"] as? [[String: Any]])
    return groups.flatMap { ($0["rules"] as? [[String: Any]]) ?? [] }
}

/// Every `expr` of every panel of every dashboard, with the dashboard's file name.
private func dashboardQueries() throws -> [(file: String, expr: String)] {
    let folder = observability.appendingPathComponent("dashboards")
    let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }
    var queries: [(String, String)] = []
    for file in files.sorted() {
        let data = try Data(contentsOf: folder.appendingPathComponent(file))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        for panel in (dashboard["panels"] as? [[String: Any]]) ?? [] {
            for target in (panel["targets"] as? [[String: Any]]) ?? [] {
                if let expr = target["expr"] as? String { queries.append((file, expr)) }
            }
        }
    }
    return queries
}

/// A YAML or JSON value as canonical JSON text (sorted keys), for comparing documents.
private func canonical(_ value: Any) throws -> String {
    String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
}

@Suite("Observability (deploy/observability)")
struct ObservabilityTests {
    @Test func thePromQLNameParserFindsMetricsOnly() {
        #expect(
            metricNames(
                inPromQL:
                    #"histogram_quantile(0.95, sum by (queue, le) (rate(astro_job_duration_seconds_bucket{queue=~"a\"b"}[5m])))"#
            ) == ["astro_job_duration_seconds_bucket"]
        )
        #expect(
            metricNames(inPromQL: "(up{service=~\"x\"} == 0) or (astro_worker_ready == 0) and on (instance) foo")
                == ["up", "astro_worker_ready", "foo"]
        )
        #expect(metricNames(inPromQL: "time() - max(x_seconds) > 1e3") == ["x_seconds"])
    }

    @Test func everyDashboardQueriesOnlyExportedMetrics() throws {
        let queries = try dashboardQueries()
        let files = Set(queries.map(\.file))
        // One dashboard per concern.
        #expect(
            files == [
                "astro-jobs.json", "astro-errors.json", "astro-billing.json", "astro-llm.json", "astro-infra.json",
            ]
        )
        let known = exportedSeries.union(externalMetrics)
        var used: Set<String> = []
        for (file, expr) in queries {
            let names = metricNames(inPromQL: expr)
            #expect(!names.isEmpty, "\(file): \(expr) selects no metric")
            let unknown = names.subtracting(known)
            #expect(unknown.isEmpty, "\(file): \(expr) queries \(unknown.sorted()), which nothing exports")
            used.formUnion(names)
        }
        // The business metrics of issue 17 all appear on a dashboard.
        let business: [MetricName] = [
            .creditsIssued, .creditsConsumed, .creditsRefunded, .creditsRevoked, .purchasesVerified,
            .purchasesRejected, .reports, .stories, .storyPages, .llmTokens, .llmCost, .outboxOldestUnsentAge,
            .deadLetters, .ledgerUnbalancedUsers,
        ]
        for metric in business {
            #expect(used.contains(metric.rawValue), "no dashboard shows \(metric.rawValue)")
        }
    }

    @Test func everyAlertQueriesOnlyExportedMetricsAndSaysWhy() throws {
        let rules = try alertRules()
        #expect(rules.count >= 7)
        let known = exportedSeries.union(externalMetrics)
        for rule in rules {
            let name = rule["alert"] as? String ?? "?"
            let expr = try #require(rule["expr"] as? String, "\(name) has no expr")
            let unknown = metricNames(inPromQL: expr).subtracting(known)
            #expect(unknown.isEmpty, "\(name): queries \(unknown.sorted()), which nothing exports")
            // A threshold: a comparison with a number.
            #expect(expr.contains(/(>|<|==)\s*[0-9]/), "\(name): no threshold in \(expr)")
            #expect(rule["for"] != nil, "\(name): no `for`")
            let labels = rule["labels"] as? [String: Any] ?? [:]
            #expect(["warning", "critical"].contains(labels["severity"] as? String ?? ""), "\(name): severity")
            let annotations = rule["annotations"] as? [String: Any] ?? [:]
            for key in ["summary", "description"] {
                let text = annotations[key] as? String ?? ""
                #expect(!text.isEmpty && !text.contains("\n"), "\(name): \(key) must be one line")
            }
        }
        // The alerts issue 17 asks for.
        let names = Set(rules.compactMap { $0["alert"] as? String })
        for wanted in [
            "AstroDeadLetterQueueNotEmpty", "AstroOutboxLagHigh", "AstroJobRetriesHigh", "AstroQueueWithoutConsumer",
            "AstroLedgerUnbalanced", "AstroLLMSpendOverBudget", "AstroWorkerNotReady",
        ] {
            #expect(names.contains(wanted), "no alert \(wanted)")
        }
    }

    @Test func everyAlertHasAPromtoolTestThatFiresIt() throws {
        let document = try #require(try yaml("alerts.test.yml") as? [String: Any])
        #expect((document["rule_files"] as? [String]) == ["alerts.yml"])
        var fired: Set<String> = []
        for test in (document["tests"] as? [[String: Any]]) ?? [] {
            for check in (test["alert_rule_test"] as? [[String: Any]]) ?? [] {
                if let name = check["alertname"] as? String, !((check["exp_alerts"] as? [Any]) ?? []).isEmpty {
                    fired.insert(name)
                }
            }
        }
        let alerts = Set(try alertRules().compactMap { $0["alert"] as? String })
        #expect(
            alerts.subtracting(fired).isEmpty,
            "alerts without a firing test: \(alerts.subtracting(fired).sorted())"
        )
    }

    @Test func thePrometheusRuleCarriesExactlyTheRuleFilesGroups() throws {
        let rules = try #require(try yaml("alerts.yml") as? [String: Any])
        let resource = try #require(try yaml("k8s/prometheusrule.yaml") as? [String: Any])
        #expect(resource["apiVersion"] as? String == "monitoring.coreos.com/v1")
        #expect(resource["kind"] as? String == "PrometheusRule")
        let spec = try #require(resource["spec"] as? [String: Any])
        #expect(try canonical(spec["groups"] ?? []) == canonical(rules["groups"] ?? []))
    }

    @Test func composePrometheusScrapesEveryWorkerAndLoadsTheRules() throws {
        let config = try #require(try yaml("prometheus.yml") as? [String: Any])
        #expect((config["rule_files"] as? [String]) == ["alerts.yml"])
        var names: Set<String> = []
        var ports: Set<Int> = []
        for job in (config["scrape_configs"] as? [[String: Any]]) ?? [] {
            for discovery in (job["dns_sd_configs"] as? [[String: Any]]) ?? [] {
                names.formUnion((discovery["names"] as? [String]) ?? [])
                if let port = discovery["port"] as? Int { ports.insert(port) }
            }
        }
        #expect(names == Set(scrapedServices))
        // Compose's HTTP_PORT for the workers, GATEWAY_METRICS_PORT for the gateway (issue 29:
        // the gateway's /metrics is not on its public port).
        #expect(ports == [8080, 9464])

        let composeText = try String(
            contentsOf: repositoryRoot.appendingPathComponent("docker-compose.yml"),
            encoding: .utf8
        )
        let compose = try #require(try Yams.load(yaml: composeText) as? [String: Any])
        let services = try #require(compose["services"] as? [String: Any])
        let prometheus = try #require(services["prometheus"] as? [String: Any], "docker-compose.yml has no prometheus")
        let volumes = (prometheus["volumes"] as? [String]) ?? []
        #expect(volumes.contains("./deploy/observability/prometheus.yml:/etc/prometheus/prometheus.yml:ro"))
        #expect(volumes.contains("./deploy/observability/alerts.yml:/etc/prometheus/alerts.yml:ro"))
        for service in scrapedServices {
            #expect(services[service] != nil, "prometheus.yml scrapes \(service), which compose does not run")
        }
    }
}
