import Foundation
import TestProcesses
import Testing
import Yams

// Offline checks of docker-compose.yml and .env.example: the properties the local stack relies on
// (health checks, start order, scaling, least-privilege database roles, documented variables).
// When a Docker client with the compose plugin is installed, `docker compose config` validates the
// file as well.

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

private let workers = ["chart-worker", "report-worker", "billing-worker", "story-worker"]

/// Jobs in flight per worker (`PREFETCH`) when .env sets nothing: the workers' own defaults
/// (Sources/<worker>/main.swift), and the variable that changes it.
private let prefetchDefaults: [String: (variable: String, value: Int)] = [
    "chart-worker": ("PREFETCH", 16), "report-worker": ("REPORT_PREFETCH", 32),
    "billing-worker": ("PREFETCH", 16), "story-worker": ("STORY_PREFETCH", 32),
]

/// The OpenAI-compatible endpoints each worker may call: passed through from .env, empty by
/// default (the built-in writer or illustrator).
private let apiSettings: [String: [String]] = [
    "report-worker": ["LLM"],
    "story-worker": ["LLM", "IMAGE"],
]

/// What `BILLING_ENVIRONMENT` accepts (Sources/Billing/BillingConfiguration.swift).
private let storeEnvironments: Set<String> = ["Production", "Sandbox", "Xcode", "LocalTesting"]

/// docker-compose.yml as loaded by Yams, which applies the `<<:` merge keys.
private struct ComposeFile {
    var services: [String: [String: Any]]
    var volumes: Set<String>
    /// Every string of the document (keys and values, comments excluded), for interpolation checks.
    var strings: [String]

    static func load() throws -> ComposeFile {
        let url = repositoryRoot.appendingPathComponent("docker-compose.yml")
        let text = try String(contentsOf: url, encoding: .utf8)
        let document = try #require(mapping(try Yams.load(yaml: text)), "docker-compose.yml: not a mapping")
        let servicesNode = try #require(mapping(document["services"]), "docker-compose.yml: no services mapping")
        var services: [String: [String: Any]] = [:]
        for (name, node) in servicesNode {
            let service = try #require(mapping(node), "docker-compose.yml: service \(name) is not a mapping")
            services[name] = service
        }
        var strings: [String] = []
        collectStrings(document, into: &strings)
        return ComposeFile(
            services: services,
            volumes: Set((mapping(document["volumes"]) ?? [:]).keys),
            strings: strings
        )
    }

    func service(_ name: String) throws -> [String: Any] {
        try #require(services[name], "docker-compose.yml has no service \(name)")
    }
}

@Suite struct ComposeFileTests {
    // MARK: broker and database

    @Test func brokerHasTheManagementUIAndAHealthCheck() throws {
        let rabbitmq = try ComposeFile.load().service("rabbitmq")
        let image = text(rabbitmq["image"]) ?? ""
        #expect(image.hasPrefix("rabbitmq:"), "rabbitmq: image \(image) is not RabbitMQ")
        #expect(image.contains("management"), "rabbitmq: image \(image) lacks the management UI")
        expectHealthCheck(rabbitmq, service: "rabbitmq")
    }

