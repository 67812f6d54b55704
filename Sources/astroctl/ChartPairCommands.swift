import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import UUIDText

/// Charts for two people, offline: `astroctl pair synastry|composite|davison|compatibility`, the
/// older name of `astroctl chart synastry|composite|davison|compatibility` (same flags, same
/// output), kept so that scripts written for it go on working.
struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract:
            "Charts for two births (offline); the same as `astroctl chart synastry|composite|davison|compatibility`.",
        discussion: """
            An alias: `astroctl pair X …` is `astroctl chart X …`. Each birth takes the flags \
            of `astroctl chart`, prefixed --a- or --b-:

              astroctl pair synastry --a-date 1990-10-07 --a-time 15:00 --a-tz Europe/Kyiv \\
                  --a-lat 50.4501 --a-lon 30.5234 --b-date 1992-03-15 --b-time 08:30 \\
                  --b-tz Europe/London --b-lat 51.5072 --b-lon -0.1276
            """,
        subcommands: [
            ChartSynastryCommand.self, ChartCompositeCommand.self, ChartDavisonCommand.self,
            ChartCompatibilityCommand.self,
        ]
    )
}

/// A command of two births, run as `astroctl pair X` or `astroctl chart X`.
protocol TwoBirthCommand: AsyncParsableCommand {
    var births: TwoBirthOptions { get set }
}

/// The two births of a chart for two people: `--a-…` for chart A, `--b-…` for chart B.
struct TwoBirthOptions: ParsableArguments {
    /// The command as the user typed it, for messages: `astroctl pair`, or `astroctl chart` when
    /// run through `ChartTwoBirthCommand`.
    @TaskLocal static var invokedAs = "astroctl pair"

    @Option(name: .customLong("a-date"), help: "A's birth date, YYYY-MM-DD.") var aDate: String
    @Option(name: .customLong("a-time"), help: "A's local birth time, HH:mm.") var aTime: String
    @Option(name: .customLong("a-tz"), help: "A's IANA time zone, e.g. Europe/Kyiv.") var aTimezone: String
    @Option(name: .customLong("a-lat"), parsing: .unconditional, help: "A's latitude, north positive.")
    var aLatitude: Double
    @Option(name: .customLong("a-lon"), parsing: .unconditional, help: "A's longitude, east positive.")
    var aLongitude: Double
    @Option(name: .customLong("a-name"), help: "A's name, for display.") var aName = "A"
    @Option(name: .customLong("a-house-system"), help: "A's house system (default placidus).") var aHouseSystem =
        "placidus"
    @Option(name: .customLong("b-date"), help: "B's birth date, YYYY-MM-DD.") var bDate: String
    @Option(name: .customLong("b-time"), help: "B's local birth time, HH:mm.") var bTime: String
    @Option(name: .customLong("b-tz"), help: "B's IANA time zone.") var bTimezone: String
    @Option(name: .customLong("b-lat"), parsing: .unconditional, help: "B's latitude, north positive.")
    var bLatitude: Double
    @Option(name: .customLong("b-lon"), parsing: .unconditional, help: "B's longitude, east positive.")
    var bLongitude: Double
    @Option(name: .customLong("b-name"), help: "B's name, for display.") var bName = "B"
    @Option(name: .customLong("b-house-system"), help: "B's house system (default placidus).") var bHouseSystem =
        "placidus"
    @Option(help: "For a local time in a DST gap or overlap (both births): earlier or later.") var dstPolicy: String?
    @Flag(help: "Print JSON instead of tables.") var json = false

