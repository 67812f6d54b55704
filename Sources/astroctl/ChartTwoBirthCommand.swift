import ArgumentParser
import AstroCLISupport
import Foundation

/// `astroctl chart synastry|composite|davison|compatibility` (issue 20's names): the two-birth
/// command `Inner` (also `astroctl pair …`) under `astroctl chart`.
///
/// The parser reads `chart`'s own flags wherever they stand, also after the subcommand's name, so
/// `--json` and `--dst-policy` (which both commands have) reach `chart`, not `Inner`: they are
/// handed on here. `chart`'s other flags describe one birth and mean nothing to two: given,
/// they are refused (exit status 2) rather than silently ignored.
struct ChartTwoBirthCommand<Inner: TwoBirthCommand>: AsyncParsableCommand {
    static var configuration: CommandConfiguration { Inner.configuration }

    @ParentCommand var chart: ChartCommand
    @OptionGroup var inner: Inner

    func run() async throws {
        let name = Inner.configuration.commandName ?? "?"
        if let flag = chart.oneBirthFlags.first {
            FileHandle.standardError.write(
                Data(
                    "astroctl chart: \(flag): not a flag of `chart \(name)`, which takes two births as --a-… and --b-…\n"
                        .utf8
                )
            )
            Foundation.exit(2)
        }
        var command = inner
        if chart.json { command.births.json = true }
        if let policy = chart.dstPolicy { command.births.dstPolicy = policy }
        try await TwoBirthOptions.$invokedAs.withValue("astroctl chart") { try await command.run() }
    }
}

extension ChartCommand {
    /// The flags given that describe one birth or its wheel or job (none of them has a meaning
    /// for two births), in the order of `astroctl chart --help`. A flag given with its default
    /// value cannot be told from one not given, and is not listed.
    var oneBirthFlags: [String] {
        let given: [(String, Bool)] = [
            ("--date", date != nil), ("--time", time != nil), ("--tz", timezone != nil), ("--lat", latitude != nil),
            ("--lon", longitude != nil), ("--name", name != "Chart"), ("--location", !location.isEmpty),
            ("--house-system", houseSystem != "placidus"), ("--points", points != nil),
            ("--sidereal", sidereal != nil), ("--svg", svg != nil), ("--theme", theme != "light"),
            ("--transits-at", transitsAt != nil), ("--outer-date", outerDate != nil),
            ("--outer-time", outerTime != nil),
            ("--outer-tz", outerTz != nil), ("--outer-lat", outerLat != nil), ("--outer-lon", outerLon != nil),
            ("--outer-name", outerName != "Partner"), ("--publish", publish), ("--user", user != nil),
            ("--profile", profile != nil), ("--wait", wait), ("--timeout", timeout != 60),
        ]
        return given.filter(\.1).map(\.0)
    }
}