    @Test func databaseHasAVolumeAndAHealthCheck() throws {
        let compose = try ComposeFile.load()
        let postgres = try compose.service("postgres")
        expectHealthCheck(postgres, service: "postgres")
        let mounts = list(postgres["volumes"]).compactMap(volumeMount)
        let data = mounts.first { $0.target == "/var/lib/postgresql/data" }
        #expect(data != nil, "postgres: volumes mount nothing at /var/lib/postgresql/data")
        if let data {
            #expect(
                compose.volumes.contains(data.source),
                "postgres: data volume \(data.source) is not a named volume declared under top-level volumes"
            )
        }
    }

    /// Issue 14: the broker creates one user per service (its definitions, loaded at boot), and
    /// every worker connects as its own, never as the administrator.
    @Test func brokerLoadsTheServiceUsersAndEachWorkerConnectsAsItsOwn() throws {
        let compose = try ComposeFile.load()
        let rabbitmq = try compose.service("rabbitmq")
        let mounts = list(rabbitmq["volumes"]).compactMap { text($0) }
        #expect(mounts.contains { $0.hasPrefix("./deploy/rabbitmq/definitions.json:") })
        #expect(mounts.contains { $0.hasPrefix("./deploy/rabbitmq/docker-entrypoint.sh:") })
        for file in ["deploy/rabbitmq/definitions.json", "deploy/rabbitmq/docker-entrypoint.sh"] {
            #expect(FileManager.default.fileExists(atPath: repositoryRoot.appendingPathComponent(file).path), "\(file)")
        }
        let brokerEnvironment = environmentOf(rabbitmq)
        for worker in workers {
            let variable = worker.uppercased().replacingOccurrences(of: "-", with: "_") + "_AMQP_PASSWORD"
            let url = environmentOf(try compose.service(worker))["AMQP_URL"] ?? ""
            #expect(url.hasPrefix("amqp://\(worker):${\(variable)"), "\(worker): AMQP_URL \(url)")
            #expect(
                brokerEnvironment[variable].map { variableNames(in: $0).contains(variable) } == true,
                "rabbitmq: environment lacks \(variable)"
            )
        }
        let migrate = environmentOf(try compose.service("migrate"))["AMQP_URL"] ?? ""
        #expect(migrate.hasPrefix("amqp://${RABBITMQ_USER"), "migrate declares the exchanges as the administrator")
    }

    // MARK: migrate

    @Test func migrateIsOneShotAndRunsAsTheOwner() throws {
        let migrate = try ComposeFile.load().service("migrate")
        #expect(restartPolicy(migrate) == "no", "migrate: restart must be \"no\" (one-shot)")
        let dependencies = dependsOn(migrate)
        #expect(dependencies["postgres"] == "service_healthy", "migrate: depends_on postgres must be service_healthy")
        let environment = environmentOf(migrate)
        let url = environment["DATABASE_URL"] ?? ""
        #expect(
            databaseUser(url).hasPrefix("${POSTGRES_USER"),
            "migrate: DATABASE_URL must connect as the owner (POSTGRES_USER), got \(url)"
        )
    }

    @Test(arguments: workers)
    func migrateReceivesTheWorkerRolePassword(worker: String) throws {
        let migrate = try ComposeFile.load().service("migrate")
        let variable = passwordVariable(worker)
        let value = environmentOf(migrate)[variable]
        #expect(value != nil, "migrate: environment lacks \(variable)")
        if let value {
            #expect(
                variableNames(in: value).contains(variable),
                "migrate: \(variable) must come from ${\(variable)...}, got \(value)"
            )
        }
    }

    // MARK: workers

    @Test(arguments: workers)
    func workerStartsAfterAHealthyStackAndACompletedMigration(worker: String) throws {
        let dependencies = dependsOn(try ComposeFile.load().service(worker))
        #expect(dependencies["rabbitmq"] == "service_healthy", "\(worker): depends_on rabbitmq must be service_healthy")
        #expect(dependencies["postgres"] == "service_healthy", "\(worker): depends_on postgres must be service_healthy")
        #expect(
            dependencies["migrate"] == "service_completed_successfully",
            "\(worker): depends_on migrate must be service_completed_successfully"
        )
    }

    @Test(arguments: workers)
    func workerHasAReadinessHealthCheckOnItsPort(worker: String) throws {
        let service = try ComposeFile.load().service(worker)
        expectHealthCheck(service, service: worker)
        let probe = list(mapping(service["healthcheck"])?["test"]).compactMap(text).joined(separator: " ")
        #expect(probe.contains("/readyz"), "\(worker): healthcheck does not ask /readyz: \(probe)")
        let port = environmentOf(service)["HTTP_PORT"] ?? ""
        #expect(!port.isEmpty, "\(worker): environment lacks HTTP_PORT, which the healthcheck depends on")
        #expect(probe.contains(port), "\(worker): healthcheck does not probe HTTP_PORT \(port): \(probe)")
    }

    @Test(arguments: workers)
    func workerRestartsAndDrainsBeforeItIsKilled(worker: String) throws {
        let service = try ComposeFile.load().service(worker)
        let restart = restartPolicy(service)
        #expect(
            ["always", "unless-stopped"].contains(restart) || restart.hasPrefix("on-failure"),
            "\(worker): restart is \"\(restart)\"; a worker must be restarted"
        )
        let drainText = environmentOf(service)["SHUTDOWN_DRAIN_SECONDS"].map { resolvedDefault($0) } ?? "25"
        let drain = try #require(Double(drainText), "\(worker): SHUTDOWN_DRAIN_SECONDS is not a number: \(drainText)")
        let grace = text(service["stop_grace_period"]) ?? ""
        let graceSeconds = seconds(ofDuration: grace)
        #expect(graceSeconds != nil, "\(worker): stop_grace_period \"\(grace)\" is missing or not a duration")
        if let graceSeconds {
            #expect(
                graceSeconds > drain,
                "\(worker): stop_grace_period \(grace) must exceed SHUTDOWN_DRAIN_SECONDS (\(drainText) s)"
            )
        }
    }

    @Test(arguments: workers)
    func workerScalesWithoutFixedNamesOrHostPorts(worker: String) throws {
        let service = try ComposeFile.load().service(worker)
        #expect(service["container_name"] == nil, "\(worker): container_name prevents --scale")
        #expect(service["ports"] == nil, "\(worker): host ports prevent --scale")
        #expect(text(service["network_mode"]) != "host", "\(worker): network_mode host prevents --scale")
    }

    @Test(arguments: workers)
    func workerIsConfiguredThroughTheEnvironment(worker: String) throws {
        let environment = environmentOf(try ComposeFile.load().service(worker))
        for variable in ["AMQP_URL", "DATABASE_URL", "HTTP_PORT"] {
            #expect(environment[variable] != nil, "\(worker): environment lacks \(variable)")
        }
        #expect(
            environment["MIGRATE_ON_START"] == "false",
            "\(worker): MIGRATE_ON_START must be \"false\" (migrate changes the schema, the worker roles may not)"
        )
    }

    @Test(arguments: workers)
    func workerConnectsAsItsOwnRole(worker: String) throws {
        let compose = try ComposeFile.load()
        let url = environmentOf(try compose.service(worker))["DATABASE_URL"] ?? ""
        let role = "astro_" + worker.replacingOccurrences(of: "-", with: "_")
        #expect(url.hasPrefix("postgres://"), "\(worker): DATABASE_URL is not a postgres:// URL: \(url)")
        #expect(databaseUser(url) == role, "\(worker): DATABASE_URL must connect as \(role), got \(url)")
        #expect(url.contains("@postgres:5432/"), "\(worker): DATABASE_URL must point at postgres:5432, got \(url)")
        let variable = passwordVariable(worker)
        let password = databasePassword(url)
        #expect(
            password.hasPrefix("${\(variable)"),
            "\(worker): DATABASE_URL's password must come from ${\(variable)...}, got \(password)"
        )
        let workerDefault = resolvedDefault(password)
        let migrateDefault = resolvedDefault(environmentOf(try compose.service("migrate"))[variable] ?? "")
        #expect(
            workerDefault == migrateDefault,
            "\(worker): \(variable) defaults to \(workerDefault) in DATABASE_URL but to \(migrateDefault) in migrate"
        )
    }

    @Test(arguments: workers)
    func workerKeepsItsDefaultNumberOfJobsInFlight(worker: String) throws {
        let expected = try #require(prefetchDefaults[worker], "no PREFETCH default known for \(worker)")
        let value = environmentOf(try ComposeFile.load().service(worker))["PREFETCH"] ?? ""
        #expect(
            variableNames(in: value).first == expected.variable,
            "\(worker): PREFETCH must come from ${\(expected.variable)...}, got \(value)"
        )
        #expect(
            Int(resolvedDefault(value)) == expected.value,
            "\(worker): PREFETCH defaults to \(resolvedDefault(value)), not \(expected.value)"
        )
    }

    @Test(arguments: apiSettings.keys.sorted())
    func workerPassesItsAPISettingsThrough(worker: String) throws {
        let environment = environmentOf(try ComposeFile.load().service(worker))
        for prefix in apiSettings[worker] ?? [] {
            // Empty base URL, model and key by default: the built-in writer or illustrator.
            for suffix in ["BASE_URL", "MODEL", "API_KEY"] {
                let variable = "\(prefix)_\(suffix)"
                let value = environment[variable]
                #expect(value != nil, "\(worker): environment lacks \(variable)")
                if let value {
                    #expect(
                        variableNames(in: value) == [variable] && resolvedDefault(value).isEmpty,
                        "\(worker): \(variable) must be ${\(variable):-} (empty by default), got \(value)"
                    )
                }
            }
            let tuning =
                prefix == "LLM"
                ? ["LLM_PRICE_INPUT_PER_1M_USD", "LLM_PRICE_OUTPUT_PER_1M_USD"]
                : ["IMAGE_SIZE", "IMAGE_TIMEOUT_SECONDS", "IMAGE_MAX_ATTEMPTS", "IMAGE_DEADLINE_SECONDS"]
            for variable in tuning {
                let value = environment[variable]
                #expect(
                    value.map { variableNames(in: $0).first == variable } == true,
                    "\(worker): \(variable) must come from ${\(variable)...}, got \(value ?? "nothing")"
                )
            }
        }
    }

    @Test func storyWorkerStoresIllustrationsOnANamedVolumeItsUserMayWrite() throws {
        let compose = try ComposeFile.load()
        let story = try compose.service("story-worker")
        let root = try #require(
            environmentOf(story)["STORY_STORAGE_ROOT"],
            "story-worker: environment lacks STORY_STORAGE_ROOT (the images would land in the container's layer)"
        )
        #expect(root.hasPrefix("/"), "story-worker: STORY_STORAGE_ROOT \(root) is not an absolute path")
        let mounts = list(story["volumes"]).compactMap(volumeMount)
        let mount = try #require(
            mounts.first { $0.target == root },
            "story-worker: volumes mount nothing at STORY_STORAGE_ROOT \(root)"
        )
        #expect(
            compose.volumes.contains(mount.source),
            "story-worker: \(mount.source) is not a named volume declared under top-level volumes"
        )
        let entries = list(story["volumes"]).filter { volumeMount($0)?.target == root }
        let readOnly = entries.contains {
            (text($0)?.hasSuffix(":ro") ?? false) || mapping($0)?["read_only"] as? Bool == true
        }
        #expect(!readOnly, "story-worker: the volume at \(root) is mounted read-only")
        // A new named volume starts as a copy of the image's folder, owner included: the runtime
        // stage must create it for the user the programs run as.
        let recipe = try String(
            contentsOf: repositoryRoot.appendingPathComponent("deploy/Dockerfile"),
            encoding: .utf8
        )
        let runtime = recipe.components(separatedBy: "FROM ${RUNTIME_IMAGE}").last ?? ""
        let creating = runtime.split(separator: "\n").filter {
            !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") && $0.contains(root)
        }
        #expect(
            creating.contains { ($0.contains("install -d") && $0.contains("-o 10001")) || $0.contains("chown 10001") },
            "deploy/Dockerfile: the runtime stage must create \(root) owned by uid 10001, got \(creating)"
        )
    }

    @Test(arguments: workers + ["migrate", "gateway"])
    func serviceRunsItsProgramFromTheImage(service name: String) throws {
        let compose = try ComposeFile.load()
        let service = try compose.service(name)
        let program = name == "migrate" ? "astroctl" : name
        let entrypoint = command(service["entrypoint"])
        #expect(entrypoint.first == "/app/\(program)", "\(name): entrypoint must start with /app/\(program)")
        if name == "migrate" {
            #expect(entrypoint.dropFirst().first == "migrate", "migrate: entrypoint must run `astroctl migrate`")
        }
        let image = text(service["image"]) ?? ""
        let workerImage = text(try compose.service("chart-worker")["image"]) ?? ""
        #expect(!image.isEmpty && image == workerImage, "\(name): image \(image) differs from the workers' image")
        let dockerfile = text(mapping(service["build"])?["dockerfile"]) ?? ""
        #expect(dockerfile == "deploy/Dockerfile", "\(name): build.dockerfile must be deploy/Dockerfile")
        let recipe = try String(
            contentsOf: repositoryRoot.appendingPathComponent("deploy/Dockerfile"),
            encoding: .utf8
        )
        // The build loops over its products, one `swift build --product` each (given several
        // --product options, SwiftPM builds only the last one).
        let loop = recipe.split(separator: "\n").first { $0.contains("for product in") }.map(String.init) ?? ""
        let products =
            loop.components(separatedBy: " in ").last?.components(separatedBy: ";").first?
            .split(separator: " ").map(String.init) ?? []
        #expect(
            products.contains(program) && recipe.contains("--product \"$product\"")
                && recipe.contains("$bin/\(program)"),
            "\(name): deploy/Dockerfile does not build and copy \(program) into /app"
        )
        let doubled = recipe.split(separator: "\n").filter {
            !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#")
                && $0.components(separatedBy: "--product ").count > 2
        }
        #expect(
            doubled.isEmpty,
            "deploy/Dockerfile: one --product per swift build (SwiftPM builds only the last of several): \(doubled)"
        )
    }

    /// What `ldd` lists for a --static-swift-stdlib build of the programs (measured when the
    /// image was last changed): librabbitmq, libpq, libswe, and libcurl for FoundationNetworking.
    @Test func theRuntimeStageInstallsTheLibrariesTheProgramsLinkAndRunsAsNonRoot() throws {
        let recipe = try String(
            contentsOf: repositoryRoot.appendingPathComponent("deploy/Dockerfile"),
            encoding: .utf8
        )
        let runtime = recipe.components(separatedBy: "FROM ${RUNTIME_IMAGE}").last ?? ""
        #expect(recipe.contains("FROM ${RUNTIME_IMAGE}"), "deploy/Dockerfile: no runtime stage")
        for package in ["librabbitmq4", "libpq5", "libswe2.0", "swe-standard-data", "libcurl4", "tzdata"] {
            #expect(runtime.contains(" \(package) "), "deploy/Dockerfile: the runtime stage lacks \(package)")
        }
        #expect(!runtime.contains("-dev "), "deploy/Dockerfile: development packages in the runtime stage")
        #expect(runtime.contains("USER 10001"), "deploy/Dockerfile: the runtime stage must run as uid 10001")
    }

    // MARK: gateway

    /// Issue 16: the gateway is the one published port besides the broker UI, on this machine
    /// by default; it connects as its own broker user and database role, waits for the migration
    /// and reports ready only when it can serve.
    @Test func theGatewayIsTheOnlyPublishedPortBesidesTheBrokerUI() throws {
        let compose = try ComposeFile.load()
        for (name, service) in compose.services where !["rabbitmq", "gateway", "prometheus"].contains(name) {
            #expect(service["ports"] == nil, "\(name): publishes a port; only the gateway and the broker UI may")
        }
        // Issue 17: Prometheus' UI, on this machine only by default.
        for published in list(try compose.service("prometheus")["ports"]).compactMap(text) {
            let host = published.firstIndex(of: "}").map { String(published[...$0]) } ?? published
            #expect(resolvedDefault(host).hasPrefix("127.0.0.1:"), "prometheus: published as \(published)")
        }
        let gateway = try compose.service("gateway")
        let ports = list(gateway["ports"]).compactMap(text)
        #expect(ports.count == 1, "gateway: ports \(ports)")
        let published = ports.first ?? ""
        #expect(published.hasSuffix("}:8080"), "gateway: the container port must be 8080 (HTTP_PORT), got \(published)")
        // ${GATEWAY_PUBLISH:-127.0.0.1:8080}: the host side, this machine only unless .env says otherwise.
        let host = published.firstIndex(of: "}").map { String(published[...$0]) } ?? published
        #expect(
            resolvedDefault(host).hasPrefix("127.0.0.1:"),
            "gateway: published on all interfaces by default: \(published)"
        )
        let environment = environmentOf(gateway)
        #expect(environment["HTTP_PORT"] == "8080")
        #expect(
            (environment["AMQP_URL"] ?? "").hasPrefix("amqp://gateway:${GATEWAY_AMQP_PASSWORD"),
            "gateway: AMQP_URL must be the gateway broker user: \(environment["AMQP_URL"] ?? "")"
        )
        #expect(
            environmentOf(try compose.service("rabbitmq"))["GATEWAY_AMQP_PASSWORD"].map {
                variableNames(in: $0).contains("GATEWAY_AMQP_PASSWORD")
            } == true,
            "rabbitmq: environment lacks GATEWAY_AMQP_PASSWORD"
        )
        let url = environment["DATABASE_URL"] ?? ""
        #expect(databaseUser(url) == "astro_gateway", "gateway: DATABASE_URL must connect as astro_gateway: \(url)")
        let password = databasePassword(url)
        #expect(password.hasPrefix("${GATEWAY_DB_PASSWORD"), "gateway: DATABASE_URL password \(password)")
        let migratePassword = environmentOf(try compose.service("migrate"))["GATEWAY_DB_PASSWORD"] ?? ""
        #expect(
            resolvedDefault(password) == resolvedDefault(migratePassword) && !migratePassword.isEmpty,
            "gateway: GATEWAY_DB_PASSWORD defaults differ between the gateway and migrate"
        )
        #expect(environment["GATEWAY_ENV"] != nil, "gateway: GATEWAY_ENV is not passed through")
        #expect(
            environment["GATEWAY_SIGNING_KEY_FILE"] != nil,
            "gateway: GATEWAY_SIGNING_KEY_FILE is not passed through"
        )
        let dependencies = dependsOn(gateway)
        #expect(dependencies["migrate"] == "service_completed_successfully")
        #expect(dependencies["rabbitmq"] == "service_healthy" && dependencies["postgres"] == "service_healthy")
        expectHealthCheck(gateway, service: "gateway")
        let probe = list(mapping(gateway["healthcheck"])?["test"]).compactMap(text).joined(separator: " ")
        #expect(probe.contains("/readyz") && probe.contains("8080"), "gateway: healthcheck \(probe)")
    }

    // MARK: billing

    @Test func billingWorkerIsToldItsStoreEnvironment() throws {
        let billing = environmentOf(try ComposeFile.load().service("billing-worker"))
        let value = try #require(
            billing["BILLING_ENVIRONMENT"],
            "billing-worker: environment lacks BILLING_ENVIRONMENT, without which the worker refuses to start"
        )
        let chosen = resolvedDefault(value)
        #expect(
            storeEnvironments.contains(chosen),
            "billing-worker: BILLING_ENVIRONMENT defaults to \"\(chosen)\", not one of \(storeEnvironments.sorted())"
        )
        if chosen == "Production" {
            let appleID = resolvedDefault(billing["BILLING_APP_APPLE_ID"] ?? "")
            #expect(!appleID.isEmpty, "billing-worker: a Production default needs a BILLING_APP_APPLE_ID default")
        }
        let example = try envExample()["BILLING_ENVIRONMENT"] ?? ""
        #expect(
            example.isEmpty || storeEnvironments.contains(example),
            ".env.example: BILLING_ENVIRONMENT=\(example) is not one of \(storeEnvironments.sorted())"
        )
    }

    // MARK: variables

    @Test func everyInterpolatedVariableIsInTheEnvExample() throws {
        let compose = try ComposeFile.load()
        let used = Set(compose.strings.flatMap(variableNames))
        #expect(!used.isEmpty, "docker-compose.yml: no ${VARIABLE} found; the scan is broken")
        let documented = Set(try envExample().keys)
        let missing = used.subtracting(documented).sorted()
        #expect(missing.isEmpty, ".env.example lacks variables that docker-compose.yml uses: \(missing)")
    }

    @Test func variableScanFollowsComposeInterpolation() {
        #expect(variableNames(in: "pg_isready -U $${POSTGRES_USER}").isEmpty)
        #expect(variableNames(in: "a${A:-x}b${B}c$C $$D") == ["A", "B", "C"])
        #expect(variableNames(in: "${OUTER:-${INNER:-z}}") == ["OUTER", "INNER"])
        #expect(resolvedDefault("${PASSWORD:-secret}") == "secret")
        #expect(resolvedDefault("${PASSWORD-}") == "")
        #expect(resolvedDefault("plain") == "plain")
        #expect(seconds(ofDuration: "1m30s") == 90)
        #expect(seconds(ofDuration: "500ms") == 0.5)
        #expect(seconds(ofDuration: "40") == nil)
    }

    // MARK: Building and the offline check

    /// `docker build .` from a working tree must not send the build folders (gigabytes) or keys.
    @Test func dockerignoreKeepsBuildFoldersGitAndSecretsOut() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent(".dockerignore"), encoding: .utf8)
        let patterns = Set(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for pattern in [".build*/", ".git/", "secrets/"] {
            #expect(patterns.contains(pattern), ".dockerignore lacks \(pattern)")
        }
    }

    /// scripts/compose-check.sh's override for machines without Docker Hub replaces only the
    /// broker's and the database's images: everything else it checks is docker-compose.yml's.
    @Test func offlineOverrideReplacesOnlyTheBrokerAndDatabaseImages() throws {
        let url = repositoryRoot.appendingPathComponent("deploy/offline/compose.offline.yml")
        let document = try #require(mapping(try Yams.load(yaml: String(contentsOf: url, encoding: .utf8))))
        #expect(Set(document.keys) == ["services"])
        let services = try #require(mapping(document["services"]))
        #expect(Set(services.keys) == ["rabbitmq", "postgres", "prometheus"])
        for (name, node) in services {
            let service = try #require(mapping(node), "\(name) is not a mapping")
            #expect(Set(service.keys) == ["image"], "\(name) overrides \(service.keys.sorted())")
            let image = text(service["image"]) ?? ""
            #expect(image.hasPrefix("astrosvitla-offline/"), "\(name): \(image)")
            // The stand-in is built from the Dockerfile of the same name.
            #expect(
                FileManager.default.fileExists(
                    atPath: repositoryRoot.appendingPathComponent("deploy/offline/\(name).Dockerfile").path
                )
            )
        }
    }

    // MARK: docker compose

    @Test(
        "docker compose config accepts the file",
        .enabled(if: dockerComposeAvailable, "needs a Docker client with the compose plugin")
    )
    func dockerComposeConfigAccepts() throws {
        for extra in [[], ["--env-file", ".env.example"]] {
            let arguments = ["compose", "-f", "docker-compose.yml"] + extra + ["config", "-q"]
            let docker = try #require(dockerExecutable, "docker is not on PATH")
            let (status, output) = try run(docker, arguments)
            #expect(status == 0, "docker \(arguments.joined(separator: " ")) exited \(status): \(output)")
        }
    }
}

