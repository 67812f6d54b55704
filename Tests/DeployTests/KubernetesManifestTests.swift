import Foundation
import TestProcesses
import Testing
import Yams

// Offline checks of deploy/k8s: the Kustomize base and the production overlay are rendered here
// the way `kubectl kustomize` would for the features they use (resources, strategic-merge patches
// from files, images), then every object is checked: well-formed, workers hardened and probed,
// every name they reference defined, KEDA scaling on the right queues, disruption budgets, and
// the RabbitMQ and PostgreSQL clusters of production. No kubectl, kustomize or cluster needed.

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

// MARK: - What the manifests must describe

/// The port every worker serves /healthz, /readyz and /metrics on in Kubernetes.
private let workerHTTPPort = 8080
/// The image's user (deploy/Dockerfile).
private let imageUser = 10001
/// The settings the migrate Job and every worker must agree on: the queue type and the retry
/// delays, which name the delay queues.
private let sharedBrokerSettings = ["QUEUE_TYPE", "MAX_ATTEMPTS", "RETRY_INITIAL_DELAY_MS", "RETRY_MAX_DELAY_MS"]

// MARK: - The tests

@Suite("Kubernetes manifests (deploy/k8s)")
struct KubernetesManifestTests {
    @Test(
        "renders offline: files exist, kustomize features supported, patches and images apply",
        arguments: Target.allCases
    )
    func renders(target: Target) {
        let rendering = target.render()
        #expect(rendering.problems.isEmpty, "\(target.rawValue):\n\(rendering.problems.joined(separator: "\n"))")
        let workers = Worker.all.count
        let required: [(kind: String, count: Int)] = [
            ("Deployment", workers), ("Job", 1), ("ScaledObject", workers), ("PodDisruptionBudget", workers),
            ("TriggerAuthentication", 1), ("ServiceAccount", 1), ("ConfigMap", 1), ("Secret", 1),
            ("PersistentVolumeClaim", 1), ("Service", 1), ("Ingress", 1), ("HorizontalPodAutoscaler", 1),
            ("NetworkPolicy", 2),
        ]
        for (kind, count) in required {
            #expect(
                rendering.all(kind).count >= count,
                "\(target.rawValue): \(rendering.all(kind).count) \(kind) objects, expected at least \(count)"
            )
        }
    }

    /// The offline renderer stands in for Kustomize; where kubectl is installed, its built-in
    /// Kustomize must render the same objects, field for field.
    @Test(
        "kubectl kustomize renders the same objects as the offline renderer",
        .enabled(if: kubectlExecutable != nil, "needs kubectl on PATH (no cluster needed)"),
        arguments: Target.allCases
    )
    func kubectlKustomizeAgrees(target: Target) throws {
        let kubectl = try #require(kubectlExecutable)
        let result = try ProcessRunner.runWaiting(
            kubectl.path,
            ["kustomize", target.rawValue],
            directory: repositoryRoot,
            timeout: .seconds(120)
        )
        let text = result.output
        #expect(result.status == 0, "kubectl kustomize \(target.rawValue): \(result.error)")
        let identity = { (value: Value) in
            "\(value["kind"].string ?? "")/\(value["metadata"]["namespace"].string ?? "")/\(value["metadata"]["name"].string ?? "")"
        }
        var rendered: [String: Value] = [:]
        for document in try Yams.load_all(yaml: text) {
            let value = Value(yams: document)
            if value != .null { rendered[identity(value)] = value }
        }
        let ours = Dictionary(
            target.render().resources.map { (identity($0.value), $0.value) },
            uniquingKeysWith: { a, _ in a }
        )
        #expect(rendered.count > 10)
        #expect(
            Set(rendered.keys) == Set(ours.keys),
            "objects differ: kubectl \(rendered.keys.sorted()), ours \(ours.keys.sorted())"
        )
        for (key, value) in rendered {
            #expect(ours[key] == value, "\(key) differs:\nkubectl: \(value)\nours:    \(ours[key] ?? .null)")
        }
    }

    @Test("every document has apiVersion, kind and metadata.name; names unique per kind", arguments: Target.allCases)
    func documentsAreWellFormed(target: Target) {
        let rendering = target.render()
        #expect(!rendering.resources.isEmpty, "\(target.rawValue) renders no objects")
        var problems: [String] = []
        var seen: [String: String] = [:]
        for resource in rendering.resources {
            if resource.apiVersion.isEmpty { problems.append("\(resource.source): no apiVersion") }
            if resource.kind.isEmpty { problems.append("\(resource.source): no kind") }
            if resource.name.isEmpty {
                problems.append("\(resource.source): no metadata.name")
            } else if !isDNSSubdomain(resource.name) {
                problems.append("\(resource.label): metadata.name is not a lowercase DNS name")
            }
            let identity = "\(resource.kind)/\(resource.name)"
            if let first = seen[identity] {
                problems.append("\(identity) is defined twice: \(first) and \(resource.source)")
            } else {
                seen[identity] = resource.source
            }
            problems += stringTypingProblems(resource)
        }
        #expect(problems.isEmpty, "\(target.rawValue):\n\(problems.joined(separator: "\n"))")
    }

    @Test(
        "worker Deployment: probes, port, resources, non-root read-only, grace > drain, no migration",
        arguments: Worker.all,
        Target.allCases
    )
    func workerDeployment(worker: Worker, target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(
            rendering.first("Deployment", worker.name),
            "\(target.rawValue): no Deployment \(worker.name)"
        )
        let place = "\(target.rawValue): \(deployment.label)"
        let pod = deployment.pod
        let container = try #require(
            pod["containers"].list.first { $0["name"].string == worker.name },
            "\(place): no container named \(worker.name)"
        )
        let env = Environment(container: container, rendering: rendering)

        #expect(
            container["command"].list.compactMap(\.string) == ["/app/\(worker.name)"],
            "\(place): command must be [/app/\(worker.name)] (the image's entrypoint is the chart-worker)"
        )
        let image = container["image"].string ?? ""
        #expect(image.contains("astrosvitla-backend"), "\(place): image \(image) is not astrosvitla-backend")

        // The health server: a named port and both probes on it.
        let http = container["ports"].list.first { $0["name"].string == "http" }
        #expect(http?["containerPort"].int == workerHTTPPort, "\(place): no container port http \(workerHTTPPort)")
        #expect(env.value("HTTP_PORT") == "\(workerHTTPPort)", "\(place): HTTP_PORT is not \(workerHTTPPort)")
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = container[probe]["httpGet"]
            #expect(get["path"].string == path, "\(place): \(probe) must GET \(path), not \(get["path"])")
            let port = get["port"]
            #expect(
                port.string == "http" || port.int == workerHTTPPort,
                "\(place): \(probe) must use port http (\(workerHTTPPort)), not \(port)"
            )
        }

        // The health server listens only once PostgreSQL and RabbitMQ answer, which a worker waits up to
        // 60 s for (Worker.run's startupTimeout): liveness must not kill it before.
        let startup = container["startupProbe"] != .null ? container["startupProbe"] : container["livenessProbe"]
        let period = startup["periodSeconds"].int ?? 10
        let failures = startup["failureThreshold"].int ?? 3
        let patience = (startup["initialDelaySeconds"].int ?? 0) + period * failures
        #expect(patience > 60, "\(place): probes give start-up \(patience)s; the worker may take 60s to listen")
        if container["startupProbe"] != .null {
            #expect(container["startupProbe"]["httpGet"]["path"].string == "/healthz", "\(place): startupProbe path")
        }

        // Resources.
        for section in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                let quantity = container["resources"][section][resource]
                #expect(
                    quantity.string.map(parseQuantity) != nil || quantity.int != nil,
                    "\(place): resources.\(section).\(resource) is missing or not a quantity"
                )
            }
        }

        // Hardening, and a writable /tmp on the read-only root.
        let hardening = hardeningProblems(pod: pod, container: container)
        #expect(hardening.isEmpty, "\(place):\n\(hardening.joined(separator: "\n"))")
        #expect(
            pod["serviceAccountName"].string != nil && pod["automountServiceAccountToken"].bool == false,
            "\(place): needs a serviceAccountName and automountServiceAccountToken: false"
        )

        // Graceful shutdown: the kubelet must wait longer than the drain.
        let grace = pod["terminationGracePeriodSeconds"].int ?? 30
        let drain = try #require(
            env.value("SHUTDOWN_DRAIN_SECONDS").flatMap { Int($0) },
            "\(place): SHUTDOWN_DRAIN_SECONDS is not set to a number"
        )
        #expect(grace > drain, "\(place): terminationGracePeriodSeconds \(grace) is not above the \(drain)s drain")

        // Worker settings.
        #expect(
            env.value("MIGRATE_ON_START") == "false",
            "\(place): MIGRATE_ON_START must be \"false\" (the migrate Job migrates)"
        )
        #expect(env.value("LOG_FORMAT") == "json", "\(place): LOG_FORMAT must be json")
        let queueType = env.value("QUEUE_TYPE") ?? "classic"
        #expect(
            ["classic", "quorum"].contains(queueType),
            "\(place): QUEUE_TYPE \(queueType) is not classic or quorum"
        )
        let prefetch = env.value("PREFETCH").flatMap { Int($0) }
        #expect(
            prefetch == worker.prefetch,
            "\(place): PREFETCH \(String(describing: prefetch)) differs from the worker's default \(worker.prefetch)"
        )
        // The OpenAI-compatible endpoints are configured (empty: the built-in writer or illustrator).
        let apiSettings: [String: [String]] = [
            "report-worker": [
                "LLM_BASE_URL", "LLM_MODEL", "LLM_PRICE_INPUT_PER_1M_USD", "LLM_PRICE_OUTPUT_PER_1M_USD",
            ],
            "story-worker": [
                "LLM_BASE_URL", "LLM_MODEL", "LLM_PRICE_INPUT_PER_1M_USD", "LLM_PRICE_OUTPUT_PER_1M_USD",
                "IMAGE_BASE_URL", "IMAGE_MODEL", "IMAGE_SIZE", "IMAGE_TIMEOUT_SECONDS", "IMAGE_MAX_ATTEMPTS",
                "IMAGE_DEADLINE_SECONDS",
            ],
        ]
        for variable in apiSettings[worker.name] ?? [] {
            #expect(env.value(variable) != nil, "\(place): \(variable) is not set (empty for the built-in default)")
        }
        for variable in ["LLM_BASE_URL", "IMAGE_BASE_URL"] {
            if let url = env.value(variable), !url.isEmpty {
                #expect(url.hasPrefix("https://"), "\(place): \(variable) \(url) must be https")
            }
        }
        switch worker.name {
        case "chart-worker":
            // Foundation counts the node's cores, not the container's: the thread count must be explicit.
            let threads = env.value("EPHEMERIS_THREADS").flatMap { Int($0) }
            let cpuLimit = container["resources"]["limits"]["cpu"].quantity
            #expect(threads != nil, "\(place): EPHEMERIS_THREADS must be set (else one thread per node core)")
            if let threads, let cpuLimit {
                #expect(
                    Double(threads) <= cpuLimit.rounded(.up),
                    "\(place): EPHEMERIS_THREADS \(threads) exceeds the CPU limit \(cpuLimit)"
                )
            }
        case "billing-worker":
            let environment = env.value("BILLING_ENVIRONMENT") ?? ""
            #expect(
                ["Production", "Sandbox", "Xcode", "LocalTesting"].contains(environment),
                "\(place): BILLING_ENVIRONMENT \(environment.debugDescription) is not a store environment"
            )
        case "story-worker":
            let size = env.value("IMAGE_SIZE") ?? ""
            let sides = size.split(separator: "x", omittingEmptySubsequences: false).compactMap { Int($0) }
            #expect(
                sides.count == 2 && sides.allSatisfy { (64...4096).contains($0) },
                "\(place): IMAGE_SIZE \(size.debugDescription) is not <width>x<height> (64…4096 each)"
            )
            let lease = env.value("ILLUSTRATION_CLAIM_LEASE_SECONDS").flatMap { Int($0) } ?? 600
            #expect(lease >= 10, "\(place): ILLUSTRATION_CLAIM_LEASE_SECONDS \(lease) is below 10")
        default:
            break
        }
    }

    @Test(
        "worker credentials come from Secrets: own database role, mounted key files",
        arguments: Worker.all,
        Target.allCases
    )
    func workerCredentials(worker: Worker, target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(
            rendering.first("Deployment", worker.name),
            "\(target.rawValue): no Deployment \(worker.name)"
        )
        let place = "\(target.rawValue): \(deployment.label)"
        let pod = deployment.pod
        let container = try #require(pod["containers"].list.first, "\(place): no container")
        let env = Environment(container: container, rendering: rendering)

        for variable in ["AMQP_URL", "DATABASE_URL"] {
            #expect(
                env.entries[variable]?.secret != nil,
                "\(place): \(variable) holds credentials and must come from a Secret"
            )
        }
        for prefix in ["LLM", "IMAGE"] {
            #expect(
                env.entries["\(prefix)_API_KEY"] == nil,
                "\(place): \(prefix)_API_KEY must not be set; mount \(prefix)_API_KEY_FILE"
            )
        }

        // The worker's own role: the Secret is the worker's alone, and user, username and role agree.
        let databaseSecret = env.entries["DATABASE_URL"]?.secret?.name ?? ""
        for other in Worker.all where other.name != worker.name {
            let otherSecret = rendering.environment(ofDeployment: other.name)?.entries["DATABASE_URL"]?.secret?.name
            #expect(otherSecret != databaseSecret, "\(place): shares its database Secret with \(other.name)")
        }
        let url = env.value("DATABASE_URL") ?? ""
        #expect(
            URLComponents(string: url)?.user == worker.role,
            "\(place): DATABASE_URL (Secret \(databaseSecret)) must connect as \(worker.role)"
        )
        if let secret = rendering.first("Secret", databaseSecret) {
            let data = secretData(secret)
            #expect(data["username"] == worker.role, "\(secret.label): username must be \(worker.role)")
            #expect(
                data["password"] != nil && data["password"] == URLComponents(string: url)?.password,
                "\(secret.label): key password must hold the password of DATABASE_URL"
            )
        }

        // Key files are mounted from a Secret holding them, never passed in the environment.
        let files: [String: [String]] = [
            "report-worker": ["LLM_API_KEY_FILE"], "billing-worker": ["APPSTORE_API_PRIVATE_KEY_FILE"],
            "story-worker": ["LLM_API_KEY_FILE", "IMAGE_API_KEY_FILE"],
        ]
        for variable in files[worker.name] ?? [] {
            let path = try #require(env.value(variable), "\(place): \(variable) is not set")
            let file = secretFile(at: path, pod: pod, container: container, rendering: rendering)
            #expect(file != nil, "\(place): \(variable) \(path) is not a file mounted from a key of a Secret")
        }
    }

    @Test(
        "migrate Job: astroctl migrate as the schema owner, same broker settings as the workers",
        arguments: Target.allCases
    )
    func migrateJob(target: Target) throws {
        let rendering = target.render()
        let jobs = rendering.all("Job").filter {
            $0.value["spec"]["template"]["spec"]["containers"].list.contains { container in
                container["command"].list.compactMap(\.string).starts(with: ["/app/astroctl", "migrate"])
            }
        }
        let job = try #require(jobs.first, "\(target.rawValue): no Job runs /app/astroctl migrate")
        #expect(jobs.count == 1, "\(target.rawValue): \(jobs.count) migrate Jobs")
        let place = "\(target.rawValue): \(job.label)"
        let pod = job.pod
        let container = try #require(
            pod["containers"].list.first { $0["command"].list.first?.string == "/app/astroctl" },
            "\(place): no astroctl container"
        )

        #expect((job.value["spec"]["backoffLimit"].int ?? 0) >= 1, "\(place): backoffLimit must allow retries")
        #expect(job.value["spec"]["ttlSecondsAfterFinished"].int != nil, "\(place): no ttlSecondsAfterFinished")
        let restart = pod["restartPolicy"].string ?? ""
        #expect(["Never", "OnFailure"].contains(restart), "\(place): restartPolicy \(restart) is not Never/OnFailure")
        let hardening = hardeningProblems(pod: pod, container: container)
        #expect(hardening.isEmpty, "\(place):\n\(hardening.joined(separator: "\n"))")
        for section in ["requests", "limits"] {
            #expect(container["resources"][section]["memory"] != .null, "\(place): no resources.\(section).memory")
        }

        // The schema owner, not a worker role.
        let env = Environment(container: container, rendering: rendering)
        #expect(env.entries["DATABASE_URL"]?.secret != nil, "\(place): DATABASE_URL must come from a Secret")
        #expect(env.entries["AMQP_URL"]?.secret != nil, "\(place): AMQP_URL must come from a Secret")
        let owner = URLComponents(string: env.value("DATABASE_URL") ?? "")?.user ?? ""
        #expect(
            !owner.isEmpty && !Worker.all.map(\.role).contains(owner),
            "\(place): DATABASE_URL must connect as the schema owner, not \(owner.debugDescription)"
        )

        // Role passwords: set by the Job unless CloudNativePG's managed roles own them (its bootstrap
        // owner may not alter other roles).
        let cnpgRoles = Set(
            rendering.all("Cluster").filter { $0.apiVersion.hasPrefix("postgresql.cnpg.io/") }.flatMap {
                $0.value["spec"]["managed"]["roles"].list.compactMap { $0["name"].string }
            }
        )
        for worker in Worker.all {
            let entry = env.entries[worker.passwordVariable]
            if cnpgRoles.contains(worker.role) {
                #expect(
                    entry == nil,
                    "\(place): \(worker.passwordVariable) is set but CloudNativePG manages \(worker.role)"
                )
                continue
            }
            let workerSecret = rendering.environment(ofDeployment: worker.name)?.entries["DATABASE_URL"]?.secret?.name
            #expect(
                entry?.secret?.name != nil && entry?.secret?.name == workerSecret && entry?.secret?.key == "password",
                "\(place): \(worker.passwordVariable) must come from key password of \(worker.name)'s Secret"
            )
        }

        // The Job declares the topology the workers consume: same queue type and retry delays.
        for worker in Worker.all {
            guard let workerEnv = rendering.environment(ofDeployment: worker.name) else { continue }
            for name in sharedBrokerSettings {
                let jobValue = env.value(name) ?? "(unset)"
                let workerValue = workerEnv.value(name) ?? "(unset)"
                #expect(
                    jobValue == workerValue,
                    "\(place): \(name) \(jobValue) differs from \(worker.name)'s \(workerValue)"
                )
            }
        }
    }

    @Test(
        "every referenced ConfigMap, Secret, key, ServiceAccount, scale target and auth exists",
        arguments: Target.allCases
    )
    func referencesResolve(target: Target) {
        let rendering = target.render()
        var references: [Reference] = []
        for resource in rendering.resources {
            collectReferences(resource.value, from: resource, path: "", into: &references)
        }
        var problems: [String] = []
        for reference in references {
            guard let object = rendering.first(reference.kind, reference.name) else {
                if !reference.optional {
                    problems.append(
                        "\(reference.place): \(reference.kind) \(reference.name.debugDescription) is not defined"
                    )
                }
                continue
            }
            guard let key = reference.key else { continue }
            let keys: Set<String>
            switch reference.kind {
            case "Secret": keys = Set(secretData(object).keys)
            case "ConfigMap": keys = Set(object.value["data"].map.keys).union(object.value["binaryData"].map.keys)
            default: keys = []
            }
            if !keys.contains(key) && !reference.optional {
                problems.append(
                    "\(reference.place): \(reference.kind) \(reference.name) has no key \(key.debugDescription)"
                )
            }
        }
        // Selectors: a PodDisruptionBudget must select pods, a Deployment its own template.
        for budget in rendering.all("PodDisruptionBudget") {
            let selector = budget.value["spec"]["selector"]["matchLabels"].map.compactMapValues(\.string)
            if selector.isEmpty {
                problems.append("\(budget.label): spec.selector.matchLabels is empty")
            } else if podLabelSets(rendering).allSatisfy({ !matches(selector, $0) }) {
                problems.append("\(budget.label): selector \(selector) matches no pod template")
            }
        }
        for deployment in rendering.all("Deployment") {
            let selector = deployment.value["spec"]["selector"]["matchLabels"].map.compactMapValues(\.string)
            let labels = deployment.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)
            if selector.isEmpty || !matches(selector, labels) {
                problems.append("\(deployment.label): selector \(selector) does not match its template labels")
            }
        }
        #expect(problems.isEmpty, "\(target.rawValue):\n\(problems.joined(separator: "\n"))")
        // The walk must have found the references the workers rely on, or it checked nothing.
        let kinds = Set(references.map(\.kind))
        for kind in ["Secret", "ConfigMap", "ServiceAccount", "Deployment", "TriggerAuthentication"] {
            #expect(kinds.contains(kind), "\(target.rawValue): no reference to a \(kind) was found")
        }
    }

    @Test(
        "KEDA ScaledObject per worker: its queues, unacknowledged messages counted",
        arguments: Worker.all,
        Target.allCases
    )
    func scaledObject(worker: Worker, target: Target) throws {
        let rendering = target.render()
        let scalers = rendering.all("ScaledObject").filter {
            $0.value["spec"]["scaleTargetRef"]["name"].string == worker.name
        }
        let scaler = try #require(scalers.first, "\(target.rawValue): no ScaledObject targets \(worker.name)")
        #expect(scalers.count == 1, "\(target.rawValue): \(scalers.count) ScaledObjects target \(worker.name)")
        let place = "\(target.rawValue): \(scaler.label)"
        let spec = scaler.value["spec"]
        #expect(scaler.apiVersion == "keda.sh/v1alpha1", "\(place): apiVersion \(scaler.apiVersion)")
        let kind = spec["scaleTargetRef"]["kind"].string ?? "Deployment"
        #expect(kind == "Deployment", "\(place): scaleTargetRef kind \(kind) is not Deployment")

        let minimum = spec["minReplicaCount"].int ?? 0
        let maximum = spec["maxReplicaCount"].int ?? 100
        #expect(minimum >= 1, "\(place): minReplicaCount \(minimum): a worker must always run (no scale to zero)")
        #expect(maximum >= minimum, "\(place): maxReplicaCount \(maximum) is below minReplicaCount \(minimum)")
        let cooldown = spec["cooldownPeriod"].int ?? 300
        let stabilization =
            spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
            .int ?? 300
        #expect(cooldown >= 60, "\(place): cooldownPeriod \(cooldown)s is too short")
        #expect(stabilization >= 60, "\(place): scale-down stabilization \(stabilization)s is too short")

        var queues: [String] = []
        let triggers = spec["triggers"].list
        #expect(!triggers.isEmpty, "\(place): no triggers")
        for (index, trigger) in triggers.enumerated() {
            let at = "\(place): trigger \(index)"
            let metadata = trigger["metadata"]
            #expect(trigger["type"].string == "rabbitmq", "\(at): type \(trigger["type"]) is not rabbitmq")
            #expect(metadata["mode"].string == "QueueLength", "\(at): mode must be QueueLength")
            #expect(metadata["protocol"].string == "http", "\(at): protocol must be http (the management API)")
            #expect(
                metadata["excludeUnacknowledged"].string == "false",
                "\(at): excludeUnacknowledged must be the string \"false\" so busy pods are not scaled away"
            )
            let value = metadata["value"].string.flatMap { Double($0) } ?? 0
            #expect(value > 0, "\(at): value must be a positive number as a string")
            for inline in ["host", "hostFromEnv", "password", "username"] {
                #expect(metadata[inline] == .null, "\(at): \(inline) must come from the TriggerAuthentication")
            }
            #expect(trigger["authenticationRef"]["name"].string != nil, "\(at): no authenticationRef")
            if let queue = metadata["queueName"].string { queues.append(queue) }
        }
        #expect(queues.sorted() == worker.queues.sorted(), "\(place): queues \(queues), expected \(worker.queues)")

        // The TriggerAuthentication gives the scaler its management URL from a Secret.
        for name in Set(triggers.compactMap { $0["authenticationRef"]["name"].string }) {
            guard let auth = rendering.first("TriggerAuthentication", name) else { continue }  // referencesResolve
            let host = auth.value["spec"]["secretTargetRef"].list.first { $0["parameter"].string == "host" }
            #expect(host != nil, "\(auth.label): no secretTargetRef for parameter host")
            if let host, let secret = rendering.first("Secret", host["name"].string ?? "") {
                let url = secretData(secret)[host["key"].string ?? ""] ?? ""
                let scheme = URLComponents(string: url)?.scheme ?? ""
                #expect(scheme.hasPrefix("http"), "\(secret.label): the management URL must be http(s), not \(scheme)")
            }
        }
    }

    @Test(
        "story-worker: STORY_STORAGE_ROOT is a shared ReadWriteMany claim, writable on the read-only root",
        arguments: Target.allCases
    )
    func storyStorage(target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(
            rendering.first("Deployment", "story-worker"),
            "\(target.rawValue): no Deployment story-worker"
        )
        let place = "\(target.rawValue): \(deployment.label)"
        let pod = deployment.pod
        let container = try #require(
            pod["containers"].list.first { $0["name"].string == "story-worker" },
            "\(place): no container named story-worker"
        )
        let env = Environment(container: container, rendering: rendering)
        let root = try #require(
            env.value("STORY_STORAGE_ROOT"),
            "\(place): STORY_STORAGE_ROOT is not set (the worker would write into its read-only working directory)"
        )
        #expect(root.hasPrefix("/"), "\(place): STORY_STORAGE_ROOT \(root) is not an absolute path")
        let mountPath = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        let mount = try #require(
            container["volumeMounts"].list.first { $0["mountPath"].string == mountPath },
            "\(place): nothing is mounted at STORY_STORAGE_ROOT \(root) (the root filesystem is read-only)"
        )
        #expect(mount["readOnly"].bool != true, "\(place): the volume at \(root) is mounted read-only")
        let volume = try #require(
            pod["volumes"].list.first { $0["name"] == mount["name"] },
            "\(place): no volume \(mount["name"]) for the mount at \(root)"
        )
        let claimName = try #require(
            volume["persistentVolumeClaim"]["claimName"].string,
            "\(place): volume \(volume["name"]) is not a PersistentVolumeClaim; the images must persist and be shared"
        )
        #expect(
            volume["persistentVolumeClaim"]["readOnly"].bool != true,
            "\(place): the claim \(claimName) is mounted read-only"
        )
        let claim = try #require(
            rendering.first("PersistentVolumeClaim", claimName),
            "\(place): PersistentVolumeClaim \(claimName) is not defined"
        )
        #expect(claim.apiVersion == "v1", "\(claim.label): apiVersion \(claim.apiVersion)")
        let modes = claim.value["spec"]["accessModes"].list.compactMap(\.string)
        #expect(
            modes.contains("ReadWriteMany"),
            "\(claim.label): accessModes \(modes) lack ReadWriteMany; every replica, on any node, shares the images"
        )
        let storage = claim.value["spec"]["resources"]["requests"]["storage"].quantity ?? 0
        #expect(storage > 0, "\(claim.label): resources.requests.storage is missing or not a quantity")
        // Writable by the image's user: the pod's group (fsGroup) owns the volume.
        #expect(
            pod["securityContext"]["fsGroup"].int == imageUser,
            "\(place): fsGroup must be \(imageUser) so the volume is writable by the worker"
        )
        // Only the story-worker writes the images; no other worker mounts the claim.
        for other in Worker.all where other.name != "story-worker" {
            let claims =
                rendering.first("Deployment", other.name)?.pod["volumes"].list
                .compactMap { $0["persistentVolumeClaim"]["claimName"].string } ?? []
            #expect(!claims.contains(claimName), "\(target.rawValue): \(other.name) also mounts \(claimName)")
        }
    }

    @Test("a PodDisruptionBudget per worker", arguments: Worker.all, Target.allCases)
    func disruptionBudget(worker: Worker, target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(
            rendering.first("Deployment", worker.name),
            "\(target.rawValue): no Deployment \(worker.name)"
        )
        let labels = deployment.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)
        let budgets = rendering.all("PodDisruptionBudget").filter {
            let selector = $0.value["spec"]["selector"]["matchLabels"].map.compactMapValues(\.string)
            return !selector.isEmpty && matches(selector, labels)
        }
        let budget = try #require(budgets.first, "\(target.rawValue): no PodDisruptionBudget selects \(worker.name)")
        #expect(budgets.count == 1, "\(target.rawValue): \(budgets.count) budgets select \(worker.name)")
        #expect(budget.apiVersion == "policy/v1", "\(budget.label): apiVersion must be policy/v1")
        let spec = budget.value["spec"]
        #expect(
            (spec["maxUnavailable"] == .null) != (spec["minAvailable"] == .null),
            "\(budget.label): set exactly one of maxUnavailable and minAvailable"
        )
        // The budget selects this worker's pods only.
        for other in Worker.all where other.name != worker.name {
            let otherLabels =
                rendering.first("Deployment", other.name)?
                .value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string) ?? [:]
            let selector = spec["selector"]["matchLabels"].map.compactMapValues(\.string)
            #expect(!matches(selector, otherLabels), "\(budget.label) also selects \(other.name)")
        }
    }

    @Test("production overlay: patches target base objects; quorum queues and Production purchases")
    func productionOverlay() throws {
        let directory = Target.production.rawValue
        let kustomization = try #require(
            loadDocuments(relativePath: "\(directory)/kustomization.yaml").first,
            "\(directory)/kustomization.yaml is missing or empty"
        )
        #expect(
            kustomization["resources"].list.contains { $0.string == "../../base" },
            "\(directory): resources must include ../../base"
        )
        let base = Target.base.render()
        let patches = kustomization["patches"].list
        #expect(!patches.isEmpty, "\(directory): no patches")
        for patch in patches {
            let path = try #require(patch["path"].string, "\(directory): a patch without path: \(patch)")
            let documents = loadDocuments(relativePath: "\(directory)/\(path)")
            #expect(documents.count == 1, "\(directory)/\(path): \(documents.count) documents, expected one object")
            for document in documents {
                let kind = document["kind"].string ?? ""
                let name = document["metadata"]["name"].string ?? ""
                #expect(
                    base.first(kind, name) != nil,
                    "\(directory)/\(path) patches \(kind)/\(name), which the base does not define"
                )
            }
        }

        let production = Target.production.render()
        #expect(production.problems.isEmpty, "\(production.problems.joined(separator: "\n"))")
        var clients = Worker.all.compactMap { production.first("Deployment", $0.name) }
        clients += production.all("Job")
        #expect(
            clients.count == Worker.all.count + 1,
            "\(directory): expected \(Worker.all.count) worker Deployments and the migrate Job"
        )
        for client in clients {
            let queueType = Environment(container: client.container, rendering: production).value("QUEUE_TYPE")
            #expect(queueType == "quorum", "\(directory): \(client.label) runs with QUEUE_TYPE \(queueType ?? "unset")")
        }

        let billingEnv = try #require(
            production.environment(ofDeployment: "billing-worker"),
            "\(directory): no Deployment billing-worker"
        )
        #expect(billingEnv.value("BILLING_ENVIRONMENT") == "Production", "\(directory): billing-worker not Production")
        #expect(
            !(billingEnv.value("BILLING_APP_APPLE_ID") ?? "").isEmpty,
            "\(directory): BILLING_APP_APPLE_ID is required with Production"
        )
        let baseEnv = try #require(base.environment(ofDeployment: "billing-worker"), "base: no billing-worker")
        #expect(baseEnv.value("BILLING_ENVIRONMENT") == "Sandbox", "base: billing-worker should be Sandbox")
    }

    @Test("production RabbitMQ: a three-node RabbitmqCluster the workers and KEDA point at")
    func rabbitmqCluster() throws {
        let production = Target.production.render()
        let clusters = production.all("RabbitmqCluster")
        let cluster = try #require(clusters.first, "production: no RabbitmqCluster")
        #expect(clusters.count == 1, "production: \(clusters.count) RabbitmqClusters")
        #expect(cluster.apiVersion == "rabbitmq.com/v1beta1", "\(cluster.label): apiVersion \(cluster.apiVersion)")
        #expect(cluster.value["spec"]["replicas"].int == 3, "\(cluster.label): replicas must be 3 for quorum queues")

        // The service the operator creates is named after the cluster.
        let env = try #require(production.environment(ofDeployment: "chart-worker"), "production: no chart-worker")
        let amqp = env.value("AMQP_URL") ?? ""
        let amqpHost = URLComponents(string: amqp)?.host ?? ""
        #expect(
            amqpHost.split(separator: ".").first.map(String.init) == cluster.name,
            "AMQP_URL host \(amqpHost) is not the \(cluster.name) service"
        )
        for auth in production.all("TriggerAuthentication") {
            for target in auth.value["spec"]["secretTargetRef"].list where target["parameter"].string == "host" {
                let secret = production.first("Secret", target["name"].string ?? "")
                let url = secret.flatMap { secretData($0)[target["key"].string ?? ""] } ?? ""
                let components = URLComponents(string: url)
                #expect(
                    components?.host?.split(separator: ".").first.map(String.init) == cluster.name
                        && components?.port == 15672,
                    "\(auth.label): management URL must reach \(cluster.name):15672"
                )
            }
        }
    }

    @Test("production PostgreSQL: CloudNativePG with the worker roles as managed login roles")
    func cloudNativePG() throws {
        let production = Target.production.render()
        let clusters = production.all("Cluster").filter { $0.apiVersion == "postgresql.cnpg.io/v1" }
        let cluster = try #require(clusters.first, "production: no postgresql.cnpg.io/v1 Cluster")
        #expect(clusters.count == 1, "production: \(clusters.count) CloudNativePG clusters")
        let spec = cluster.value["spec"]
        #expect(spec["instances"].int == 3, "\(cluster.label): instances must be 3")

        let roles = spec["managed"]["roles"].list
        let names = roles.compactMap { $0["name"].string }
        #expect(
            names.sorted()
                == (Worker.all.map(\.role) + ["astro_gateway", "astro_maintenance", "astro_operator"]).sorted(),
            "\(cluster.label): managed roles \(names)"
        )
        for role in roles {
            let name = role["name"].string ?? "?"
            #expect(role["login"].bool == true, "\(cluster.label): role \(name) must be a login role")
            #expect(role["ensure"].string != "absent", "\(cluster.label): role \(name) is ensured absent")
            let secretName = role["passwordSecret"]["name"].string ?? ""
            let secret = try #require(
                production.first("Secret", secretName),
                "\(cluster.label): role \(name): passwordSecret \(secretName.debugDescription) is not defined"
            )
            #expect(secret.value["type"].string == "kubernetes.io/basic-auth", "\(secret.label): must be basic-auth")
            let data = secretData(secret)
            #expect(data["username"] == name, "\(secret.label): username must be \(name)")
            #expect(!(data["password"] ?? "").isEmpty, "\(secret.label): no password")
        }

        let initdb = spec["bootstrap"]["initdb"]
        let ownerSecret = try #require(
            production.first("Secret", initdb["secret"]["name"].string ?? ""),
            "\(cluster.label): bootstrap.initdb.secret is not defined"
        )
        #expect(
            secretData(ownerSecret)["username"] == initdb["owner"].string,
            "\(ownerSecret.label): username must be the database owner \(initdb["owner"])"
        )

        // Every database client connects to the primary's service.
        var clients = (Worker.all.map(\.name) + ["gateway"]).compactMap { production.first("Deployment", $0) }
        clients += production.all("Job")
        #expect(
            clients.count == Worker.all.count + 2,
            "production: expected \(Worker.all.count) worker Deployments, the gateway and the migrate Job"
        )
        for client in clients {
            let env = Environment(container: client.container, rendering: production)
            let components = URLComponents(string: env.value("DATABASE_URL") ?? "")
            #expect(
                components?.host?.split(separator: ".").first.map(String.init) == "\(cluster.name)-rw",
                "\(client.label): DATABASE_URL host \(String(describing: components?.host)) is not \(cluster.name)-rw"
            )
            #expect(
                components?.path == "/\(initdb["database"].string ?? "")",
                "\(client.label): DATABASE_URL names another database than \(initdb["database"])"
            )
        }
    }

    @Test("README explains applying, prerequisites and every Secret to replace")
    func readme() throws {
        let url = repositoryRoot.appendingPathComponent("deploy/k8s/README.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        for phrase in [
            "kubectl apply -k deploy/k8s/overlays/production", "KEDA", "RabbitMQ Cluster Operator", "CloudNativePG",
        ] {
            #expect(text.contains(phrase), "deploy/k8s/README.md does not mention \(phrase)")
        }
        let secrets = Target.base.render().all("Secret")
        #expect(!secrets.isEmpty, "base: no Secrets")
        for secret in secrets {
            #expect(text.contains(secret.name), "deploy/k8s/README.md does not say what Secret \(secret.name) holds")
        }
        for claim in Target.base.render().all("PersistentVolumeClaim") {
            #expect(text.contains(claim.name), "deploy/k8s/README.md does not explain the volume \(claim.name)")
            for mode in claim.value["spec"]["accessModes"].list.compactMap(\.string) {
                #expect(text.contains(mode), "deploy/k8s/README.md does not say why \(claim.name) is \(mode)")
            }
        }
    }
}

