import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import TestProcesses
import Testing

/// The built `astroctl` binary run as a process, offline (no servers): `astroctl chart
/// synastry|composite|davison|compatibility` (issue 20's names), `astroctl pair …` as their alias,
/// refusals, and the natal `astroctl chart` checked against the library's own computation.
@Suite(.timeLimit(.minutes(2)))
struct AstroctlChartCommandTests {
    /// Runs the `astroctl` built beside this test bundle (`swift build --build-tests` builds it),
    /// as a `ChildProcess`: ended with the test, at most 60 s.
    static func astroctl(_ arguments: [String]) async throws -> ProcessRunner.Result {
        try await ProcessRunner.run(ProcessRunner.productPath("astroctl"), arguments, timeout: .seconds(60))
    }

    static let kyiv = BirthData(
        name: "A",
        birthDate: "1990-10-07",
        birthTime: "15:00",
        timezone: "Europe/Kyiv",
        latitude: 50.4501,
        longitude: 30.5234,
        locationName: ""
    )
    static let london = BirthData(
        name: "B",
        birthDate: "1992-03-15",
        birthTime: "08:30",
        timezone: "Europe/London",
        latitude: 51.5072,
        longitude: -0.1276,
        locationName: ""
    )

    /// Both births as flags; west is negative, as a user types it.
    static let twoBirths = [
        "--a-date", "1990-10-07", "--a-time", "15:00", "--a-tz", "Europe/Kyiv", "--a-lat", "50.4501", "--a-lon",
        "30.5234", "--b-date", "1992-03-15", "--b-time", "08:30", "--b-tz", "Europe/London", "--b-lat", "51.5072",
        "--b-lon", "-0.1276",
    ]
    static let natalFlags = [
        "--date", "1990-10-07", "--time", "15:00", "--tz", "Europe/Kyiv", "--lat", "50.4501", "--lon", "30.5234",
    ]

    static func engine() throws -> ChartEngine { ChartEngine(ephemeris: try Ephemeris()) }

    @Test func chartSynastryJSONHasTheLibrarysAspects() async throws {
        let run = try await Self.astroctl(["chart", "synastry"] + Self.twoBirths + ["--json"])
        #expect(run.status == 0, "\(run.error)")
        let printed = try JSONCoding.decoder.decode(Synastry.self, from: Data(run.output.utf8))
        let engine = try Self.engine()
        let expected = try ChartEngine.synastry(
            try await engine.chart(for: Self.kyiv),
            try await engine.chart(for: Self.london)
        )
        #expect(!expected.aspects.isEmpty)
        #expect(printed.aspects == expected.aspects)
        #expect(printed.overlaysAInB == expected.overlaysAInB)
        #expect(printed.overlaysBInA == expected.overlaysBInA)
    }

    /// `--json` and `--dst-policy` are `chart`'s own flags too; given after the subcommand, they
    /// still reach it (the parser hands them to `chart` first).
    @Test func chartSynastryTakesAngleOrbAndJSONAnywhere() async throws {
        let run = try await Self.astroctl(["chart", "--json", "synastry", "--angle-orb", "1"] + Self.twoBirths)
        #expect(run.status == 0, "\(run.error)")
        let printed = try JSONCoding.decoder.decode(Synastry.self, from: Data(run.output.utf8))
        #expect(printed.options.angleMaxOrb == 1)
        for aspect in printed.aspects where [aspect.a.point, aspect.b.point].contains(where: \.isAngle) {
            #expect(aspect.orb <= 1)
        }
    }

    @Test(arguments: ["synastry", "composite", "davison", "compatibility"])
    func pairIsTheSameCommand(name: String) async throws {
        for extra in [[], ["--json"]] {
            let chart = try await Self.astroctl(["chart", name] + Self.twoBirths + extra)
            let pair = try await Self.astroctl(["pair", name] + Self.twoBirths + extra)
            #expect(chart.status == 0, "\(chart.error)")
            #expect(pair.status == 0, "\(pair.error)")
            // Composite and Davison carry the moment they were computed; nothing else differs.
            let withoutClock = { (text: String) in
                text.split(separator: "\n").filter { !$0.contains("\"calculatedAt\"") }
            }
            #expect(withoutClock(chart.output) == withoutClock(pair.output), "\(name) \(extra)")
            #expect(!chart.output.isEmpty)
        }
    }