// MARK: - Reading the parsed document

private func mapping(_ node: Any?) -> [String: Any]? {
    if let node = node as? [String: Any] { return node }
    guard let node = node as? [AnyHashable: Any] else { return nil }
    var result: [String: Any] = [:]
    for (key, value) in node {
        result[(key.base as? String) ?? "\(key.base)"] = value
    }
    return result
}

private func list(_ node: Any?) -> [Any] {
    node as? [Any] ?? []
}

/// A scalar as compose would see it; nil for mappings, sequences and null.
private func text(_ node: Any?) -> String? {
    switch node {
    case let value as String: value
    case let value as Bool: value ? "true" : "false"
    case let value as Int: String(value)
    case let value as Double: String(value)
    default: nil
    }
}

private func collectStrings(_ node: Any?, into strings: inout [String]) {
    if let value = node as? String {
        strings.append(value)
    } else if let node = mapping(node) {
        for (key, value) in node {
            strings.append(key)
            collectStrings(value, into: &strings)
        }
    } else if let node = node as? [Any] {
        for value in node { collectStrings(value, into: &strings) }
    }
}

/// `environment:` in either form compose accepts: a mapping, or a list of NAME=value.
private func environmentOf(_ service: [String: Any]) -> [String: String] {
    if let node = mapping(service["environment"]) {
        return node.mapValues { text($0) ?? "" }
    }
    var result: [String: String] = [:]
    for case let entry as String in list(service["environment"]) {
        let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        result[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
    }
    return result
}

/// `depends_on:` as service → condition; the list form means service_started.
private func dependsOn(_ service: [String: Any]) -> [String: String] {
    if let node = mapping(service["depends_on"]) {
        return node.mapValues { text(mapping($0)?["condition"]) ?? "service_started" }
    }
    return Dictionary(
        list(service["depends_on"]).compactMap(text).map { ($0, "service_started") },
        uniquingKeysWith: { first, _ in first }
    )
}

/// The restart policy; compose's default is "no", and YAML 1.1 reads a bare `no` as false.
private func restartPolicy(_ service: [String: Any]) -> String {
    guard let value = service["restart"] else { return "no" }
    if let value = value as? Bool, !value { return "no" }
    return text(value) ?? ""
}

/// An entrypoint or command: a list, or a string split on spaces.
private func command(_ node: Any?) -> [String] {
    if let value = text(node) { return value.split(separator: " ").map(String.init) }
    return list(node).compactMap(text)
}

private func expectHealthCheck(
    _ service: [String: Any],
    service name: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    let healthcheck = mapping(service["healthcheck"])
    #expect(healthcheck != nil, "\(name): no healthcheck", sourceLocation: sourceLocation)
    guard let healthcheck else { return }
    let probe = command(healthcheck["test"])
    #expect(
        healthcheck["disable"] as? Bool != true && !probe.isEmpty && probe.first != "NONE",
        "\(name): healthcheck is disabled or has no test",
        sourceLocation: sourceLocation
    )
}

