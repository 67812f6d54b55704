import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import UUIDText

extension ChartCommand {
    /// The validated birth data of the parent command's options, or exit status 2 naming the flag.
    func birthData() -> BirthData {
        do {
            return try ChartCalculateRequest(json: requestBody(jobID: .random(), userID: UUID().lowercasedText))
                .birthData
        } catch {
            Self.fail(field: Self.flagName(error.field), message: error.message)
        }
    }
}

/// Shared plumbing of the time-based chart commands.
enum TimeChartSupport {
    static func engine() throws -> ChartEngine {
        do {
            return ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
    }

    /// A UTC date `YYYY-MM-DD` as its midnight, or exit status 2 naming the flag.
    static func day(_ text: String, flag: String) -> Date {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).compactMap { Int($0) }
        guard text.count == 10, parts.count == 3, (1...12).contains(parts[1]), (1...31).contains(parts[2]),
            let date = Calendar.utcGregorian.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])),
            Calendar.utcGregorian.component(.day, from: date) == parts[2]
        else { ChartCommand.fail(field: flag, message: "'\(text)' is not a date YYYY-MM-DD") }
        return date
    }

    static func fail(_ error: TransitError, flag: String) throws -> Never {
        if case .chart(let chart) = error {
            if chart.isPermanent {
                ChartCommand.fail(field: ChartCommand.flagName(chart.field ?? ""), message: chart.message)
            }
            throw CommandFailure("\(chart)")
        }
        ChartCommand.fail(field: flag, message: "\(error.code): \(error.message)")
    }

    static func printJSON(_ value: some Encodable) throws {
        let encoder = JSONCoding.encoder
        encoder.outputFormatting.insert(.prettyPrinted)
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    static func utc(_ date: Date) -> String {
        let c = Calendar.utcGregorian.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        return String(
            format: "%04d-%02d-%02d %02d:%02d",
            c.year ?? 0,
            c.month ?? 0,
            c.day ?? 0,
            c.hour ?? 0,
            c.minute ?? 0
        )
    }

    static let aspectSymbols: [AspectType: String] = [
        .conjunction: "conjunct", .opposition: "opposite", .trine: "trine", .square: "square", .sextile: "sextile",
    ]

    static func render(_ report: TransitReport) -> String {
        var lines = ["Transits \(utc(report.from)) – \(utc(report.to)) UTC (orb rule: \(report.orbRule))", ""]
        lines.append("exact (UTC)        transit            aspect     natal  R  orb window (UTC)")
        var rows: [(Date, String)] = []
        for transit in report.transits {
            let window = "\(transit.entersOrb.map(utc) ?? "…") → \(transit.leavesOrb.map(utc) ?? "…")"
            for hit in transit.hits {
                let row =
                    ChartTable.pad(utc(hit.exact), 19) + ChartTable.pad(transit.transiting.rawValue, 19)
                    + ChartTable.pad(aspectSymbols[transit.aspect] ?? "", 11)
                    + ChartTable.pad(transit.natal.description, 7)
                    + ChartTable.pad(hit.isRetrograde ? "R" : "", 3) + window
                rows.append((hit.exact, row))
            }
        }
        lines += rows.sorted { $0.0 < $1.0 }.map(\.1)
        lines += ["", "Ingresses"]
        for ingress in report.ingresses {
            let what = ingress.kind == .sign ? ingress.sign.rawValue : "house \(ingress.house ?? 0)"
            lines.append(
                ChartTable.pad(utc(ingress.instant), 19) + ChartTable.pad(ingress.planet.rawValue, 9) + "enters "
                    + what + (ingress.isRetrograde ? " (R)" : "")
            )
        }
        return lines.joined(separator: "\n")
    }
}

extension Calendar {
    static let utcGregorian: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}

