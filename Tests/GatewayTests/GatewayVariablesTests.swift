import Foundation
import Testing
import WorkerRuntime
import Yams

@testable import Gateway

/// Issue 32: the gateway reads its own configuration. It reads the settings every service shares
/// (broker, database, HTTP, logging) through the workers' reader, and none of the settings only a
/// worker reads; the README and the deployments name exactly what it reads.
@Suite("Gateway variables")
struct GatewayVariablesTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        .deletingLastPathComponent()  // GatewayTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    /// The variables only a worker reads.
    static let workerOnlyNames = Set(WorkerConfiguration.variables.map(\.name))
        .subtracting(ServiceConfiguration.variables.map(\.name))

    /// `DB_POOL_SIZE=2` without `COMMITTERS` stopped the gateway with a `COMMITTERS` error, a
    /// worker's job-transaction setting it never used; a worker still refuses it.
    @Test func aSmallPoolIsNotCheckedAgainstAWorkersCommitters() throws {
        let environment = ["DB_POOL_SIZE": "2"]
        let gateway = try GatewayConfiguration.fromEnvironment(environment)
        #expect(gateway.service.databasePoolSize == 2)
        do {
            _ = try WorkerConfiguration.fromEnvironment(environment, defaultHTTPPort: 8081)
            Issue.record("a worker accepted DB_POOL_SIZE=2 with COMMITTERS=2")
        } catch {
            #expect(error.variable == "COMMITTERS")
        }
    }

    /// Malformed worker-only settings do not stop the gateway, and it does not list them.
    @Test func workerOnlySettingsAreNeitherReadNorListed() throws {
        #expect(Self.workerOnlyNames.contains("COMMITTERS") && Self.workerOnlyNames.contains("PREFETCH"))
        for name in Self.workerOnlyNames.sorted() {
            let environment = [name: "not-a-setting"]
            #expect(throws: ConfigurationError.self, "a worker accepted \(name)=not-a-setting") {
                try WorkerConfiguration.fromEnvironment(environment, defaultHTTPPort: 8081)
            }
            #expect(throws: Never.self, "the gateway read \(name)") {
                try GatewayConfiguration.fromEnvironment(environment)
            }
        }
        let listed = Set(GatewayConfiguration.allVariables.map(\.name))
        #expect(listed.isDisjoint(with: Self.workerOnlyNames), "\(listed.intersection(Self.workerOnlyNames))")
        #expect(GatewayConfiguration.allVariables.count == listed.count, "a variable is listed twice")
    }

    /// How a test tells that the gateway reads a variable: a value it refuses naming the variable
    /// (with whatever else must be set for the variable to count), or a value it takes.
    enum Probe {
        case refuses(String, with: [String: String] = [:])
        case takes(String, with: [String: String] = [:], check: @Sendable (GatewayConfiguration) -> Bool)
    }

    /// Every listed variable except those below is refused with the value `"not-a-setting"`.
    static let probes: [String: Probe] = [
        "HTTP_HOST": .takes("127.0.0.2") { $0.service.httpHost == "127.0.0.2" },
        "GATEWAY_SIGNING_KEY_ID": .refuses("two words"),
        "GATEWAY_TOKEN_ISSUER": .refuses(String(repeating: "i", count: 201)),
        "GATEWAY_TOKEN_AUDIENCE": .refuses(String(repeating: "a", count: 201)),
        "STORY_STORAGE_ROOT": .refuses("a\u{0}b"),
        "APP_ATTEST_ENVIRONMENT": .refuses("not-a-setting", with: ["APP_ATTEST_APP_ID": "ABCDE12345.com.example.app"]),
        "APP_ATTEST_ROOT_CA_FILE": .refuses(
            "/nonexistent.pem",
            with: ["APP_ATTEST_APP_ID": "ABCDE12345.com.example.app"]
        ),
        "APP_ATTEST_CHALLENGE_TTL_SECONDS": .refuses(
            "not-a-setting",
            with: ["APP_ATTEST_APP_ID": "ABCDE12345.com.example.app"]
        ),
        "BILLING_APP_APPLE_ID": .refuses("not-a-setting", with: ["BILLING_ENVIRONMENT": "Sandbox"]),
        "BILLING_TRUSTED_ROOTS": .refuses("/nonexistent.der", with: ["BILLING_ENVIRONMENT": "Sandbox"]),
        "BILLING_BUNDLE_ID": .takes("com.example.other", with: ["BILLING_ENVIRONMENT": "Sandbox"]) {
            $0.appStoreVerification?.policy.bundleID == "com.example.other"
        },
    ]

    /// Every variable the gateway lists is one it reads.
    @Test func everyListedVariableIsRead() {
        for name in GatewayConfiguration.allVariables.map(\.name) {
            switch Self.probes[name] ?? .refuses("not-a-setting") {
            case .refuses(let value, let context):
                do {
                    _ = try GatewayConfiguration.fromEnvironment(context.merging([name: value]) { $1 })
                    Issue.record("\(name)=\(value.debugDescription) was accepted: is \(name) read?")
                } catch {
                    #expect(error.variable == name, "\(name)=\(value.debugDescription): \(error)")
                }
            case .takes(let value, let context, let check):
                let configuration = try? GatewayConfiguration.fromEnvironment(context.merging([name: value]) { $1 })
                #expect(configuration.map(check) == true, "\(name)=\(value.debugDescription) did not arrive")
            }
        }
    }

    /// The README's Gateway table lists exactly the variables the gateway reads.
    @Test func theReadmeTableListsWhatTheGatewayReads() throws {
        let readme = try String(
            contentsOf: Self.repositoryRoot.appendingPathComponent("README.md"),
            encoding: .utf8
        )
        let section = try #require(readme.components(separatedBy: "\n## Gateway\n").dropFirst().first)
        // The first table of the section: its rows until the first line that is not one.
        let rows = section.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("| variable |") }.dropFirst(2)
            .prefix { $0.hasPrefix("|") }
        #expect(!rows.isEmpty, "README: no variable table under ## Gateway")
        var documented: [String] = []
        for row in rows {
            let first = row.split(separator: "|", omittingEmptySubsequences: true).first ?? ""
            documented += first.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map {
                String($0.element)
            }
        }
        let read = Set(GatewayConfiguration.allVariables.map(\.name))
        #expect(Set(documented).subtracting(read).isEmpty, "documented, not read: \(Set(documented).subtracting(read))")
        #expect(read.subtracting(documented).isEmpty, "read, not documented: \(read.subtracting(documented))")
    }

    /// What docker compose and Kubernetes set for the gateway is read by it: its variables, or
    /// the tracing ones (`OTEL_*`, README "Traces"). The billing-worker's ConfigMap, which the
    /// gateway shares for the App Store policy, is the billing-worker's.
    @Test func theDeploymentsSetOnlyWhatTheGatewayReads() throws {
        let read = Set(GatewayConfiguration.allVariables.map(\.name))
        func unread(_ names: some Sequence<String>) -> [String] {
            names.filter { !read.contains($0) && !$0.hasPrefix("OTEL_") }.sorted()
        }

        let compose = try Yams.load(
            yaml: String(contentsOf: Self.repositoryRoot.appendingPathComponent("docker-compose.yml"), encoding: .utf8)
        )
        let services = try #require((compose as? [String: Any])?["services"] as? [String: Any])
        let gateway = try #require(services["gateway"] as? [String: Any], "docker-compose.yml: no gateway")
        let composeNames = try #require(gateway["environment"] as? [String: Any]).keys
        #expect(composeNames.contains("DATABASE_URL"))
        #expect(unread(composeNames).isEmpty, "docker-compose.yml sets for the gateway: \(unread(composeNames))")

        var configMapNames: [String] = []
        let config = try String(
            contentsOf: Self.repositoryRoot.appendingPathComponent("deploy/k8s/base/config.yaml"),
            encoding: .utf8
        )
        for document in try Yams.load_all(yaml: config) {
            guard let map = document as? [String: Any], let metadata = map["metadata"] as? [String: Any],
                metadata["name"] as? String == "astro-gateway-config"
            else { continue }
            configMapNames += try #require(map["data"] as? [String: Any]).keys
        }
        #expect(configMapNames.contains("GATEWAY_ENV"), "deploy/k8s/base/config.yaml: no astro-gateway-config")
        #expect(unread(configMapNames).isEmpty, "astro-gateway-config sets: \(unread(configMapNames))")

        var deploymentNames: [String] = []
        let manifest = try String(
            contentsOf: Self.repositoryRoot.appendingPathComponent("deploy/k8s/base/gateway.yaml"),
            encoding: .utf8
        )
        for document in try Yams.load_all(yaml: manifest) {
            guard let map = document as? [String: Any], map["kind"] as? String == "Deployment",
                let spec = map["spec"] as? [String: Any], let template = spec["template"] as? [String: Any],
                let podSpec = template["spec"] as? [String: Any],
                let containers = podSpec["containers"] as? [[String: Any]]
            else { continue }
            for container in containers {
                deploymentNames += (container["env"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            }
        }
        #expect(deploymentNames.contains("AMQP_URL"), "deploy/k8s/base/gateway.yaml: no gateway Deployment env")
        #expect(unread(deploymentNames).isEmpty, "the gateway Deployment sets: \(unread(deploymentNames))")
    }
}