/// A volume entry as (source, target): the short "source:target[:mode]" or the long mapping form.
private func volumeMount(_ node: Any) -> (source: String, target: String)? {
    if let node = mapping(node) {
        guard let source = text(node["source"]), let target = text(node["target"]) else { return nil }
        return (source, target)
    }
    guard let entry = text(node) else { return nil }
    let parts = entry.split(separator: ":").map(String.init)
    return parts.count >= 2 ? (parts[0], parts[1]) : nil
}

// MARK: - URLs, interpolation, durations

private func passwordVariable(_ worker: String) -> String {
    worker.replacingOccurrences(of: "-", with: "_").uppercased() + "_DB_PASSWORD"
}

/// user:password of a postgres:// URL (the part before the last "@").
private func userInfo(_ url: String) -> String {
    guard let scheme = url.range(of: "://"), let at = url.range(of: "@", options: .backwards) else { return "" }
    guard scheme.upperBound <= at.lowerBound else { return "" }
    return String(url[scheme.upperBound..<at.lowerBound])
}

/// The user of a postgres:// URL; an interpolation such as ${POSTGRES_USER:-astro} counts as one.
private func databaseUser(_ url: String) -> String {
    let info = userInfo(url)
    if info.hasPrefix("${"), let close = info.firstIndex(of: "}") {
        return String(info[...close])
    }
    return String(info.prefix { $0 != ":" })
}