// MARK: - The gateway and the network policies (issue 16)

extension KubernetesManifestTests {
    @Test(
        "gateway Deployment: probes, resources, hardened, production, own credentials, key from a Secret",
        arguments: Target.allCases
    )
    func gatewayDeployment(target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(rendering.first("Deployment", "gateway"), "\(target.rawValue): no gateway")
        let place = "\(target.rawValue): \(deployment.label)"
        let pod = deployment.pod
        let container = try #require(
            pod["containers"].list.first { $0["name"].string == "gateway" },
            "\(place): no container named gateway"
        )
        let env = Environment(container: container, rendering: rendering)
        #expect(container["command"].list.compactMap(\.string) == ["/app/gateway"], "\(place): command")
        #expect((container["image"].string ?? "").contains("astrosvitla-backend"), "\(place): image")
        #expect(deployment.value["spec"]["replicas"] == .null, "\(place): replicas is the autoscaler's to set")
        let http = container["ports"].list.first { $0["name"].string == "http" }
        #expect(http?["containerPort"].int == workerHTTPPort, "\(place): no container port http 8080")
        #expect(env.value("HTTP_PORT") == "\(workerHTTPPort)", "\(place): HTTP_PORT")
        for (probe, path) in [
            ("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
        ] {
            let get = container[probe]["httpGet"]
            #expect(get["path"].string == path, "\(place): \(probe) must GET \(path)")
            #expect(get["port"].string == "http" || get["port"].int == workerHTTPPort, "\(place): \(probe) port")
        }
        for section in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                #expect(
                    container["resources"][section][resource].quantity != nil,
                    "\(place): resources.\(section).\(resource) is missing or not a quantity"
                )
            }
        }
        // The HorizontalPodAutoscaler measures CPU against the request: it must be set.
        #expect((container["resources"]["requests"]["cpu"].quantity ?? 0) > 0, "\(place): no CPU request")
        let hardening = hardeningProblems(pod: pod, container: container)
        #expect(hardening.isEmpty, "\(place):\n\(hardening.joined(separator: "\n"))")
        #expect(pod["automountServiceAccountToken"].bool == false, "\(place): automountServiceAccountToken")
        #expect((pod["terminationGracePeriodSeconds"].int ?? 30) > 10, "\(place): grace below the request timeout")

        // Production mode, and the signing key a file from a Secret (never the environment).
        #expect(env.value("GATEWAY_ENV") == "production", "\(place): GATEWAY_ENV must be production")
        // Issue 29: production runs with App Attest or says out loud that it does not, and the
        // gateway verifies Apple's notifications under the billing-worker's own policy.
        #expect(
            !(env.value("APP_ATTEST_APP_ID") ?? "").isEmpty || env.value("APP_ATTEST_ALLOW_UNATTESTED") == "true",
            "\(place): production without App Attest and without APP_ATTEST_ALLOW_UNATTESTED"
        )
        let billing = rendering.environment(ofDeployment: "billing-worker")
        #expect(env.value("BILLING_ENVIRONMENT") != nil, "\(place): no BILLING_ENVIRONMENT (required in production)")
        for variable in ["BILLING_ENVIRONMENT", "BILLING_BUNDLE_ID", "BILLING_APP_APPLE_ID", "BILLING_TRUSTED_ROOTS"] {
            #expect(
                env.value(variable) == billing?.value(variable),
                "\(place): \(variable) differs from the billing-worker's"
            )
        }
        let keyPath = try #require(env.value("GATEWAY_SIGNING_KEY_FILE"), "\(place): no GATEWAY_SIGNING_KEY_FILE")
        let key = secretFile(at: keyPath, pod: pod, container: container, rendering: rendering)
        #expect(key != nil, "\(place): GATEWAY_SIGNING_KEY_FILE \(keyPath) is not mounted from a key of a Secret")
        if let key, let secret = rendering.first("Secret", key.0) {
            #expect(secretData(secret)[key.1]?.contains("PRIVATE KEY") == true, "\(secret.label): not a PEM key")
        }
        #expect(env.entries["GATEWAY_SIGNING_KEY"] == nil, "\(place): a key in the environment")

        // Its own credentials: the gateway broker user and the astro_gateway role, from Secrets.
        for variable in ["AMQP_URL", "DATABASE_URL"] {
            #expect(env.entries[variable]?.secret != nil, "\(place): \(variable) must come from a Secret")
        }
        let broker = URLComponents(string: env.value("AMQP_URL") ?? "")
        #expect(broker?.user == "gateway", "\(place): AMQP_URL must connect as the gateway broker user")
        let database = URLComponents(string: env.value("DATABASE_URL") ?? "")
        #expect(database?.user == "astro_gateway", "\(place): DATABASE_URL must connect as astro_gateway")
        for worker in Worker.all {
            let workerSecret = rendering.environment(ofDeployment: worker.name)?.entries["DATABASE_URL"]?.secret?.name
            #expect(
                workerSecret != env.entries["DATABASE_URL"]?.secret?.name,
                "\(place): shares \(worker.name)'s Secret"
            )
        }
        for (variable, user) in [("AMQP_URL", "gateway"), ("DATABASE_URL", "astro_gateway")] {
            guard let name = env.entries[variable]?.secret?.name, let secret = rendering.first("Secret", name) else {
                continue
            }
            let data = secretData(secret)
            #expect(data["username"] == user, "\(secret.label): username must be \(user)")
            #expect(
                data["password"] != nil
                    && data["password"] == URLComponents(string: env.value(variable) ?? "")?.password,
                "\(secret.label): key password must hold the password of \(variable)"
            )
        }
        // The migrate Job lets astro_gateway log in, unless CloudNativePG manages the role.
        let job = try #require(rendering.all("Job").first, "\(target.rawValue): no migrate Job")
        let jobEnv = Environment(container: job.container, rendering: rendering)
        let managed = rendering.all("Cluster").flatMap {
            $0.value["spec"]["managed"]["roles"].list.compactMap { $0["name"].string }
        }
        if managed.contains("astro_gateway") {
            #expect(jobEnv.entries["GATEWAY_DB_PASSWORD"] == nil, "\(job.label): CloudNativePG manages astro_gateway")
        } else {
            let entry = jobEnv.entries["GATEWAY_DB_PASSWORD"]
            #expect(
                entry?.secret?.name == env.entries["DATABASE_URL"]?.secret?.name && entry?.secret?.key == "password",
                "\(job.label): GATEWAY_DB_PASSWORD must come from key password of the gateway's Secret"
            )
        }
    }

    @Test(
        "gateway exposure: Service, TLS Ingress with a body limit, CPU autoscaler, disruption budget",
        arguments: Target.allCases
    )
    func gatewayExposure(target: Target) throws {
        let rendering = target.render()
        let deployment = try #require(rendering.first("Deployment", "gateway"), "\(target.rawValue): no gateway")
        let labels = deployment.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)

        let service = try #require(rendering.first("Service", "gateway"), "\(target.rawValue): no Service gateway")
        let selector = service.value["spec"]["selector"].map.compactMapValues(\.string)
        #expect(!selector.isEmpty && matches(selector, labels), "\(service.label): does not select the gateway pods")
        let servicePort = try #require(service.value["spec"]["ports"].list.first, "\(service.label): no port")
        #expect(
            servicePort["targetPort"].string == "http" || servicePort["targetPort"].int == workerHTTPPort,
            "\(service.label): targetPort must be the gateway's http port"
        )
        #expect(service.value["spec"]["type"].string ?? "ClusterIP" == "ClusterIP", "\(service.label): not ClusterIP")

        let ingresses = rendering.all("Ingress")
        #expect(ingresses.count == 1, "\(target.rawValue): \(ingresses.count) Ingress objects")
        let ingress = try #require(ingresses.first)
        let tls = ingress.value["spec"]["tls"].list
        #expect(
            !tls.isEmpty && tls.allSatisfy { $0["secretName"].string != nil && !$0["hosts"].list.isEmpty },
            "\(ingress.label): TLS must terminate here (tls with hosts and secretName)"
        )
        let hosts = Set(tls.flatMap { $0["hosts"].list.compactMap(\.string) })
        for rule in ingress.value["spec"]["rules"].list {
            #expect(hosts.contains(rule["host"].string ?? ""), "\(ingress.label): rule host \(rule["host"]) has no TLS")
            for path in rule["http"]["paths"].list {
                #expect(path["backend"]["service"]["name"].string == "gateway", "\(ingress.label): backend")
            }
        }
        let bodySize = ingress.value["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
        let bytes = (bodySize.string?.lowercased()).flatMap { text -> Double? in
            if text.hasSuffix("k") { return Double(text.dropLast()).map { $0 * 1024 } }
            if text.hasSuffix("m") { return Double(text.dropLast()).map { $0 * 1_048_576 } }
            return Double(text)
        }
        // At least the Apple endpoint's 64 KiB, at most a little over it: the gateway answers 413
        // itself, the ingress keeps larger bodies from reaching it at all.
        #expect(
            bytes.map { (65_536...1_048_576).contains($0) } == true,
            "\(ingress.label): proxy-body-size \(bodySize) must be 64k…1m"
        )

        let autoscalers = rendering.all("HorizontalPodAutoscaler").filter {
            $0.value["spec"]["scaleTargetRef"]["name"].string == "gateway"
        }
        let autoscaler = try #require(
            autoscalers.first,
            "\(target.rawValue): no HorizontalPodAutoscaler for the gateway"
        )
        #expect(autoscaler.apiVersion == "autoscaling/v2", "\(autoscaler.label): apiVersion")
        #expect(autoscaler.value["spec"]["scaleTargetRef"]["kind"].string == "Deployment")
        #expect((autoscaler.value["spec"]["minReplicas"].int ?? 1) >= 2, "\(autoscaler.label): one replica is no HA")
        #expect(
            (autoscaler.value["spec"]["maxReplicas"].int ?? 0) > (autoscaler.value["spec"]["minReplicas"].int ?? 1),
            "\(autoscaler.label): maxReplicas must exceed minReplicas"
        )
        let cpu = autoscaler.value["spec"]["metrics"].list.first {
            $0["type"].string == "Resource" && $0["resource"]["name"].string == "cpu"
        }
        #expect(
            cpu?["resource"]["target"]["type"].string == "Utilization",
            "\(autoscaler.label): no CPU utilization target"
        )

        let budget = rendering.all("PodDisruptionBudget").first {
            matches($0.value["spec"]["selector"]["matchLabels"].map.compactMapValues(\.string), labels)
        }
        #expect(budget != nil, "\(target.rawValue): no PodDisruptionBudget for the gateway")
    }

    @Test(
        "NetworkPolicy: workers accept only their probe and metrics port; the gateway only from the ingress",
        arguments: Target.allCases
    )
    func networkPolicies(target: Target) throws {
        let rendering = target.render()
        let allPolicies = rendering.all("NetworkPolicy")
        func policies(for labels: [String: String]) -> [Resource] {
            allPolicies.filter {
                matches($0.value["spec"]["podSelector"]["matchLabels"].map.compactMapValues(\.string), labels)
            }
        }
        func onlyTheHTTPPort(_ rule: Value) -> Bool {
            let ports = rule["ports"].list
            return !ports.isEmpty
                && ports.allSatisfy {
                    ($0["port"].string == "http" || $0["port"].int == workerHTTPPort)
                        && ($0["protocol"].string ?? "TCP") == "TCP" && $0["endPort"] == .null
                }
        }
        for worker in Worker.all {
            let deployment = try #require(rendering.first("Deployment", worker.name))
            let labels = deployment.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)
            let selecting = policies(for: labels)
            #expect(!selecting.isEmpty, "\(target.rawValue): no NetworkPolicy selects \(worker.name)'s pods")
            for policy in selecting {
                let types = policy.value["spec"]["policyTypes"].list.compactMap(\.string)
                #expect(types.contains("Ingress"), "\(policy.label): policyTypes must include Ingress")
                for rule in policy.value["spec"]["ingress"].list {
                    #expect(onlyTheHTTPPort(rule), "\(policy.label): a rule opens more than the health port: \(rule)")
                }
            }
            // The health port is the container's port http (probes and /metrics).
            let port = deployment.container["ports"].list.first { $0["name"].string == "http" }
            #expect(port?["containerPort"].int == workerHTTPPort, "\(deployment.label): port http")
        }

        let gateway = try #require(rendering.first("Deployment", "gateway"))
        let labels = gateway.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)
        let selecting = policies(for: labels)
        #expect(!selecting.isEmpty, "\(target.rawValue): no NetworkPolicy selects the gateway's pods")
        var fromIngress = false
        func onlyTheMetricsPort(_ rule: Value) -> Bool {
            let ports = rule["ports"].list
            return !ports.isEmpty
                && ports.allSatisfy {
                    $0["port"].string == "metrics" && ($0["protocol"].string ?? "TCP") == "TCP"
                        && $0["endPort"] == .null
                }
        }
        for policy in selecting {
            #expect(
                policy.value["spec"]["policyTypes"].list.compactMap(\.string).contains("Ingress"),
                "\(policy.label): policyTypes must include Ingress"
            )
            for rule in policy.value["spec"]["ingress"].list {
                let sources = rule["from"].list
                #expect(!sources.isEmpty, "\(policy.label): a rule admits every source: \(rule)")
                let namespaces = sources.map {
                    $0["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].string ?? ""
                }
                // Issue 29: /metrics has a port of its own, opened to the monitoring namespace
                // only; the API's port to the ingress controller only.
                if onlyTheMetricsPort(rule) {
                    #expect(
                        namespaces.allSatisfy { $0 == "monitoring" },
                        "\(policy.label): the metrics port is open beyond the monitoring namespace: \(rule)"
                    )
                } else {
                    #expect(onlyTheHTTPPort(rule), "\(policy.label): a rule opens more than port http: \(rule)")
                    #expect(
                        namespaces.allSatisfy { $0.contains("ingress") },
                        "\(policy.label): port http is open beyond the ingress controller: \(rule)"
                    )
                }
                for source in sources {
                    #expect(source["ipBlock"] == .null, "\(policy.label): an ipBlock source bypasses the ingress")
                    let namespace = source["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"].string
                    if namespace?.contains("ingress") == true { fromIngress = true }
                }
            }
        }
        #expect(fromIngress, "\(target.rawValue): the gateway's NetworkPolicy does not admit the ingress controller")

        // /metrics on its own container port (GATEWAY_METRICS_PORT), which the Service behind the
        // Ingress does not name: the metrics are never public.
        let metricsPort = gateway.container["ports"].list.first { $0["name"].string == "metrics" }
        let environment = try #require(rendering.environment(ofDeployment: "gateway"))
        #expect(
            metricsPort?["containerPort"].int.map(String.init) == environment.value("GATEWAY_METRICS_PORT"),
            "\(target.rawValue): container port metrics is not GATEWAY_METRICS_PORT"
        )
        let service = try #require(rendering.first("Service", "gateway"))
        for port in service.value["spec"]["ports"].list {
            #expect(port["targetPort"].string == "http", "\(service.label): exposes \(port)")
        }
    }
}

