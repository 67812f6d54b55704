import ArgumentParser
import AstroCLISupport

/// `astro-bench`: the load benchmarks of the AstroSvitla backend, apart from the operator's
/// astroctl so that the tool an operator runs against production links none of what only the
/// benchmarks need (the fake LLM endpoints, ledger seeding with raw SQL).
@main
struct AstroBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "astro-bench",
        abstract: "Measure throughput against the running servers and print the figures.",
        discussion: """
            Connection settings come from the environment (AMQP_URL, DATABASE_URL) or \
            from --amqp-url / --database-url, as for astroctl; the end-to-end benchmarks \
            start the workers built beside astro-bench. Start a local stack with \
            scripts/stack.sh, and build with -c release for figures worth comparing.

            Examples:
              astro-bench amqp --count 20000      broker throughput, Swift vs raw C
              astro-bench e2e --type chart --count 20000 --workers 1 --workers 2
            """,
        subcommands: [
            BenchAMQP.self, BenchPostgres.self, BenchE2E.self, BenchChart.self, BenchVerify.self, BenchStories.self,
            BenchWheel.self,
            BenchTransits.self,
            BenchSynastry.self,
        ]
    )

    /// Runs the command; a usage error exits with status 2, like astroctl's.
    static func main() async { await mainExitingTwoOnUsageError() }
}