struct ChartTransitsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transits",
        abstract: "Exact transits of Sun…Pluto to a natal chart over a UTC range (at most 366 days), offline.",
        discussion: """
              astroctl chart transits --date 1990-10-07 --time 15:00 --tz Europe/Kyiv \\
                  --lat 50.4501 --lon 30.5234 --from 2025-01-01 --to 2026-01-01 [--orb 2] [--json]
            """
    )
    // The birth options and --json are `astroctl chart`'s own, given after the subcommand name.
    @ParentCommand var chart: ChartCommand
    @Option(help: "Range start, a UTC date YYYY-MM-DD (inclusive).") var from: String
    @Option(help: "Range end, a UTC date YYYY-MM-DD (exclusive; at most 366 days after --from).") var to: String
    @Option(help: "One orb in degrees (0 < orb ≤ 10) for every aspect; default: each aspect's seed orb.") var orb:
        Double?

    func run() async throws {
        let birthData = chart.birthData()
        let engine = try TimeChartSupport.engine()
        let natal: NatalChart
        do {
            natal = try await engine.chart(for: birthData)
        } catch {
            try TimeChartSupport.fail(.chart(error), flag: "input")
        }
        let report: TransitReport
        do {
            report = try await engine.transits(
                for: natal,
                from: TimeChartSupport.day(from, flag: "--from"),
                to: TimeChartSupport.day(to, flag: "--to"),
                orb: orb.map { .fixed($0) } ?? .seed
            )
        } catch {
            try TimeChartSupport.fail(error, flag: error.code == "transit-orb-invalid" ? "--orb" : "--to")
        }
        if chart.json {
            try TimeChartSupport.printJSON(report)
        } else {
            print(Terminal.safe(TimeChartSupport.render(report)))
        }
    }
}

struct ChartProgressedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "progressed",
        abstract: "The secondary-progressed chart (a day for a year) for a target date, offline.",
        discussion: "Angles: cast for the progressed instant at the birth place (progressed-instant-armc)."
    )
    // The birth options and --json are `astroctl chart`'s own, given after the subcommand name.
    @ParentCommand var chart: ChartCommand
    @Option(help: "The target date, UTC YYYY-MM-DD.") var target: String

    func run() async throws {
        let birthData = chart.birthData()
        let engine = try TimeChartSupport.engine()
        let progressed: ProgressedChart
        do {
            progressed = try await engine.progressed(
                for: birthData,
                target: TimeChartSupport.day(target, flag: "--target")
            )
        } catch {
            try TimeChartSupport.fail(error, flag: "--target")
        }
        do {
            if chart.json {
                try TimeChartSupport.printJSON(progressed)
            } else {
                print(
                    "Progressed for \(target) (progressed instant \(TimeChartSupport.utc(progressed.progressedInstant)) UTC)"
                )
                print(Terminal.safe(ChartTable.render(progressed.chart, name: "Progressed")))
            }
        }
    }
}

struct ChartReturnCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "return",
        abstract: "The solar return of a year: the instant the Sun is back at its natal longitude, and its chart.",
        discussion: "Cast at the birth place unless --at-lat and --at-lon are given."
    )
    // The birth options and --json are `astroctl chart`'s own, given after the subcommand name.
    @ParentCommand var chart: ChartCommand
    @Option(help: "The year of the return (1900…2100).") var year: Int
    @Option(name: .customLong("at-lat"), parsing: .unconditional, help: "Latitude of the return chart's place.")
    var atLatitude: Double?
    @Option(name: .customLong("at-lon"), parsing: .unconditional, help: "Longitude of the return chart's place.")
    var atLongitude: Double?
    @Option(name: .customLong("at-location"), help: "Name of the return chart's place.") var atLocation = ""

    func run() async throws {
        let birthData = chart.birthData()
        if (atLatitude == nil) != (atLongitude == nil) {
            ChartCommand.fail(field: "--at-lat", message: "give both --at-lat and --at-lon, or neither")
        }
        let place = atLatitude.flatMap { lat in
            atLongitude.map { ChartPlace(latitude: lat, longitude: $0, locationName: atLocation) }
        }
        let engine = try TimeChartSupport.engine()
        let solarReturn: SolarReturn
        do {
            solarReturn = try await engine.solarReturn(for: birthData, year: year, place: place)
        } catch {
            try TimeChartSupport.fail(error, flag: error.code.hasPrefix("transit-") ? "--year" : "--at-lat")
        }
        do {
            if chart.json {
                try TimeChartSupport.printJSON(solarReturn)
            } else {
                let seconds = Calendar.utcGregorian.component(.second, from: solarReturn.instant)
                print(
                    "Solar return \(year): \(TimeChartSupport.utc(solarReturn.instant)):\(String(format: "%02d", seconds)) UTC"
                )
                print(Terminal.safe(ChartTable.render(solarReturn.chart, name: "Solar return \(year)")))
            }
        }
    }
}