// MARK: - What the manifests must describe (test arguments)

extension KubernetesManifestTests {
    /// A worker of the backend: its queues (AstroDomain's JobType, consumed in Sources/<name>/main.swift)
    /// and its least-privilege database role (Sources/Schema/WorkerRole.swift).
    struct Worker: Sendable, CustomTestStringConvertible {
        var name: String
        var queues: [String]
        var role: String
        var passwordVariable: String
        /// Jobs in flight per pod (`PREFETCH`): the worker's default in Sources/<name>/main.swift.
        var prefetch: Int = 16

        var testDescription: String { name }

        static let all: [Worker] = [
            Worker(
                name: "chart-worker",
                queues: ["chart.calculate", "chart.synastry", "chart.transits", "chart.return", "chart.render"],
                role: "astro_chart_worker",
                passwordVariable: "CHART_WORKER_DB_PASSWORD"
            ),
            Worker(
                name: "report-worker",
                queues: ["report.generate"],
                role: "astro_report_worker",
                passwordVariable: "REPORT_WORKER_DB_PASSWORD",
                prefetch: 32
            ),
            Worker(
                name: "billing-worker",
                queues: [
                    "billing.verify-purchase", "report.request", "billing.refund-credit", "billing.store-notification",
                    "billing.send-consumption",
                ],
                role: "astro_billing_worker",
                passwordVariable: "BILLING_WORKER_DB_PASSWORD"
            ),
            Worker(
                name: "story-worker",
                queues: ["story.generate", "story.illustrate", "story.read"],
                role: "astro_story_worker",
                passwordVariable: "STORY_WORKER_DB_PASSWORD",
                prefetch: 32
            ),
        ]
    }

