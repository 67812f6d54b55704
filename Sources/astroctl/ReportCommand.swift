import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Foundation
import Postgres
import Reports
import UUIDText

/// `astroctl report …`: request a paid report and wait for it, show a stored one, or write one
/// offline with the built-in writer.
struct ReportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Request a report (spends one credit), show a stored report, or preview one offline.",
        subcommands: [ReportRequestCommand.self, ReportShow.self, ReportPreview.self]
    )
}

extension ReportArea: ExpressibleByArgument {}
extension ReportLanguage: ExpressibleByArgument {}

struct ReportRequestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "request",
        abstract: "Publish report.request for a profile and, with --wait, print the report once it is stored.",
        discussion: """
            Exit status 1 when the request fails (e.g. insufficient-credits) or the \
            report could not be written (the credit is then refunded).

            Example:
              astroctl report request --user <uuid> --profile <uuid> --area career \\
                  --language uk --wait
            """
    )

    @Option(help: "The user (UUID).") var user: String
    @Option(help: "The profile (UUID) whose chart the report reads.") var profile: String
    @Option(help: "finances, career, relationships, health or general.") var area: ReportArea
    @Option(help: "en or uk.") var language: ReportLanguage = .en
    @Option(help: "Another profile (UUID) of the user: a relationships report about the two of them.")
    var partner: String?
    @Flag(help: "Wait for the report and print it.") var wait = false
    @Option(parsing: .unconditional, help: "With --wait: give up after this many seconds.") var timeout = 120
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let userID = UserID(user) else { throw ValidationError("--user: expected a UUID, got \(user)") }
        guard let profileID = ProfileID(profile) else {
            throw ValidationError("--profile: expected a UUID, got \(profile)")
        }
        let partnerID = try partner.map { text throws(ValidationError) -> ProfileID in
            guard let id = ProfileID(text) else { throw ValidationError("--partner: expected a UUID, got \(text)") }
            return id
        }
        let request = ReportRequest(
            jobID: .random(),
            userID: userID,
            profileID: profileID,
            area: area,
            language: language,
            partnerProfileID: partnerID
        )
        if let code = request.partnerRejection { throw ValidationError("--partner: \(code)") }
        try await JobCommands.publish(.reportRequest, jobID: request.jobID, body: request, connection: connection)
        guard wait else {
            print(request.jobID)
            return
        }
        FileHandle.standardError.write(Data("published report.request \(request.jobID); waiting…\n".utf8))
        let reportJob = JobID.derived(from: request.jobID, purpose: JobType.reportGenerate.rawValue)
        let deadline = ContinuousClock.now + .seconds(timeout)
        let notDelivered = "no report within \(timeout) s: are the billing- and report-workers running?"
        try await connection.withPool(size: 1) { pool in
            // The request (billing-worker), then the report job it queued (report-worker).
            for watched in [request.jobID, reportJob] {
                let finished = try await JobCommands.waitForEnd(
                    of: watched,
                    pool: pool,
                    until: deadline,
                    onTimeout: notDelivered
                )
                guard finished.status == "succeeded" else {
                    let reason = finished.error.map { "\($0.code): \($0.message)" } ?? finished.status
                    throw CommandFailure("the report was not delivered: \(reason)")
                }
                // Already written: the request answers with the report, no report job runs.
                if finished.result?["reportId"] != nil { break }
            }
            let text = try await pool.withConnection { database in
                try ReportShow.render(
                    try database.query(
                        """
                        SELECT id, area, language, report_text, word_count, price::text AS price, currency, writer,
                               prompt_version, generated_at
                        FROM report_purchases WHERE profile_id = $1 AND area = $2 AND language = $3
                            AND partner_profile_id IS NOT DISTINCT FROM $4
                        """,
                        [profileID.uuid, area.rawValue, language.rawValue, partnerID?.uuid]
                    ).first
                )
            }
            print(Terminal.safe(text))
        }
    }
}

struct ReportShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Print a stored report.")

    @Argument(help: "The report's id (reportId of report.completed).") var reportID: String
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        guard let id = ReportID(reportID) else { throw ValidationError("expected a report UUID, got \(reportID)") }
        let text = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database in
                try Self.render(
                    try database.query(
                        """
                        SELECT id, area, language, report_text, word_count, price::text AS price, currency, writer,
                               prompt_version, generated_at
                        FROM report_purchases WHERE id = $1
                        """,
                        [id.uuid]
                    ).first
                )
            }
        }
        print(Terminal.safe(text))
    }

    static func render(_ row: PostgresRow?) throws -> String {
        guard let row else { throw CommandFailure("no such report") }
        let id = try row.decode(UUID.self, "id").lowercasedText
        let footer = [
            "report \(id)", "\(try row.decode(String.self, "area"))/\(try row.decode(String.self, "language"))",
            "\(try row.decode(Int.self, "word_count")) words",
            "\(try row.decode(String.self, "price")) \(try row.decode(String.self, "currency"))",
            "writer \(try row.decode(String.self, "writer")) \(try row.decode(String?.self, "prompt_version") ?? "")",
            "generated \(ISO8601.string(from: try row.decode(Date.self, "generated_at")))",
        ]
        return try row.decode(String.self, "report_text") + "\n\n(" + footer.joined(separator: ", ") + ")"
    }
}

struct ReportPreview: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "preview",
        abstract: "Write a report offline with the built-in writer (no broker, no database).",
        discussion: """
            Example:
              astroctl chart --date 1990-10-07 --time 15:00 --tz Europe/Kyiv \\
                  --lat 50.4501 --lon 30.5234 --json > chart.json
              astroctl report preview --chart chart.json --area career --language uk
              astroctl report preview --chart anna.json --partner-chart oleh.json \\
                  --name Anna --partner-name Oleh --area relationships --language uk
            """
    )

    @Option(help: "A NatalChart JSON file (astroctl chart --json).") var chart: String
    @Option(help: "finances, career, relationships, health or general.") var area: ReportArea
    @Option(help: "en or uk.") var language: ReportLanguage = .en
    @Option(help: "A second NatalChart JSON file: a relationships report for two (synastry).")
    var partnerChart: String?
    @Option(help: "With --partner-chart: the first person's name.") var name = "A"
    @Option(help: "With --partner-chart: the partner's name.") var partnerName = "B"

    static func natal(_ path: String, option: String) throws -> NatalChart {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("\(option): cannot read \(path)")
        }
        do {
            return try JSONCoding.decoder.decode(NatalChart.self, from: data)
        } catch {
            throw ValidationError("\(option): \(path) is not a NatalChart JSON (astroctl chart --json makes one)")
        }
    }

    func run() async throws {
        let natal = try Self.natal(chart, option: "--chart")
        let report: WrittenReport
        if let partnerChart {
            guard area == .relationships else {
                throw ValidationError("--partner-chart: only with --area relationships")
            }
            let synastry = try ChartEngine.synastry(natal, try Self.natal(partnerChart, option: "--partner-chart"))
            report = try PairReportWriter().write(
                synastry: synastry,
                score: CompatibilityScoring.score(synastry),
                couple: ReportCouple(nameA: name, nameB: partnerName),
                language: language
            )
        } else {
            report = try BuiltInReportWriter().write(chart: natal, area: area, language: language)
        }
        print(Terminal.safe(report.text))
        print(Terminal.safe("\n(\(report.wordCount) words, \(report.writer), \(report.version))"))
    }
}