private func databasePassword(_ url: String) -> String {
    let info = userInfo(url)
    let user = databaseUser(url)
    guard info.count > user.count else { return "" }
    return String(info.dropFirst(user.count + 1))
}

/// The names a compose value interpolates: $NAME, ${NAME}, ${NAME:-default}, …; `$$` is a literal
/// dollar sign. Names inside a default are found too, in order of appearance.
private func variableNames(in value: String) -> [String] {
    let characters = Array(value)
    var names: [String] = []
    var index = 0
    func isNameCharacter(_ character: Character, first: Bool) -> Bool {
        character.isASCII && (character.isLetter || character == "_" || (!first && character.isNumber))
    }
    while index < characters.count {
        guard characters[index] == "$", index + 1 < characters.count else {
            index += 1
            continue
        }
        let next = characters[index + 1]
        if next == "$" {
            index += 2
            continue
        }
        var start = index + 1
        if next == "{" { start += 1 }
        var end = start
        while end < characters.count && isNameCharacter(characters[end], first: end == start) { end += 1 }
        if end > start { names.append(String(characters[start..<end])) }
        index = max(end, index + 1)
    }
    return names
}

/// What a value becomes when no variable is set: ${NAME:-default} and ${NAME-default} give the
/// default, other forms nothing; a value that is not one interpolation is itself.
private func resolvedDefault(_ value: String) -> String {
    guard value.hasPrefix("${"), value.hasSuffix("}"), let name = variableNames(in: value).first else { return value }
    let modifier = value.dropFirst(2 + name.count).dropLast()
    for separator in [":-", "-"] where modifier.hasPrefix(separator) {
        return String(modifier.dropFirst(separator.count))
    }
    return ""
}