    /// A kustomization that is applied as a whole.
    enum Target: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case base = "deploy/k8s/base"
        case production = "deploy/k8s/overlays/production"

        var testDescription: String { rawValue }

        fileprivate func render() -> Rendering { Kustomize.render(rawValue) }
    }
}

/// kubectl on PATH, if any.
private let kubectlExecutable: URL? = {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
        let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent("kubectl")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
}()

// MARK: - YAML values

/// A YAML node as plain Swift values (Yams' mappings are [AnyHashable: Any]).
private enum Value: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case list([Value])
    case map([String: Value])

    init(yams node: Any?) {
        switch node {
        case .none: self = .null
        case let value as Bool: self = .bool(value)
        case let value as Int: self = .int(value)
        case let value as Double: self = .double(value)
        case let value as String: self = .string(value)
        case let value as [Any]: self = .list(value.map { Value(yams: $0) })
        case let value as [AnyHashable: Any]:
            var map: [String: Value] = [:]
            for (key, item) in value { map[(key.base as? String) ?? "\(key.base)"] = Value(yams: item) }
            self = .map(map)
        case let value?:
            self = value is NSNull ? .null : .string("\(value)")
        }
    }

    /// The value under `key` of a mapping; `.null` when absent or not a mapping.
    subscript(key: String) -> Value {
        if case .map(let map) = self { return map[key] ?? .null }
        return .null
    }

    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var int: Int? {
        if case .int(let value) = self { return value }
        return nil
    }

    var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    var list: [Value] {
        if case .list(let value) = self { return value }
        return []
    }

    var map: [String: Value] {
        if case .map(let value) = self { return value }
        return [:]
    }

    /// A CPU or memory quantity (a number or a string such as 500m, 2, 256Mi).
    var quantity: Double? {
        switch self {
        case .int(let value): Double(value)
        case .double(let value): value
        case .string(let value): parseQuantity(value)
        default: nil
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .int(let value): "\(value)"
        case .double(let value): "\(value)"
        case .string(let value): value.debugDescription
        case .list(let value): "[\(value.map(\.description).joined(separator: ", "))]"
        case .map(let value): "{\(value.keys.sorted().map { "\($0): \(value[$0]!)" }.joined(separator: ", "))}"
        }
    }
}

