import ArgumentParser
import AstroDomain
import Foundation
import WorkerRuntime

struct BrokerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "The broker's users and what each may do.",
        subcommands: [BrokerDefinitions.self, BrokerPermissions.self, BrokerKubernetes.self]
    )
}

struct BrokerDefinitions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "definitions",
        abstract: "Print RabbitMQ definitions: one user per service, limited to what it publishes and consumes.",
        discussion: """
            Load the output at the broker's boot (load_definitions in rabbitmq.conf) or \
            import it (rabbitmqctl import_definitions). Passwords come from RABBITMQ_USER \
            and RABBITMQ_PASSWORD (the administrator) and CHART_WORKER_AMQP_PASSWORD, \
            BILLING_WORKER_AMQP_PASSWORD, REPORT_WORKER_AMQP_PASSWORD, \
            STORY_WORKER_AMQP_PASSWORD, CLIENT_AMQP_PASSWORD and GATEWAY_AMQP_PASSWORD; a service whose variable \
            is unset is left out. With --template every password is a ${VARIABLE} \
            placeholder (deploy/rabbitmq/definitions.json is this template).

            The definitions also hold the work queues' delivery-limit policy: on quorum \
            queues the broker dead-letters a message returned unacknowledged \
            \(BrokerAccess.brokerDeliveryLimit) times, a backstop above the workers' own \
            DELIVERY_LIMIT.
            """
    )

    @Flag(help: "Print placeholders instead of passwords.") var template = false

    func run() async throws {
        let definitions: JSONValue
        if template {
            definitions = BrokerAccess.definitionsTemplate()
        } else {
            let environment = ProcessInfo.processInfo.environment
            guard let password = environment["RABBITMQ_PASSWORD"], !password.isEmpty else {
                throw ValidationError("RABBITMQ_PASSWORD (the administrator's password) is not set")
            }
            var passwords: [String: String] = [:]
            for service in BrokerAccess.services {
                if let value = environment[service.passwordVariable], !value.isEmpty { passwords[service.user] = value }
            }
            definitions = BrokerAccess.definitions(
                administrator: (environment["RABBITMQ_USER"].flatMap { $0.isEmpty ? nil : $0 } ?? "astro", password),
                passwords: passwords
            )
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(definitions), as: UTF8.self))
    }
}

struct BrokerPermissions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "permissions",
        abstract: "Show what each service's broker user may configure, write and read, and publish."
    )

    func run() async throws {
        for service in BrokerAccess.services {
            let permissions = BrokerAccess.permissions(service)
            print("\(service.user) (password: \(service.passwordVariable))")
            print("  configure  \(permissions.configure)")
            print("  write      \(permissions.write)")
            print("  read       \(permissions.read)")
            for topic in BrokerAccess.topicPermissions(service) {
                print("  topic \(topic.exchange): write \(topic.write)  read \(topic.read)")
            }
        }
        print(
            "policy \(BrokerAccess.deliveryLimitPolicy): delivery-limit \(BrokerAccess.brokerDeliveryLimit) "
                + "on \(BrokerAccess.workQueuePattern)"
        )
    }
}

struct BrokerKubernetes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kubernetes",
        abstract:
            "Print the broker users and policy as RabbitMQ Messaging Topology Operator objects (User, Permission, TopicPermission, Policy).",
        discussion: """
            deploy/k8s/overlays/production/rabbitmq-access.yaml is this output. Each \
            user's credentials come from the Secret astro-amqp-<user> (keys username and \
            password).
            """
    )

    @Option(help: "The RabbitmqCluster's name.") var cluster = "astro-rabbitmq"

    func run() async throws {
        print(BrokerAccess.topologyOperatorObjects(cluster: cluster), terminator: "")
    }
}
