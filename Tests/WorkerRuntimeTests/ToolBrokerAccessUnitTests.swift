import AMQP
import AstroDomain
import Foundation
import Testing

@testable import WorkerRuntime

/// The operator's and the maintenance task's broker users get only what their jobs need, and the
/// dead-letter backstop hands what it drops to astro.dead-dropped (issue 17).
@Suite struct ToolBrokerAccessUnitTests {
    func matches(_ pattern: String, _ name: String) throws -> Bool { name.wholeMatch(of: try Regex(pattern)) != nil }

    @Test func theOperatorReadsDeadLettersAndRepublishesJobs() throws {
        let granted = BrokerAccess.permissions(BrokerAccess.operator)
        #expect(granted.configure == BrokerAccess.nothing)
        for type in JobType.all {
            #expect(try matches(granted.read, BrokerNames.deadLetterQueue(of: type.rawValue)))
            #expect(try !matches(granted.read, type.rawValue), "\(type.rawValue) is a work queue")
        }
        for name in [BrokerNames.deadDroppedQueue, BrokerNames.eventsExchange, "chart.calculate.retry.1000ms"] {
            #expect(try !matches(granted.read, name), "\(name)")
        }
        #expect(try matches(granted.write, BrokerNames.jobsExchange))
        #expect(try matches(granted.write, BrokerNames.retryExchange))
        for name in [BrokerNames.eventsExchange, BrokerNames.requestsExchange, BrokerNames.deadLetterExchange, ""] {
            #expect(try !matches(granted.write, name), "\(name)")
        }
        let topics = Dictionary(
            uniqueKeysWithValues: BrokerAccess.topicPermissions(BrokerAccess.operator).map { ($0.exchange, $0) }
        )
        let jobs = try #require(topics[BrokerNames.jobsExchange])
        for type in JobType.all { #expect(try matches(jobs.write, type.rawValue)) }
        let retry = try #require(topics[BrokerNames.retryExchange])
        #expect(try matches(retry.write, "chart.calculate.dead"))
        #expect(try !matches(retry.write, "chart.calculate.retry.1000ms"))
        #expect(topics[BrokerNames.eventsExchange]?.write == BrokerAccess.nothing)
        #expect(topics[BrokerNames.requestsExchange]?.write == BrokerAccess.nothing)
    }

    @Test func theMaintenanceTaskOnlyReadsDeadLettersAndTheDroppedQueue() throws {
        let granted = BrokerAccess.permissions(BrokerAccess.maintenance)
        #expect(granted.configure == BrokerAccess.nothing)
        #expect(granted.write == BrokerAccess.nothing)
        #expect(try matches(granted.read, BrokerNames.deadDroppedQueue))
        for type in JobType.all {
            #expect(try matches(granted.read, BrokerNames.deadLetterQueue(of: type.rawValue)))
            #expect(try !matches(granted.read, type.rawValue))
        }
        for topic in BrokerAccess.topicPermissions(BrokerAccess.maintenance) {
            #expect(topic.write == BrokerAccess.nothing, "\(topic.exchange)")
        }
    }

    @Test func bothAreInTheDefinitionsWithoutAManagementTag() throws {
        let users = try #require(BrokerAccess.definitionsTemplate()["users"]?.arrayValue)
        for name in ["astro-operator", "maintenance"] {
            let user = try #require(users.first { $0["name"]?.stringValue == name }, "\(name)")
            #expect(user["tags"] == .string(""), "\(name) needs no management tag")
        }
        let objects = BrokerAccess.topologyOperatorObjects(cluster: "c")
        #expect(objects.contains("name: astro-amqp-astro-operator"))
        #expect(objects.contains("name: astro-amqp-maintenance"))
    }

    @Test func whatTheBackstopDropsGoesToTheDroppedQueue() throws {
        let policies = try #require(BrokerAccess.definitionsTemplate()["policies"]?.arrayValue)
        let backstop = try #require(policies.first { $0["name"]?.stringValue == BrokerAccess.deadLetterBackstopPolicy })
        #expect(backstop["definition"]?["dead-letter-exchange"] == .string(BrokerNames.deadLetterExchange))
        #expect(backstop["definition"]?["dead-letter-routing-key"] == .string(BrokerNames.deadDroppedQueue))
        // The dropped queue is not itself under the backstop (it would drop in turn).
        let pattern = try Regex(try #require(backstop["pattern"]?.stringValue))
        #expect(BrokerNames.deadDroppedQueue.firstMatch(of: pattern) == nil)
        let retry = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(1), maxDelay: .seconds(4))
        let topology = WorkerTopology.contract(retry: retry)
        #expect(topology.queues.contains { $0.name == BrokerNames.deadDroppedQueue })
        #expect(
            topology.bindings.contains {
                $0.queue == BrokerNames.deadDroppedQueue && $0.exchange == BrokerNames.deadLetterExchange
                    && $0.routingKey == BrokerNames.deadDroppedQueue
            }
        )
        // A worker's own topology does not declare it (its user may configure nothing).
        #expect(
            !WorkerTopology.topology(queues: ["chart.calculate"], retry: retry).queues.contains {
                $0.name == BrokerNames.deadDroppedQueue
            }
        )
    }
}

/// The maintenance probe raises counters to the database's totals: a series appears only with
/// its first reading, never goes down, and unknown names fall under `other`.
@Suite struct MaintenanceMetricsProbeTests {
    typealias Total = MaintenanceMetricsProbe.Total

    static func value(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    @Test func countersFollowTheTotalsUpwardOnly() {
        let metrics = WorkerMetrics()
        let exported = MaintenanceMetricsProbe.Exported()
        let jobs = #"astro_retention_deleted_rows_total{table="jobs"}"#
        let dropped = #"astro_dead_letters_dropped_total{queue="chart.calculate.dead",reason="max-age"}"#
        let other = #"astro_dead_letters_dropped_total{queue="other",reason="broker-max-length"}"#
        #expect(Self.value(metrics.render(), jobs) == nil)
        exported.raise(
            to: [
                Total(counter: "deleted_rows", subject: "jobs", reason: "", total: 120),
                Total(counter: "dead_letters_dropped", subject: "chart.calculate.dead", reason: "max-age", total: 3),
                Total(counter: "dead_letters_dropped", subject: "rt.1.dead", reason: "broker-max-length", total: 2),
                Total(counter: "dead_letters_dropped", subject: "rt.2.dead", reason: "broker-max-length", total: 5),
                Total(counter: "runs", subject: "completed", reason: "", total: 4),
                Total(counter: "something-else", subject: "x", reason: "", total: 9),
            ],
            metrics: metrics
        )
        var text = metrics.render()
        #expect(Self.value(text, jobs) == 120)
        #expect(Self.value(text, dropped) == 3)
        #expect(Self.value(text, other) == 7)
        #expect(Self.value(text, #"astro_maintenance_runs_total{outcome="completed"}"#) == 4)
        #expect(!text.contains("something-else"))
        exported.raise(
            to: [
                Total(counter: "deleted_rows", subject: "jobs", reason: "", total: 150),
                // A smaller total (a restored database) is not followed down.
                Total(counter: "dead_letters_dropped", subject: "chart.calculate.dead", reason: "max-age", total: 1),
            ],
            metrics: metrics
        )
        text = metrics.render()
        #expect(Self.value(text, jobs) == 150)
        #expect(Self.value(text, dropped) == 3)
    }
}