/// A Kubernetes quantity in base units: "500m" → 0.5, "2" → 2, "256Mi" → 268435456.
private func parseQuantity(_ text: String) -> Double? {
    let suffixes: [(String, Double)] = [
        ("Ki", 1024), ("Mi", 1_048_576), ("Gi", 1_073_741_824), ("Ti", 1_099_511_627_776),
        ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12), ("m", 1e-3),
    ]
    for (suffix, factor) in suffixes where text.hasSuffix(suffix) {
        return Double(text.dropLast(suffix.count)).map { $0 * factor }
    }
    return Double(text)
}

/// The documents of a YAML file under the repository; empty documents are skipped.
private func loadDocuments(relativePath: String) -> [Value] {
    (try? parseDocuments(relativePath: relativePath)) ?? []
}

private func parseDocuments(relativePath: String) throws -> [Value] {
    let url = repositoryRoot.appendingPathComponent(relativePath)
    let text = try String(contentsOf: url, encoding: .utf8)
    var documents: [Value] = []
    for document in try Yams.load_all(yaml: text) {
        let value = Value(yams: document)
        if value != .null { documents.append(value) }
    }
    return documents
}

// MARK: - Rendering (the subset of Kustomize the manifests use)

/// One object of a rendering, with the file it came from.
private struct Resource: Sendable {
    var source: String
    var value: Value