/// A compose duration such as "40s", "1m30s" or "500ms", in seconds; nil if it is not one.
private func seconds(ofDuration duration: String) -> Double? {
    let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("us", 0.000_001), ("ns", 0.000_000_001), ("h", 3600), ("m", 60), ("s", 1),
    ]
    var rest = Substring(duration)
    var total = 0.0
    guard !rest.isEmpty else { return nil }
    while !rest.isEmpty {
        let number = rest.prefix { $0.isNumber || $0 == "." }
        guard let amount = Double(number) else { return nil }
        rest = rest.dropFirst(number.count)
        guard let unit = units.first(where: { rest.hasPrefix($0.suffix) }) else { return nil }
        rest = rest.dropFirst(unit.suffix.count)
        total += amount * unit.seconds
    }
    return total
}

// MARK: - .env.example

/// NAME → value of every `NAME=value` line of .env.example.
private func envExample() throws -> [String: String] {
    let url = repositoryRoot.appendingPathComponent(".env.example")
    var result: [String: String] = [:]
    for line in try String(contentsOf: url, encoding: .utf8).split(whereSeparator: \.isNewline) {
        var entry = line.trimmingCharacters(in: .whitespaces)
        if entry.isEmpty || entry.hasPrefix("#") { continue }
        if entry.hasPrefix("export ") { entry = String(entry.dropFirst("export ".count)) }
        guard let equals = entry.firstIndex(of: "=") else { continue }
        result[String(entry[..<equals])] = String(entry[entry.index(after: equals)...])
    }
    return result
}

