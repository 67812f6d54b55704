import ArgumentParser
import Foundation

extension AsyncParsableCommand {
    /// Parses the command line and runs the command it names, as `main()` does, except that a
    /// usage error (unknown option, a value the option does not take or out of its range) exits
    /// with status 2, like every other invalid input of the tools, instead of the argument
    /// parser's 64.
    public static func mainExitingTwoOnUsageError() async {
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