    var apiVersion: String { value["apiVersion"].string ?? "" }
    var kind: String { value["kind"].string ?? "" }
    var name: String { value["metadata"]["name"].string ?? "" }
    var label: String { "\(kind)/\(name) (\(source))" }
    /// The pod template's spec (Deployments, Jobs).
    var pod: Value { value["spec"]["template"]["spec"] }
    /// The first container of the pod template.
    var container: Value { pod["containers"].list.first ?? .null }
}

/// What a kustomization renders to, and what could not be rendered.
private struct Rendering: Sendable {
    var resources: [Resource] = []
    var problems: [String] = []

    func all(_ kind: String) -> [Resource] { resources.filter { $0.kind == kind } }

    func first(_ kind: String, _ name: String) -> Resource? {
        resources.first { $0.kind == kind && $0.name == name }
    }

    /// The environment of the first container of the Deployment `name`.
    func environment(ofDeployment name: String) -> Environment? {
        first("Deployment", name).map { Environment(container: $0.container, rendering: self) }
    }
}

private enum Kustomize {
    /// Kustomization fields this renderer understands; any other would change the output unseen.
    static let supportedFields: Set<String> = ["apiVersion", "kind", "namespace", "resources", "patches", "images"]
    /// Kinds whose lists strategic-merge patches merge by key; custom resources get JSON merge
    /// semantics (lists replaced), as in Kustomize.
    static let builtInKinds: Set<String> = [
        "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "ConfigMap", "Secret", "Service",
        "ServiceAccount", "PodDisruptionBudget", "Namespace",
    ]
    /// Kinds without a namespace, which `namespace:` leaves alone.
    static let clusterScopedKinds: Set<String> = [
        "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume",
        "StorageClass", "PriorityClass", "IngressClass", "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration", "APIService",
    ]
    /// The merge key of each list field strategic merge patches merge rather than replace.
    static let mergeKeys: [String: String] = [
        "containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
        "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
    ]

    static func render(_ directory: String) -> Rendering {
        var rendering = Rendering()
        render(directory: directory, into: &rendering, depth: 0)
        return rendering
    }

    private static func render(directory: String, into rendering: inout Rendering, depth: Int) {
        guard depth < 8 else {
            rendering.problems.append("\(directory): kustomizations nested too deep (a cycle?)")
            return
        }
        let file = "\(directory)/kustomization.yaml"
        let kustomization: Value
        do {
            let documents = try parseDocuments(relativePath: file)
            guard documents.count == 1, case .map = documents[0] else {
                rendering.problems.append("\(file): expected one mapping, found \(documents.count) documents")
                return
            }
            kustomization = documents[0]
        } catch {
            rendering.problems.append("\(file): cannot be read or parsed: \(error)")
            return
        }
        for field in kustomization.map.keys.sorted() where !supportedFields.contains(field) {
            rendering.problems.append("\(file): field \(field) is not supported by this offline check")
        }
        // This kustomization's objects (its sub-kustomizations' included) start here.
        let firstResource = rendering.resources.count
        defer {
            // `namespace:` goes on every namespaced object, replacing any given, as Kustomize does.
            if let namespace = kustomization["namespace"].string {
                for index in firstResource..<rendering.resources.count
                where !clusterScopedKinds.contains(rendering.resources[index].kind) {
                    var metadata = rendering.resources[index].value["metadata"].map
                    metadata["namespace"] = .string(namespace)
                    var object = rendering.resources[index].value.map
                    object["metadata"] = .map(metadata)
                    rendering.resources[index].value = .map(object)
                }
            }
        }

        for entry in kustomization["resources"].list {
            guard let path = entry.string, !path.contains("://") else {
                rendering.problems.append("\(file): resource \(entry) is not a local path")
                continue
            }
            let relative = normalize("\(directory)/\(path)")
            var isDirectory: ObjCBool = false
            let url = repositoryRoot.appendingPathComponent(relative)
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
                rendering.problems.append("\(file): resource \(path) does not exist")
                continue
            }
            if isDirectory.boolValue {
                render(directory: relative, into: &rendering, depth: depth + 1)
                continue
            }
            do {
                for (index, document) in try parseDocuments(relativePath: relative).enumerated() {
                    guard case .map = document else {
                        rendering.problems.append("\(relative) document \(index + 1): not a mapping")
                        continue
                    }
                    rendering.resources.append(Resource(source: "\(relative)#\(index + 1)", value: document))
                }
            } catch {
                rendering.problems.append("\(relative): not valid YAML: \(error)")
            }
        }

        for entry in kustomization["patches"].list {
            guard let path = entry["path"].string, entry["patch"] == .null, entry["target"] == .null else {
                rendering.problems.append("\(file): patch \(entry) must be a strategic-merge file given by path only")
                continue
            }
            let relative = normalize("\(directory)/\(path)")
            let documents = loadDocuments(relativePath: relative)
            guard documents.count == 1, let patch = documents.first else {
                rendering.problems.append("\(relative): a patch file must hold exactly one object")
                continue
            }
            let kind = patch["kind"].string ?? ""
            let name = patch["metadata"]["name"].string ?? ""
            guard let index = rendering.resources.firstIndex(where: { $0.kind == kind && $0.name == name }) else {
                rendering.problems.append("\(relative): patches \(kind)/\(name), which no resource defines")
                continue
            }
            if rendering.resources[index].apiVersion != patch["apiVersion"].string {
                rendering.problems.append("\(relative): apiVersion differs from \(rendering.resources[index].label)")
            }
            rendering.resources[index].value = merge(
                rendering.resources[index].value,
                patch,
                strategic: builtInKinds.contains(kind),
                field: ""
            )
        }