// MARK: - docker

/// `docker` from PATH, if there is one.
private let dockerExecutable: URL? = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for directory in path.split(separator: ":") {
        let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("docker")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
}()

/// Whether `docker compose version` works (a client with the compose plugin; no daemon needed).
private let dockerComposeAvailable: Bool = {
    guard let docker = dockerExecutable, let (status, _) = try? run(docker, ["compose", "version"]) else {
        return false
    }
    return status == 0
}()

/// Runs a program in the repository root (a `ChildProcess`: ended with the test, at most 120 s);
/// its exit status and its output followed by its standard error.
private func run(_ executable: URL, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let result = try ProcessRunner.runWaiting(
        executable.path,
        arguments,
        directory: repositoryRoot,
        timeout: .seconds(120)
    )
    return (result.status, result.output + result.error)
}

// MARK: - The maintenance task (issue 17)

extension ComposeFileTests {
    @Test func maintenanceRunsOnceOnDemandAsItsOwnRoleAfterTheMigration() throws {
        let compose = try ComposeFile.load()
        let maintenance = try compose.service("maintenance")
        #expect(restartPolicy(maintenance) == "no", "maintenance: one run, then it exits")
        // Not started by `docker compose up`: cron runs `docker compose run --rm maintenance`.
        let profiles = (maintenance["profiles"] as? [Any])?.compactMap(text) ?? []
        #expect(profiles == ["maintenance"], "maintenance: profiles \(profiles)")
        #expect(dependsOn(maintenance)["migrate"] == "service_completed_successfully")
        let environment = environmentOf(maintenance)
        let url = environment["DATABASE_URL"] ?? ""
        #expect(databaseUser(url) == "astro_maintenance", "maintenance: DATABASE_URL must connect as astro_maintenance")
        // Its own broker user (the .dead queues and astro.dead-dropped only), never the administrator,
        // with the password the broker's service creates it with.
        let broker = environment["AMQP_URL"] ?? ""
        #expect(databaseUser(broker) == "maintenance", "maintenance: AMQP_URL must connect as the maintenance user")
        let rabbitmq = environmentOf(try compose.service("rabbitmq"))
        #expect(
            resolvedDefault(rabbitmq["MAINTENANCE_AMQP_PASSWORD"] ?? "") == resolvedDefault(databasePassword(broker)),
            "maintenance: its broker password differs from the one the broker's service sets"
        )
        #expect(rabbitmq["OPERATOR_AMQP_PASSWORD"] != nil, "rabbitmq: OPERATOR_AMQP_PASSWORD is not set")
        // The password migrate gives the role is the one the task uses.
        let migrate = environmentOf(try compose.service("migrate"))
        #expect(
            resolvedDefault(migrate["MAINTENANCE_DB_PASSWORD"] ?? "") == resolvedDefault(databasePassword(url)),
            "maintenance: its password differs from the one migrate sets"
        )
        for variable in [
            "JOB_RETENTION", "OUTBOX_RETENTION", "RETENTION_BATCH_SIZE", "RETENTION_MAX_DURATION",
            "DEAD_LETTER_MAX_AGE", "DEAD_LETTER_MAX_LENGTH",
        ] {
            #expect(environment[variable] != nil, "maintenance: \(variable) is not passed through")
        }
    }
}