    @Test(arguments: [("composite", "Composite of A and B"), ("davison", "Davison of A and B")])
    func compositeAndDavisonTablesNameTheTenPlanets(name: String, title: String) async throws {
        let run = try await Self.astroctl(["chart", name] + Self.twoBirths)
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix(title) == true, "\(lines.first ?? "")")
        for planet in PlanetName.allCases {
            #expect(
                lines.contains { $0.hasPrefix(planet.rawValue + " ") && $0.contains("°") },
                "\(name): no line for \(planet)"
            )
        }
        #expect(PlanetName.allCases.count == 10)
    }

    @Test func aMissingBirthFlagExitsTwoNamingIt() async throws {
        var arguments = Self.twoBirths
        let index = try #require(arguments.firstIndex(of: "--b-date"))
        arguments.removeSubrange(index...(index + 1))
        for group in ["chart", "pair"] {
            let run = try await Self.astroctl([group, "synastry"] + arguments)
            #expect(run.status == 2, "\(group): \(run.error)")
            #expect(run.error.contains("--b-date"), "\(run.error)")
            #expect(run.output.isEmpty)
        }
    }

    @Test func anInvalidLatitudeExitsTwoWithOneLineNamingTheFlag() async throws {
        let arguments = Self.twoBirths.map { $0 == "50.4501" ? "91" : $0 }
        for group in ["chart", "pair"] {
            let run = try await Self.astroctl([group, "composite"] + arguments)
            #expect(run.status == 2)
            #expect(run.error == "astroctl \(group): --a-lat: 91.0 is outside −90…90\n", "\(run.error)")
            #expect(run.output.isEmpty)
        }
    }

    /// The natal chart's flags mean nothing for two births: refused, not ignored.
    @Test(arguments: [["--date", "1990-10-07"], ["--svg", "/tmp/never.svg"], ["--publish"]])
    func aNatalFlagIsRefusedByTheTwoBirthCommands(extra: [String]) async throws {
        let run = try await Self.astroctl(["chart", "davison"] + Self.twoBirths + extra)
        #expect(run.status == 2)
        #expect(run.error.hasPrefix("astroctl chart: \(extra[0]): not a flag of `chart davison`"), "\(run.error)")
        #expect(run.output.isEmpty)
    }

    @Test func chartHelpListsEverySubcommand() async throws {
        let run = try await Self.astroctl(["chart", "--help"])
        #expect(run.status == 0)
        // astroctl prints help where it prints every message of the parser: standard error.
        let text = run.output + run.error
        guard let start = text.range(of: "SUBCOMMANDS:") else {
            Issue.record("no SUBCOMMANDS in \(text.suffix(300))")
            return
        }
        let listed = Set(
            text[start.upperBound...].split(separator: "\n").compactMap { line -> String? in
                // A subcommand's line starts with two spaces and its name.
                guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
                return line.split(separator: " ").first.map(String.init)
            }
        )
        let expected: Set = [
            "transits", "progressed", "return", "synastry", "composite", "davison", "compatibility",
        ]
        #expect(expected.isSubset(of: listed), "\(listed)")
    }

    /// The natal chart, unchanged by the subcommands: its JSON is the library's chart, and its
    /// table's planet, angle and missing-flag lines are as before.
    @Test func natalChartIsTheLibrarysChart() async throws {
        let engine = try Self.engine()
        let birth = BirthData(
            name: "Me",
            birthDate: "1990-10-07",
            birthTime: "15:00",
            timezone: "Europe/Kyiv",
            latitude: 50.4501,
            longitude: 30.5234,
            locationName: ""
        )
        var expected = try await engine.chart(for: birth)
        let json = try await Self.astroctl(["chart"] + Self.natalFlags + ["--name", "Me", "--json"])
        #expect(json.status == 0, "\(json.error)")
        let printed = try JSONCoding.decoder.decode(NatalChart.self, from: Data(json.output.utf8))
        expected.calculatedAt = printed.calculatedAt
        #expect(printed == expected)

        let table = try await Self.astroctl(["chart"] + Self.natalFlags + ["--name", "Me"])
        #expect(table.status == 0, "\(table.error)")
        let lines = table.output.split(separator: "\n").map(String.init)
        #expect(lines.first == "Me: 1990-10-07 15:00 Europe/Kyiv")
        for planet in expected.planets {
            let line =
                Self.padded(planet.name.rawValue, 11) + Self.dms(planet.longitude) + " "
                + Self.padded(planet.sign.rawValue, 12) + "H\(planet.house)"
            #expect(
                lines.contains { $0 == line || $0.hasPrefix(line + " ") && $0.hasSuffix("R") },
                "no line \(line)"
            )
        }
        #expect(
            lines.contains(
                Self.padded("Asc", 11) + Self.dms(expected.ascendant) + " "
                    + ZodiacSign(longitude: expected.ascendant).rawValue
            )
        )

        var withoutDate = Self.natalFlags
        withoutDate.removeSubrange(0...1)
        let missing = try await Self.astroctl(["chart"] + withoutDate)
        #expect(missing.status == 2)
        #expect(missing.error == "astroctl chart: --date: missing (a string is required)\n", "\(missing.error)")
    }

    static func padded(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// Degrees within the sign, truncated to the second: ` 9°05'07"`.
    static func dms(_ longitude: Double) -> String {
        let seconds = Int((longitude.truncatingRemainder(dividingBy: 30) * 3600).rounded(.down))
        return String(format: "%2d°%02d'%02d\"", seconds / 3600, seconds % 3600 / 60, seconds % 60)
    }
}