        for entry in kustomization["images"].list {
            guard let name = entry["name"].string else {
                rendering.problems.append("\(file): an images entry without name")
                continue
            }
            var used = false
            for index in rendering.resources.indices {
                let (value, replaced) = replaceImage(rendering.resources[index].value, name: name, with: entry)
                rendering.resources[index].value = value
                used = used || replaced
            }
            if !used { rendering.problems.append("\(file): image \(name) is used by no container") }
        }
    }

    /// `a/b/../c` → `a/c`.
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            if part == "." { continue }
            if part == "..", let last = parts.last, last != ".." {
                parts.removeLast()
            } else {
                parts.append(part)
            }
        }
        return parts.joined(separator: "/")
    }

    /// A strategic-merge patch (built-in kinds) or a JSON merge patch (custom resources).
    static func merge(_ base: Value, _ patch: Value, strategic: Bool, field: String) -> Value {
        switch (base, patch) {
        case (.map(var result), .map(let changes)):
            for (key, change) in changes {
                if change == .null {
                    result[key] = nil
                } else {
                    result[key] = merge(result[key] ?? .null, change, strategic: strategic, field: key)
                }
            }
            return .map(result)
        case (.list(var result), .list(let changes)) where strategic && mergeKeys[field] != nil:
            let key = mergeKeys[field]!
            // The patch's entries come first, in its order (merged with the entry of the same key
            // when there is one), then the other entries in theirs: the order Kustomize (kubectl
            // kustomize, Kustomize v5.5) gives; `kubectlKustomizeAgrees` checks it.
            var patched: [Value] = []
            for change in changes {
                let index = result.firstIndex { $0[key] != .null && $0[key] == change[key] }
                if change["$patch"].string == "delete" {
                    if let index { result.remove(at: index) }
                } else if let index {
                    patched.append(merge(result.remove(at: index), change, strategic: strategic, field: ""))
                } else {
                    patched.append(change)
                }
            }
            return .list(patched + result)
        default:
            return patch
        }
    }

    /// Applies an `images` entry to every container image named `name`.
    static func replaceImage(_ value: Value, name: String, with entry: Value) -> (Value, Bool) {
        switch value {
        case .map(var map):
            var replaced = false
            for (key, item) in map {
                if key == "image", let image = item.string,
                    image == name || image.hasPrefix("\(name):") || image.hasPrefix("\(name)@")
                {
                    let newName = entry["newName"].string ?? name
                    let tag = entry["newTag"].string.map { ":\($0)" } ?? String(image.dropFirst(name.count))
                    map[key] = .string(newName + tag)
                    replaced = true
                } else {
                    let (newItem, found) = replaceImage(item, name: name, with: entry)
                    map[key] = newItem
                    replaced = replaced || found
                }
            }
            return (.map(map), replaced)
        case .list(let items):
            var replaced = false
            let newItems = items.map { item in
                let (newItem, found) = replaceImage(item, name: name, with: entry)
                replaced = replaced || found
                return newItem
            }
            return (.list(newItems), replaced)
        default:
            return (value, false)
        }
    }
}

// MARK: - Checks shared by the tests

/// A Secret's keys and values (stringData over base64-decoded data).
private func secretData(_ secret: Resource) -> [String: String] {
    var result: [String: String] = [:]
    for (key, value) in secret.value["data"].map {
        if let text = value.string, let data = Data(base64Encoded: text) {
            result[key] = String(decoding: data, as: UTF8.self)
        } else {
            result[key] = ""
        }
    }
    for (key, value) in secret.value["stringData"].map { result[key] = value.string ?? "" }
    return result
}

/// A container's environment as the kubelet builds it: envFrom in order, then env.
private struct Environment {
    struct Entry {
        var value: String?
        var secret: (name: String, key: String)?
    }

    var entries: [String: Entry] = [:]

    init(container: Value, rendering: Rendering) {
        for source in container["envFrom"].list {
            let prefix = source["prefix"].string ?? ""
            if let name = source["configMapRef"]["name"].string, let map = rendering.first("ConfigMap", name) {
                for (key, value) in map.value["data"].map { entries[prefix + key] = Entry(value: value.string) }
            }
            if let name = source["secretRef"]["name"].string, let secret = rendering.first("Secret", name) {
                for (key, value) in secretData(secret) {
                    entries[prefix + key] = Entry(value: value, secret: (name, key))
                }
            }
        }
        for variable in container["env"].list {
            guard let name = variable["name"].string else { continue }
            let mapKey = variable["valueFrom"]["configMapKeyRef"]
            let secretKey = variable["valueFrom"]["secretKeyRef"]
            if let mapName = mapKey["name"].string, let key = mapKey["key"].string {
                entries[name] = Entry(value: rendering.first("ConfigMap", mapName)?.value["data"][key].string)
            } else if let secretName = secretKey["name"].string, let key = secretKey["key"].string {
                let value = rendering.first("Secret", secretName).flatMap { secretData($0)[key] }
                entries[name] = Entry(value: value, secret: (secretName, key))
            } else {
                entries[name] = Entry(value: variable["value"].string)
            }
        }
    }

    func value(_ name: String) -> String? { entries[name]?.value }
}

/// Non-root, read-only root filesystem, no privilege escalation, no capabilities, the default
/// seccomp profile, and a writable /tmp.
private func hardeningProblems(pod: Value, container: Value) -> [String] {
    let podContext = pod["securityContext"]
    let context = container["securityContext"]
    func effective(_ key: String) -> Value { context[key] != .null ? context[key] : podContext[key] }
    var problems: [String] = []
    if effective("runAsNonRoot").bool != true { problems.append("runAsNonRoot must be true") }
    if effective("runAsUser").int != imageUser { problems.append("runAsUser must be \(imageUser) (the image's user)") }
    if effective("seccompProfile")["type"].string != "RuntimeDefault" {
        problems.append("seccompProfile must be RuntimeDefault")
    }
    if context["readOnlyRootFilesystem"].bool != true { problems.append("readOnlyRootFilesystem must be true") }
    if context["allowPrivilegeEscalation"].bool != false { problems.append("allowPrivilegeEscalation must be false") }
    if !context["capabilities"]["drop"].list.contains(.string("ALL")) { problems.append("capabilities must drop ALL") }
    if !context["capabilities"]["add"].list.isEmpty { problems.append("capabilities must add none") }
    if context["privileged"].bool == true { problems.append("must not be privileged") }
    let tmp = container["volumeMounts"].list.first { $0["mountPath"].string == "/tmp" }
    let volume = pod["volumes"].list.first { $0["name"] == tmp?["name"] }
    if volume == nil || volume?["emptyDir"] == .null {
        problems.append("/tmp must be an emptyDir volume (the root filesystem is read-only)")
    }
    return problems
}

/// The Secret key mounted at `path` in the container, when it is one.
private func secretFile(at path: String, pod: Value, container: Value, rendering: Rendering) -> (String, String)? {
    for mount in container["volumeMounts"].list {
        guard let mountPath = mount["mountPath"].string, path.hasPrefix(mountPath + "/") else { continue }
        let file = String(path.dropFirst(mountPath.count + 1))
        guard let volume = pod["volumes"].list.first(where: { $0["name"] == mount["name"] }),
            let secretName = volume["secret"]["secretName"].string,
            let secret = rendering.first("Secret", secretName)
        else { continue }
        let items = volume["secret"]["items"].list
        let key =
            items.isEmpty ? file : items.first { $0["path"].string == file }.flatMap { $0["key"].string }
        if let key, secretData(secret)[key] != nil { return (secretName, key) }
    }
    return nil
}

/// A name another object refers to.
private struct Reference {
    var kind: String
    var name: String
    var key: String?
    var optional: Bool
    var place: String
}

/// Every reference to another object by name, wherever it sits in `value`.
private func collectReferences(
    _ value: Value,
    from resource: Resource,
    path: String,
    into references: inout [Reference]
) {
    func add(_ kind: String, _ reference: Value, nameField: String = "name", key: String? = nil, at field: String) {
        guard let name = reference[nameField].string else {
            references.append(
                Reference(kind: kind, name: "", key: nil, optional: false, place: "\(resource.label) \(field)")
            )
            return
        }
        references.append(
            Reference(
                kind: kind,
                name: name,
                key: key,
                optional: reference["optional"].bool == true,
                place: "\(resource.label) \(field)"
            )
        )
    }
    switch value {
    case .map(let map):
        for (field, item) in map {
            let at = path.isEmpty ? field : "\(path).\(field)"
            switch (field, item) {
            case ("configMapRef", .map): add("ConfigMap", item, at: at)
            case ("secretRef", .map): add("Secret", item, at: at)
            case ("configMapKeyRef", .map): add("ConfigMap", item, key: item["key"].string ?? "", at: at)
            case ("secretKeyRef", .map): add("Secret", item, key: item["key"].string ?? "", at: at)
            case ("passwordSecret", .map): add("Secret", item, at: at)
            case ("persistentVolumeClaim", .map):
                add("PersistentVolumeClaim", item, nameField: "claimName", at: at)
            case ("secret", .map):
                // A pod volume (secretName, items) or a projection / CloudNativePG reference (name).
                add("Secret", item, nameField: item["secretName"] != .null ? "secretName" : "name", at: at)
                for entry in item["items"].list {
                    add(
                        "Secret",
                        item,
                        nameField: item["secretName"] != .null ? "secretName" : "name",
                        key: entry["key"].string ?? "",
                        at: at
                    )
                }
            case ("configMap", .map):
                add("ConfigMap", item, at: at)
                for entry in item["items"].list { add("ConfigMap", item, key: entry["key"].string ?? "", at: at) }
            case ("serviceAccountName", .string(let name)):
                references.append(
                    Reference(
                        kind: "ServiceAccount",
                        name: name,
                        key: nil,
                        optional: false,
                        place: "\(resource.label) \(at)"
                    )
                )
            case ("scaleTargetRef", .map):
                add(item["kind"].string ?? "Deployment", item, at: at)
            case ("authenticationRef", .map):
                add(item["kind"].string ?? "TriggerAuthentication", item, at: at)
            case ("secretTargetRef", .list(let targets)):
                for target in targets { add("Secret", target, key: target["key"].string ?? "", at: at) }
            default:
                break
            }
            collectReferences(item, from: resource, path: at, into: &references)
        }
    case .list(let items):
        for (index, item) in items.enumerated() {
            collectReferences(item, from: resource, path: "\(path)[\(index)]", into: &references)
        }
    default:
        break
    }
}

/// The labels of every pod the rendering creates: pod templates, and the pods the operators
/// create for a RabbitmqCluster (app.kubernetes.io/name: <cluster>) and a CloudNativePG Cluster.
private func podLabelSets(_ rendering: Rendering) -> [[String: String]] {
    var sets: [[String: String]] = []
    for resource in rendering.resources {
        let template = resource.value["spec"]["template"]["metadata"]["labels"].map.compactMapValues(\.string)
        if !template.isEmpty { sets.append(template) }
        if resource.kind == "RabbitmqCluster" { sets.append(["app.kubernetes.io/name": resource.name]) }
        if resource.kind == "Cluster" && resource.apiVersion.hasPrefix("postgresql.cnpg.io/") {
            sets.append(["cnpg.io/cluster": resource.name])
        }
    }
    return sets
}

