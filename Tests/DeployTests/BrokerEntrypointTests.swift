import Foundation
import TestProcesses
import Testing

/// compose's broker entrypoint renders the definitions template with the passwords from the
/// environment: any password a person may choose arrives in the broker's users exactly, and one
/// that cannot be written into the file stops the broker with the variable's name.
@Suite struct BrokerEntrypointTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let variables = [
        "RABBITMQ_USER", "RABBITMQ_PASSWORD", "CHART_WORKER_AMQP_PASSWORD", "BILLING_WORKER_AMQP_PASSWORD",
        "REPORT_WORKER_AMQP_PASSWORD", "STORY_WORKER_AMQP_PASSWORD", "CLIENT_AMQP_PASSWORD",
        "GATEWAY_AMQP_PASSWORD", "OPERATOR_AMQP_PASSWORD", "MAINTENANCE_AMQP_PASSWORD",
    ]

    /// Runs the entrypoint in --render-only mode; returns its status, the rendered file and stderr.
    func render(_ environment: [String: String]) throws -> (status: Int32, output: Data, error: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("defs-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try ProcessRunner.runWaiting(
            "/bin/sh",
            [
                Self.root.appendingPathComponent("deploy/rabbitmq/docker-entrypoint.sh").path, "--render-only",
                output.path,
            ],
            environment: environment.merging([
                "PATH": "/usr/bin:/bin",
                "ASTRO_DEFINITIONS_TEMPLATE": Self.root.appendingPathComponent("deploy/rabbitmq/definitions.json").path,
            ]) { _, new in new },
            replacingEnvironment: true,
            timeout: .seconds(60)
        )
        return (result.status, (try? Data(contentsOf: output)) ?? Data(), result.error)
    }

    @Test func everyPrintablePasswordArrivesExactly() throws {
        let passwords = [
            #"a\b"c&d|e/f@g:h"#, #"x\\y"#, "$HOME", "it's", "%00", "ключ 🔑", #"{"json":1}"#, "gate&way",
            "op|er\\ator", "main&ten\"ance",
        ]
        var environment = Dictionary(uniqueKeysWithValues: zip(Self.variables, passwords))
        environment["RABBITMQ_USER"] = "astro"
        let result = try render(environment)
        #expect(result.status == 0, "\(result.error)")
        let definitions = try JSONSerialization.jsonObject(with: result.output) as? [String: Any]
        let users = (definitions?["users"] as? [[String: Any]]) ?? []
        let byName = Dictionary(
            uniqueKeysWithValues: users.compactMap { user in
                (user["name"] as? String).map { ($0, user["password"] as? String) }
            }
        )
        #expect(byName["astro"] == passwords[1])
        #expect(byName["chart-worker"] == passwords[2])
        #expect(byName["billing-worker"] == passwords[3])
        #expect(byName["report-worker"] == passwords[4])
        #expect(byName["story-worker"] == passwords[5])
        #expect(byName["astro-client"] == passwords[6])
        #expect(byName["gateway"] == passwords[7])
        #expect(byName["astro-operator"] == passwords[8])
        #expect(byName["maintenance"] == passwords[9])
    }

    @Test(arguments: ["a\tb", "line\nbreak", "bell\u{07}"])
    func aPasswordWithAControlCharacterIsRefusedByName(_ password: String) throws {
        var environment = Dictionary(uniqueKeysWithValues: Self.variables.map { ($0, "fine") })
        environment["STORY_WORKER_AMQP_PASSWORD"] = password
        let result = try render(environment)
        #expect(result.status != 0)
        #expect(result.error.contains("STORY_WORKER_AMQP_PASSWORD"), "\(result.error)")
    }

    @Test func aMissingPasswordIsRefusedByName() throws {
        var environment = Dictionary(uniqueKeysWithValues: Self.variables.map { ($0, "fine") })
        environment["CLIENT_AMQP_PASSWORD"] = nil
        let result = try render(environment)
        #expect(result.status != 0)
        #expect(result.error.contains("CLIENT_AMQP_PASSWORD is not set"), "\(result.error)")
    }
}
