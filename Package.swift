// swift-tools-version: 6.1
import PackageDescription

// Every target builds in the Swift 6 language mode (the default for tools version 6) with
// complete concurrency checking; CI adds -warnings-as-errors.
let package = Package(
    name: "astrosvitla-backend",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "chart-worker", targets: ["chart-worker"]),
        .executable(name: "report-worker", targets: ["report-worker"]),
        .executable(name: "billing-worker", targets: ["billing-worker"]),
        .executable(name: "story-worker", targets: ["story-worker"]),
        .executable(name: "astroctl", targets: ["astroctl"]),
        .executable(name: "astro-bench", targets: ["astro-bench"]),
        .executable(name: "amqp-raw-bench", targets: ["amqp-raw-bench"]),
        .executable(name: "sample-worker", targets: ["sample-worker"]),
        .executable(name: "gateway", targets: ["gateway"]),
        .executable(name: "maintenance", targets: ["maintenance"]),
        .library(name: "AMQP", targets: ["AMQP"]),
        .library(name: "Postgres", targets: ["Postgres"]),
        .library(name: "AstroDomain", targets: ["AstroDomain"]),
        .library(name: "Ephemeris", targets: ["Ephemeris"]),
        .library(name: "WorkerRuntime", targets: ["WorkerRuntime"]),
        .library(name: "WorkerRuntimeTestKit", targets: ["WorkerRuntimeTestKit"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.3.0"),
        // The gateway's HTTP server.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.0.0"),
        // The gateway's peer-address channel handler and its file reads on NIO's thread pool (already
        // in the graph through Hummingbird).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.34.1"),
        // Tests only: reading docker-compose.yml, the Kubernetes manifests and openapi.yaml.
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.0.0"),
        // Tracing's API (Tracer, ServiceContext); already in the graph through Hummingbird.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.1.0"),
        // Tests only: the runtime of the client generated from openapi.yaml (scripts/generate-openapi.sh).
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.0"),
    ],
    targets: [
        // C libraries, through pkg-config, with the Debian package that provides each.
        .systemLibrary(name: "CRabbitMQ", pkgConfig: "librabbitmq", providers: [.apt(["librabbitmq-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CSwissEph", pkgConfig: "swe", providers: [.apt(["libswe-dev"])]),

        // One safe wrapper per C library; the only importers of the C modules.
        .target(
            name: "AMQP",
            dependencies: ["CRabbitMQ", "RetryBackoff", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "Postgres",
            dependencies: ["CLibPQ", "CivilCalendar", "UUIDText", .product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "Ephemeris", dependencies: ["CSwissEph", "CivilCalendar"]),
        // BirthData → NatalChart.
        .target(
            name: "ChartEngine",
            dependencies: ["AstroDomain", "Ephemeris", "ZoneInfo", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The chart wheel as SVG (single and bi-wheel): pure drawing from AstroDomain's chart model.
        .target(name: "ChartWheel", dependencies: ["AstroDomain"]),
        // TZif files of the system time zone database (/usr/share/zoneinfo) as AstroDomain's TimeZoneRules.
        .target(name: "ZoneInfo", dependencies: ["AstroDomain", "CivilCalendar"]),
        // Schema v1 and later migrations, numbered SQL files shipped as resources.
        .target(name: "Schema", dependencies: ["Postgres"], resources: [.copy("Migrations")]),

        // The domain model: Foundation only, no I/O.
        .target(name: "AstroDomain", dependencies: ["UUIDText", "CivilCalendar"]),
        // The proleptic Gregorian calendar on days since 1970 (H. Hinnant's arithmetic): the one copy.
        .target(name: "CivilCalendar"),
        // UUIDs to and from their canonical text without Foundation's sprintf/sscanf (hot paths).
        .target(name: "UUIDText"),
        // The one retry schedule: capped exponential backoff with jitter, and attempts (HTTP
        // clients, AMQP reconnects, job retries, start-up waits).
        .target(name: "RetryBackoff"),

        // W3C Trace Context: traceparent/tracestate parsed strictly and written, no I/O.
        .target(name: "TraceContext"),
        // A swift-distributed-tracing Tracer that exports spans over OTLP/HTTP with the JSON
        // encoding (batched, bounded, never blocking); our own instead of swift-otel, which costs
        // ~7 minutes of build and brings gRPC.
        .target(
            name: "OTLPTracing",
            dependencies: [
                "AstroDomain", "TraceContext", "HTTPTransport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),

        // The consume loop, retries, dead letters, outbox, health and metrics every worker shares.
        .target(
            name: "WorkerRuntime",
            dependencies: [
                "AMQP", "Postgres", "Schema", "AstroDomain", "UUIDText", "TraceContext", "OTLPTracing", "RetryBackoff",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),

        // In-memory job store, publisher, consumer and acknowledger: the runtime's processor, group
        // commit, outbox relay and consumer service run against them without servers.
        // Test support: the processes a test starts (own process group, parent-death signal, output
        // to files, the run's mark), ended with the test; named waits. Platform only.
        .target(name: "TestProcesses"),
        .target(
            name: "WorkerRuntimeTestKit",
            dependencies: [
                "WorkerRuntime", "AMQP", "AstroDomain", "UUIDText", .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The chart-worker's job: validate, compute, store profile and chart.
        .target(
            name: "ChartService",
            dependencies: [
                "ChartEngine", "Ephemeris", "AstroDomain", "Postgres", "WorkerRuntime", "UUIDText", "ChartWheel",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),

        // The one compact JWS codec (split, strict base64url, ES256 sign and verify) and the one
        // base64url: access tokens, the App Store's bearer token and signed data, cursors. Our own
        // rather than vapor/jwt-kit (ARCHITECTURE.md, "JOSE").
        .target(name: "JOSE", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // StoreKit 2 signed data (JWS with an x5c chain) verified the way Apple's App Store Server
        // Library does it, plus a development PKI and signer for tests and demos.
        .target(
            name: "StoreKitVerification",
            dependencies: [
                "JOSE",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            resources: [.copy("Resources")]
        ),
        // App Attest: a strict bounded CBOR decoder, attestation and assertion verification to
        // Apple's App Attestation root (shipped), and a development authority for tests.
        .target(
            name: "AppAttest",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            resources: [.copy("Resources")]
        ),
        // A small HTTP/1.1 server on loopback, for the local fakes of outside services.
        .target(name: "LoopbackHTTP"),
        // Client of the App Store Server API (transaction look-up), authenticated with an ES256 JWT.
        .target(
            name: "AppStoreServerAPI",
            dependencies: ["HTTPTransport", "JOSE", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // A local fake of the App Store Server API that behaves like Apple's, errors included.
        .target(
            name: "AppStoreServerFake",
            dependencies: ["LoopbackHTTP", "JOSE", "UUIDText", .product(name: "Crypto", package: "swift-crypto")]
        ),
        // The billing-worker's jobs: product catalog, purchase verification, the credit ledger.
        .target(
            name: "Billing",
            dependencies: [
                "StoreKitVerification", "AppStoreServerAPI", "AstroDomain", "Postgres", "WorkerRuntime", "ByteCodecs",
                "UUIDText",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),

        // Reports: the expert-rules knowledge base (en, uk) shipped as data.
        .target(
            name: "Reports",
            dependencies: ["AstroDomain", "LLMClient"],
            resources: [.copy("Resources/KnowledgeBase")]
        ),
        // Magical Stories: the story knowledge base (en, uk) shipped as data, and the built-in writer.
        .target(
            name: "Stories",
            dependencies: ["AstroDomain", "Reports", "LLMClient", "UUIDText"],
            resources: [.copy("Resources/StoryKnowledgeBase")]
        ),
        // Pictures for story pages: the built-in illustrator (SVG, or PNG through its own small
        // rasterizer) and an OpenAI-compatible images API.
        .target(
            name: "StoryIllustration",
            dependencies: ["Stories", "AstroDomain", "LLMClient", "ByteCodecs"],
            resources: [.copy("Resources/Illustration")],
            // The rasterizer's pixel loops are 20-30 times slower unoptimized: optimized in debug
            // builds too (a page in ~30 ms rather than ~500 ms, for tests and local runs).
            swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]
        ),
        // The story-worker's jobs: write and store stories, illustrate pages, record readings.
        .target(
            name: "StoryService",
            dependencies: [
                "Stories", "StoryIllustration", "Reports", "AstroDomain", "Postgres", "WorkerRuntime", "UUIDText",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // OpenAI-compatible chat completions client (URLSession), and a local fake of such an endpoint.
        .target(name: "LLMClient", dependencies: ["HTTPTransport", "RetryBackoff"]),
        // URLSession with exact per-attempt timeouts: shared by the App Store and LLM clients.
        .target(name: "HTTPTransport", dependencies: ["RetryBackoff"]),
        .target(name: "LLMFake", dependencies: ["LLMClient", "LoopbackHTTP", "ByteCodecs"]),
        // CRC-32, Adler-32, zlib/deflate and PNG writing, with no library: ZIP exports, PNG pages.
        // Optimized in debug builds too, as StoryIllustration: its byte loops are the slow part.
        .target(name: "ByteCodecs", swiftSettings: [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        // The report-worker's job: load the chart, write the report, store it (or refund the credit).
        .target(
            name: "ReportService",
            dependencies: ["Reports", "AstroDomain", "ChartEngine", "Postgres", "WorkerRuntime"]
        ),

        // Executables: wiring and configuration only.
        .executableTarget(
            name: "chart-worker",
            dependencies: ["WorkerRuntime", "ChartService", "ChartEngine", "Ephemeris"]
        ),
        .executableTarget(name: "report-worker", dependencies: ["WorkerRuntime", "ReportService", "Reports"]),
        .executableTarget(
            name: "story-worker",
            dependencies: ["WorkerRuntime", "StoryService", "Stories", "StoryIllustration", "Reports", "LLMClient"]
        ),
        .executableTarget(
            name: "billing-worker",
            dependencies: ["WorkerRuntime", "Billing", "StoreKitVerification", "AppStoreServerAPI"]
        ),
        // What both command-line tools share: connection options, errors, the exit status of usage errors.
        .target(
            name: "AstroCLISupport",
            dependencies: [
                "AMQP", "Postgres", "WorkerRuntime", "JOSE",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The operator's tool: schema, jobs, queues, charts, billing, reports, stories, broker access.
        .executableTarget(
            name: "astroctl",
            dependencies: [
                "AstroCLISupport", "WorkerRuntime", "AMQP", "Postgres", "Schema", "AstroDomain", "ChartEngine",
                "Ephemeris", "Billing", "StoreKitVerification", "Reports", "Stories", "StoryService", "Maintenance",
                "AppStoreServerAPI", "ChartWheel", "UUIDText",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The load benchmarks: they start workers, seed the ledger with raw SQL and fake the LLM and
        // images endpoints, none of which belongs in the operator's tool.
        .executableTarget(
            name: "astro-bench",
            dependencies: [
                "AstroCLISupport", "WorkerRuntime", "AMQP", "Postgres", "Schema", "AstroDomain", "ChartEngine",
                "Ephemeris", "Billing", "StoreKitVerification", "Reports", "LLMClient", "LLMFake", "StoryService",
                "ChartWheel", "RetryBackoff", "UUIDText",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The public HTTP API: identity (ES256 tokens), profiles → chart.calculate, jobs.
        .target(
            name: "Gateway",
            dependencies: [
                "AMQP", "Postgres", "AstroDomain", "WorkerRuntime", "AppAttest", "TraceContext", "OTLPTracing",
                "ChartWheel", "StoreKitVerification", "ZoneInfo", "JOSE", "UUIDText",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            ],
            // openapi.yaml (the repository root's openapi.yaml links to it), served at /openapi.yaml.
            resources: [.copy("Resources/openapi.yaml")]
        ),
        .executableTarget(name: "gateway", dependencies: ["Gateway"]),
        // Bounded growth (issue 17): retention of finished jobs and sent outbox rows, and the
        // dead-letter queues' bounds; a run-once task for cron or a CronJob.
        .target(
            name: "Maintenance",
            dependencies: [
                "AMQP", "Postgres", "AstroDomain", "WorkerRuntime", "UUIDText",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "maintenance", dependencies: ["Maintenance"]),
        // A synthetic job on the real runtime, for integration tests and trying the runtime out.
        .target(name: "SampleJobs", dependencies: ["WorkerRuntime", "Postgres", "AstroDomain"]),
        .executableTarget(name: "sample-worker", dependencies: ["SampleJobs", "WorkerRuntime", "Postgres"]),
        // The raw librabbitmq benchmark that `astro-bench amqp` compares the Swift wrapper with.
        .executableTarget(name: "amqp-raw-bench", dependencies: ["CRabbitMQ"]),
        // Fuzzing (Fuzz/README.md): one entry function per target, callable from the libFuzzer driver and from
        // tests; the driver replays files in an ordinary build and fuzzes when built by scripts/fuzz.sh.
        .target(
            name: "FuzzTargets",
            dependencies: [
                "AMQP", "CRabbitMQ", "Postgres", "AstroDomain", "WorkerRuntime", "StoreKitVerification", "AppAttest",
                "JOSE",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .executableTarget(name: "astro-fuzz", dependencies: ["FuzzTargets"]),

        // Unit tests: no servers.
        .testTarget(name: "AMQPTests", dependencies: ["AMQP"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres"]),
        .testTarget(name: "AstroDomainTests", dependencies: ["AstroDomain"]),
        .testTarget(name: "UUIDTextTests", dependencies: ["UUIDText"]),
        .testTarget(name: "CivilCalendarTests", dependencies: ["CivilCalendar"]),
        .testTarget(name: "RetryBackoffTests", dependencies: ["RetryBackoff"]),
        .testTarget(name: "JOSETests", dependencies: ["JOSE", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "ByteCodecsTests", dependencies: ["ByteCodecs", "TestProcesses"]),
        .testTarget(name: "ZoneInfoTests", dependencies: ["ZoneInfo", "AstroDomain"]),
        .testTarget(name: "EphemerisTests", dependencies: ["Ephemeris"], resources: [.copy("Fixtures")]),
        .testTarget(
            name: "ChartEngineTests",
            dependencies: ["ChartEngine", "Ephemeris", "AstroDomain"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(name: "ChartWheelTests", dependencies: ["ChartWheel", "ChartEngine", "Ephemeris", "AstroDomain"]),
        .testTarget(
            name: "WorkerRuntimeTests",
            dependencies: [
                "WorkerRuntime", "WorkerRuntimeTestKit", "AMQP", "Postgres", "AstroDomain", "TraceContext",
                "RetryBackoff",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "StoreKitVerificationTests",
            dependencies: ["StoreKitVerification", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "AppStoreServerAPITests",
            dependencies: [
                "AppStoreServerAPI", "AppStoreServerFake", "LoopbackHTTP",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: [
                "Gateway", "AstroDomain", "WorkerRuntime", "AppAttest", "StoreKitVerification", "JOSE",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "Yams", package: "Yams"),
                // RouteRegistrationTests builds the router (its pool and publisher never connect).
                "AMQP", "Postgres", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "BillingTests",
            dependencies: ["Billing", "StoreKitVerification", "AstroDomain", "AppStoreServerAPI", "TestProcesses"]
        ),
        // The operator commands' parsing, redaction and formatting (astroctl dead, job cancel).
        .testTarget(name: "AstroCLISupportTests", dependencies: ["AstroCLISupport", "AMQP"]),
        .testTarget(
            name: "AppAttestTests",
            dependencies: [
                "AppAttest", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
            ]
        ),
        // Offline checks of docker-compose.yml and deploy/k8s (no Docker or cluster needed).
        .testTarget(
            name: "DeployTests",
            dependencies: ["AstroDomain", "TestProcesses", .product(name: "Yams", package: "Yams")]
        ),
        .testTarget(name: "StoriesTests", dependencies: ["Stories", "AstroDomain", "Reports", "LLMClient", "LLMFake"]),
        .testTarget(
            name: "StoryIllustrationTests",
            dependencies: [
                "StoryIllustration", "Stories", "AstroDomain", "LLMClient", "LLMFake", "LoopbackHTTP", "ByteCodecs",
                "TestProcesses",
            ]
        ),
        .testTarget(name: "LLMClientTests", dependencies: ["LLMClient", "LLMFake", "LoopbackHTTP"]),
        .testTarget(
            name: "ReportsTests",
            dependencies: ["Reports", "AstroDomain", "ChartEngine"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "TracingTests",
            dependencies: [
                "TraceContext", "OTLPTracing", "LoopbackHTTP",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Replays every committed fuzzing corpus file (Fuzz/corpus) through its target.
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"]),
        .testTarget(name: "MaintenanceTests", dependencies: ["Maintenance", "AMQP", "AstroDomain"]),
        // The built astroctl binary run as a process, offline (its chart commands); no servers.
        .testTarget(name: "TestProcessesTests", dependencies: ["TestProcesses"]),
        .testTarget(name: "AstroctlTests", dependencies: ["ChartEngine", "Ephemeris", "AstroDomain", "TestProcesses"]),
        // Integration tests: a real RabbitMQ and PostgreSQL started by scripts/stack.sh.
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "AMQP", "Postgres", "Schema", "WorkerRuntime", "AstroDomain", "SampleJobs", "ChartService",
                "ChartEngine", "Ephemeris", "Billing", "StoreKitVerification", "AppStoreServerAPI",
                "AppStoreServerFake", "Reports", "ReportService", "LLMClient", "LLMFake", "Stories",
                "StoryIllustration", "StoryService", "Gateway", "AppAttest", "LoopbackHTTP", "TraceContext",
                "Maintenance", "TestProcesses",
                .product(name: "Crypto", package: "swift-crypto"), .product(name: "Yams", package: "Yams"),
                // The gateway's routes driven in process (GatewayRoute*Tests).
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                // The client generated from openapi.yaml (GatewayAPIClient/, GatewayGeneratedClientTests).
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
    ]
)