/// Whether `labels` carry every pair of `selector`.
private func matches(_ selector: [String: String], _ labels: [String: String]) -> Bool {
    selector.allSatisfy { labels[$0.key] == $0.value }
}

/// RFC 1123 subdomain: what Kubernetes accepts as most object names.
private func isDNSSubdomain(_ name: String) -> Bool {
    guard !name.isEmpty, name.count <= 253 else { return false }
    let alphanumeric = Set("abcdefghijklmnopqrstuvwxyz0123456789")
    let allowed = alphanumeric.union("-.")
    guard name.allSatisfy({ allowed.contains($0) }) else { return false }
    return alphanumeric.contains(name.first!) && alphanumeric.contains(name.last!)
}

/// Values Kubernetes (or KEDA) only accepts as strings: a bare `8080` or `false` is refused.
private func stringTypingProblems(_ resource: Resource) -> [String] {
    var problems: [String] = []
    func requireStrings(_ map: [String: Value], _ what: String) {
        for (key, value) in map where value.string == nil {
            problems.append("\(resource.label): \(what).\(key) is \(value), not a string")
        }
    }
    requireStrings(resource.value["metadata"]["labels"].map, "metadata.labels")
    requireStrings(resource.value["metadata"]["annotations"].map, "metadata.annotations")
    switch resource.kind {
    case "ConfigMap": requireStrings(resource.value["data"].map, "data")
    case "Secret":
        requireStrings(resource.value["stringData"].map, "stringData")
        requireStrings(resource.value["data"].map, "data")
    case "ScaledObject":
        for (index, trigger) in resource.value["spec"]["triggers"].list.enumerated() {
            requireStrings(trigger["metadata"].map, "spec.triggers[\(index)].metadata")
        }
    default:
        break
    }
    let template = resource.value["spec"]["template"]
    requireStrings(template["metadata"]["labels"].map, "spec.template.metadata.labels")
    requireStrings(template["metadata"]["annotations"].map, "spec.template.metadata.annotations")
    for container in template["spec"]["containers"].list {
        for variable in container["env"].list where variable["valueFrom"] == .null && variable["value"].string == nil {
            problems.append("\(resource.label): env \(variable["name"]) value is \(variable["value"]), not a string")
        }
    }
    return problems
}

// MARK: - The maintenance CronJob (issue 17)

extension KubernetesManifestTests {
    @Test(
        "maintenance CronJob: hourly, one at a time, hardened, as astro_maintenance, settings in bounds",
        arguments: Target.allCases
    )
    func maintenanceCronJob(target: Target) throws {
        let rendering = target.render()
        let cronJob = try #require(
            rendering.first("CronJob", "astro-maintenance"),
            "\(target.rawValue): no CronJob astro-maintenance"
        )
        let place = cronJob.label
        let spec = cronJob.value["spec"]
        #expect(spec["concurrencyPolicy"].string == "Forbid", "\(place): two runs must never overlap")
        #expect((spec["schedule"].string ?? "").split(separator: " ").count == 5, "\(place): schedule")
        let job = spec["jobTemplate"]["spec"]
        let pod = job["template"]["spec"]
        let container = pod["containers"].list.first ?? .null
        #expect(container["command"].list.compactMap(\.string) == ["/app/maintenance"], "\(place): command")
        #expect(pod["restartPolicy"].string == "Never", "\(place): restartPolicy")
        let problems = hardeningProblems(pod: pod, container: container)
        #expect(problems.isEmpty, "\(place): \(problems)")

        let env = Environment(container: container, rendering: rendering)
        // Its own role, from its own Secret; never the owner's.
        let database = try #require(
            env.entries["DATABASE_URL"]?.secret,
            "\(place): DATABASE_URL must come from a Secret"
        )
        #expect(database.name == "astro-db-maintenance", "\(place): DATABASE_URL from \(database.name)")
        #expect(
            URLComponents(string: env.value("DATABASE_URL") ?? "")?.user == "astro_maintenance",
            "\(place): DATABASE_URL must connect as astro_maintenance"
        )
        #expect(env.entries["AMQP_URL"]?.secret != nil, "\(place): AMQP_URL must come from a Secret")
        // Its own broker user (BrokerAccess.maintenance), never the administrator's astro-amqp.
        #expect(env.entries["AMQP_URL"]?.secret?.name == "astro-amqp-maintenance", "\(place): AMQP_URL's Secret")
        #expect(URLComponents(string: env.value("AMQP_URL") ?? "")?.user == "maintenance", "\(place): AMQP_URL user")

        // The settings parse as the task reads them, within its bounds; the job's deadline is
        // above the task's own time budget, so the task stops itself first.
        func seconds(_ text: String?) -> Int? {
            guard let text, let unit = text.last, let number = Int(text.dropLast()) else { return nil }
            return ["s": 1, "m": 60, "h": 3600, "d": 86_400][unit].map { number * $0 }
        }
        let jobRetention = try #require(seconds(env.value("JOB_RETENTION")), "\(place): JOB_RETENTION")
        let deadLetterAge = try #require(seconds(env.value("DEAD_LETTER_MAX_AGE")), "\(place): DEAD_LETTER_MAX_AGE")
        let budget = try #require(seconds(env.value("RETENTION_MAX_DURATION")), "\(place): RETENTION_MAX_DURATION")
        #expect((3600...31_536_000).contains(jobRetention), "\(place): JOB_RETENTION out of bounds")
        #expect(deadLetterAge <= jobRetention, "\(place): a dead job's row must outlive its dead letter")
        #expect(seconds(env.value("OUTBOX_RETENTION")).map { (60...31_536_000).contains($0) } == true)
        #expect(Int(env.value("RETENTION_BATCH_SIZE") ?? "").map { (10...10_000).contains($0) } == true)
        #expect(Int(env.value("DEAD_LETTER_MAX_LENGTH") ?? "").map { (1...1_000_000).contains($0) } == true)
        #expect((job["activeDeadlineSeconds"].int ?? 0) > budget, "\(place): activeDeadlineSeconds under the budget")

        // The migrate Job lets the role log in, unless CloudNativePG manages it (production).
        let migrate = try #require(rendering.all("Job").first, "\(target.rawValue): no migrate Job")
        let migrateEnv = Environment(container: migrate.container, rendering: rendering)
        let managed = rendering.all("Cluster").contains { cluster in
            cluster.value["spec"]["managed"]["roles"].list.contains { $0["name"].string == "astro_maintenance" }
        }
        #expect(
            managed != (migrateEnv.entries["MAINTENANCE_DB_PASSWORD"]?.secret?.name == "astro-db-maintenance"),
            "\(target.rawValue): exactly one of the migrate Job and CloudNativePG sets astro_maintenance's password"
        )
    }
}

// MARK: - astroctl's operator role (issue 17)

extension KubernetesManifestTests {
    /// astro_operator (migration 0020) logs in with the password of its own Secret: set by the
    /// migrate Job, or by CloudNativePG's managed roles in production, never by both or neither.
    @Test(
        "astro_operator: its Secret, and exactly one of the migrate Job and CloudNativePG sets its password",
        arguments: Target.allCases
    )
    func operatorRolePassword(target: Target) throws {
        let rendering = target.render()
        let secret = try #require(
            rendering.first("Secret", "astro-db-operator"),
            "\(target.rawValue): no Secret astro-db-operator"
        )
        #expect(secret.value["stringData"]["username"].string == "astro_operator")
        #expect(secret.value["stringData"]["password"].string != nil, "\(target.rawValue): no password key")
        #expect(
            URLComponents(string: secret.value["stringData"]["DATABASE_URL"].string ?? "")?.user == "astro_operator",
            "\(target.rawValue): DATABASE_URL is not astro_operator's"
        )
        let migrate = try #require(rendering.all("Job").first, "\(target.rawValue): no migrate Job")
        let migrateEnv = Environment(container: migrate.container, rendering: rendering)
        let managed = rendering.all("Cluster").contains { cluster in
            cluster.value["spec"]["managed"]["roles"].list.contains {
                $0["name"].string == "astro_operator" && $0["passwordSecret"]["name"].string == "astro-db-operator"
            }
        }
        let entry = migrateEnv.entries["OPERATOR_DB_PASSWORD"]
        #expect(
            managed != (entry?.secret?.name == "astro-db-operator" && entry?.secret?.key == "password"),
            "\(target.rawValue): exactly one of the migrate Job and CloudNativePG sets astro_operator's password"
        )
    }
}

// MARK: - Backups age out (issue 19)

extension KubernetesManifestTests {
    /// A deleted user's data must leave the backups: production's database backs up with a
    /// retention policy of at most 30 days (the promise in README.md, "Backups and deleted data"),
    /// a daily base backup of that cluster, and credentials that exist.
    @Test("production PostgreSQL backups are kept at most 30 days")
    func backupsAgeOut() throws {
        let production = Target.production.render()
        let cluster = try #require(
            production.all("Cluster").first { $0.apiVersion == "postgresql.cnpg.io/v1" },
            "production: no CloudNativePG Cluster"
        )
        let backup = cluster.value["spec"]["backup"]
        let policy = try #require(backup["retentionPolicy"].string, "\(cluster.label): no spec.backup.retentionPolicy")
        let days = policy.hasSuffix("d") ? Int(policy.dropLast()) : nil
        let weeks = policy.hasSuffix("w") ? Int(policy.dropLast()).map { $0 * 7 } : nil
        let total = try #require(days ?? weeks, "\(cluster.label): retentionPolicy \(policy) is not in days or weeks")
        #expect((1...30).contains(total), "\(cluster.label): backups kept \(policy), more than 30 days")
        let store = backup["barmanObjectStore"]
        #expect(!(store["destinationPath"].string ?? "").isEmpty, "\(cluster.label): no backup destination")
        for key in ["accessKeyId", "secretAccessKey"] {
            let name = store["s3Credentials"][key]["name"].string ?? ""
            #expect(
                production.first("Secret", name) != nil,
                "\(cluster.label): backup credential \(name) is not defined"
            )
        }
        let scheduled = production.all("ScheduledBackup").filter { $0.apiVersion == "postgresql.cnpg.io/v1" }
        #expect(
            scheduled.contains { $0.value["spec"]["cluster"]["name"].string == cluster.name },
            "production: no ScheduledBackup of \(cluster.name)"
        )
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("retentionPolicy: \"\(policy)\""), "README.md does not state the backups' retention")
    }
}