    /// Both natal charts, computed offline; invalid input exits with status 2 naming the flag.
    func charts() async throws -> (engine: ChartEngine, a: NatalChart, b: NatalChart) {
        let engine: ChartEngine
        do {
            engine = ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        let a = try await chart(
            engine,
            side: "a",
            [aDate, aTime, aTimezone, aName, aHouseSystem],
            aLatitude,
            aLongitude
        )
        let b = try await chart(
            engine,
            side: "b",
            [bDate, bTime, bTimezone, bName, bHouseSystem],
            bLatitude,
            bLongitude
        )
        return (engine, a, b)
    }

    private func chart(
        _ engine: ChartEngine,
        side: String,
        _ text: [String],
        _ latitude: Double,
        _ longitude: Double
    ) async throws -> NatalChart {
        var body: [String: JSONValue] = [
            "jobId": .string(JobID.random().description), "userId": .string(UUID().lowercasedText),
            "houseSystem": .string(text[4]),
            "profile": .object([
                "name": .string(text[3]), "birthDate": .string(text[0]), "birthTime": .string(text[1]),
                "timezone": .string(text[2]), "latitude": .number(latitude), "longitude": .number(longitude),
                "locationName": .string(""),
            ]),
        ]
        if let dstPolicy { body["dstPolicy"] = .string(dstPolicy) }
        let request: ChartCalculateRequest
        do {
            request = try ChartCalculateRequest(json: .object(body))
        } catch {
            Self.fail(side: side, field: error.field, message: error.message)
        }
        do {
            return try await engine.chart(for: request.birthData)
        } catch {
            if error.isPermanent { Self.fail(side: side, field: error.field ?? "", message: error.message) }
            throw CommandFailure("\(error)")
        }
    }

    static func fail(side: String, field: String, message: String) -> Never {
        let flag = ChartCommand.flagName(field)
        let named = flag.hasPrefix("--") ? "--\(side)-" + flag.dropFirst(2) : flag
        FileHandle.standardError.write(
            Data("\(invokedAs): \(named): \(ChartCommand.withoutFieldPrefix(message))\n".utf8)
        )
        Foundation.exit(2)
    }

    static func failRelationship(_ error: RelationshipChartError) throws -> Never {
        guard error.isPermanent else { throw CommandFailure("\(error)") }
        FileHandle.standardError.write(Data("\(invokedAs): \(error.code): \(error.message)\n".utf8))
        Foundation.exit(2)
    }
}

/// Pretty, sorted JSON of a result.
private func printJSON(_ value: some Encodable) throws {
    let encoder = JSONCoding.encoder
    encoder.outputFormatting.insert(.prettyPrinted)
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

private func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

struct ChartSynastryCommand: TwoBirthCommand {
    static let configuration = CommandConfiguration(
        commandName: "synastry",
        abstract: "Inter-aspects and house overlays of two births (offline).",
        discussion: """
              astroctl chart synastry --a-date 1990-10-07 --a-time 15:00 --a-tz Europe/Kyiv \\
                  --a-lat 50.4501 --a-lon 30.5234 --b-date 1992-03-15 --b-time 08:30 \\
                  --b-tz Europe/London --b-lat 51.5072 --b-lon -0.1276 [--angle-orb 3] [--json]
            """
    )

    @OptionGroup var births: TwoBirthOptions
    @Option(parsing: .unconditional, help: "Largest orb (0–8°) of aspects to ASC or MC (default: the seed's orbs).")
    var angleOrb: Double?

    func run() async throws {
        let (_, a, b) = try await births.charts()
        let synastry: Synastry
        do {
            synastry = try ChartEngine.synastry(a, b, options: SynastryOptions(angleMaxOrb: angleOrb))
        } catch {
            try TwoBirthOptions.failRelationship(error)
        }
        if births.json { return try printJSON(synastry) }
        print(Terminal.safe(Self.render(synastry, nameA: births.aName, nameB: births.bName)))
    }

    static func render(_ synastry: Synastry, nameA: String, nameB: String) -> String {
        var lines = ["Synastry: \(nameA) (A) × \(nameB) (B), \(synastry.aspects.count) inter-aspects", ""]
        lines.append("A point   aspect        B point   orb         ")
        for aspect in synastry.aspects {
            lines.append(
                padded("A " + aspect.a.point.rawValue, 10) + padded(aspect.type.rawValue, 14)
                    + padded("B " + aspect.b.point.rawValue, 10) + String(format: "%5.2f° ", aspect.orb)
                    + (aspect.isApplying ? "applying" : "separating")
            )
        }
        lines.append("")
        lines.append("House overlays   A's point in B's house | B's point in A's house")
        for (first, second) in zip(synastry.overlaysAInB, synastry.overlaysBInA) {
            lines.append(
                padded("", 17) + padded("A " + first.point.point.rawValue, 10) + padded("\(first.house)", 14)
                    + "| " + padded("B " + second.point.point.rawValue, 10) + "\(second.house)"
            )
        }
        return lines.joined(separator: "\n")
    }
}

struct ChartCompositeCommand: TwoBirthCommand {
    static let configuration = CommandConfiguration(
        commandName: "composite",
        abstract: "The composite (midpoint) chart of two births (offline).",
        discussion: "Same birth flags as `astroctl chart synastry`; --json prints the NatalChart-shaped result."
    )

    @OptionGroup var births: TwoBirthOptions

    func run() async throws {
        let (engine, a, b) = try await births.charts()
        let chart: NatalChart
        do {
            chart = try await engine.composite(a, b)
        } catch {
            try TwoBirthOptions.failRelationship(error)
        }
        if births.json { return try printJSON(chart) }
        print(Terminal.safe(ChartTable.render(chart, name: "Composite of \(births.aName) and \(births.bName)")))
    }
}

struct ChartDavisonCommand: TwoBirthCommand {
    static let configuration = CommandConfiguration(
        commandName: "davison",
        abstract: "The Davison chart (midpoint in time and on the sphere) of two births (offline).",
        discussion: "Same birth flags as `astroctl chart synastry`; --json prints the NatalChart-shaped result."
    )

    @OptionGroup var births: TwoBirthOptions

    func run() async throws {
        let (engine, a, b) = try await births.charts()
        let chart: NatalChart
        do {
            chart = try await engine.davison(a, b)
        } catch {
            try TwoBirthOptions.failRelationship(error)
        }
        if births.json { return try printJSON(chart) }
        print(Terminal.safe(ChartTable.render(chart, name: "Davison of \(births.aName) and \(births.bName)")))
    }
}

struct ChartCompatibilityCommand: TwoBirthCommand {
    static let configuration = CommandConfiguration(
        commandName: "compatibility",
        abstract: "The compatibility score (0–100) of two births with its parts (offline).",
        discussion: "Same birth flags as `astroctl chart synastry`. Method: CONTRACT.md \"Compatibility score\"."
    )

    @OptionGroup var births: TwoBirthOptions
    @Option(parsing: .unconditional, help: "Largest orb (0–8°) of aspects to ASC or MC (default: the seed's orbs).")
    var angleOrb: Double?

    func run() async throws {
        let (_, a, b) = try await births.charts()
        let score: CompatibilityScore
        do {
            score = CompatibilityScoring.score(
                try ChartEngine.synastry(a, b, options: SynastryOptions(angleMaxOrb: angleOrb))
            )
        } catch {
            try TwoBirthOptions.failRelationship(error)
        }
        if births.json { return try printJSON(score) }
        var lines = [
            "Compatibility of \(births.aName) (A) and \(births.bName) (B): \(score.score)/100 (\(score.method))",
            String(format: "harmony %.2f, challenge %.2f", score.harmony, score.challenge), "",
        ]
        for part in score.parts { lines.append(String(format: "%+7.2f  ", part.points) + part.explanation) }
        print(Terminal.safe(lines.joined(separator: "\n")))
    }
}
