import ArgumentParser
import AstroCLISupport
import Foundation

/// `astroctl`: the operator's and developer's tool for the AstroSvitla backend.
@main
struct AstroCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "astroctl",
        abstract: "Operate the AstroSvitla backend: schema, jobs, queues, charts, billing, reports, stories.",
        discussion: """
            Connection settings come from the environment, like the workers' (AMQP_URL, \
            DATABASE_URL), or from --amqp-url / --database-url. Start a local stack with \
            scripts/stack.sh. The load benchmarks are a program of their own, \
            astro-bench.

            Examples:
              astroctl migrate        apply the schema and declare the topology
              echo '{"userId":"…","profile":{…}}' | astroctl publish chart.calculate
              astroctl job 9b2f…      what became of a job
              astroctl queues         depth and consumers of every queue
              astroctl dead list      dead letters: why, when, whose (then show, replay, purge)
              astroctl job cancel 9b2f…   cancel a job not yet started
            """,
        subcommands: [
            Migrate.self, Publish.self, JobCommand.self, Queues.self, ChartCommand.self, BillingCommand.self,
            ReportCommand.self, StoriesCommand.self, BrokerCommand.self, DeadCommand.self,
            RetentionCommand.self, UserCommand.self,
            PairCommand.self,
            ChartResultsCommand.self,
        ]
    )

    /// Runs the command; a usage error exits with status 2, like every other invalid input.
    static func main() async { await mainExitingTwoOnUsageError() }
}
