import ArgumentParser
import Foundation

/// `astroctl`: the operator's and developer's tool for the AstroSvitla backend.
@main
struct AstroCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "astroctl",
        abstract: "Operate the AstroSvitla backend: schema, jobs, queues, benchmarks.",
        discussion: """
            Connection settings come from the environment, like the workers' (AMQP_URL, DATABASE_URL),
            or from --amqp-url / --database-url. Start a local stack with scripts/stack.sh.

            Examples:
              astroctl migrate                               apply the schema and declare the topology
              echo '{"userId":"…","profile":{…}}' | astroctl publish chart.calculate
              astroctl job 9b2f…                            what became of a job
              astroctl queues                                depth and consumers of every queue
              astroctl bench amqp --count 20000              broker throughput, Swift vs raw C
            """,
        subcommands: [
            Migrate.self, Publish.self, JobStatusCommand.self, Queues.self, ChartCommand.self, BillingCommand.self,
            ReportCommand.self, StoriesCommand.self, BrokerCommand.self,
            Bench.self,
        ]
    )

    /// Runs the command; a usage error (unknown option, a value the option does not take or out
    /// of its range) exits with status 2, like every other invalid input of astroctl, instead of
    /// the argument parser's 64.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            let message = fullMessage(for: error)
            if !message.isEmpty {
                FileHandle.standardError.write(Data((message + "\n").utf8))
            }
            Foundation.exit(code == .validationFailure ? 2 : code.rawValue)
        }
    }
}
