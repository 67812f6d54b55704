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
        subcommands: [
            BenchAMQP.self, BenchPostgres.self, BenchE2E.self, BenchChart.self, BenchVerify.self, BenchStories.self,
        ]
    )

    /// Runs the command; a usage error exits with status 2, like astroctl's.
    static func main() async { await mainExitingTwoOnUsageError() }
}
