import ArgumentParser
import AstroCLISupport
import AstroDomain
import Foundation
import Postgres
import UUIDText

/// `astroctl chart-results show <id>`: a stored chart result (CONTRACT.md "Chart results").
/// The jobs that store them are published like any other (`astroctl publish chart.synastry`),
/// their bodies checked here first (`ChartResultBodies`).
struct ChartResultsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chart-results",
        abstract: "Read the chart-worker's stored results (synastry, transits, returns, wheels).",
        discussion: """
            Request one with `astroctl publish`, then read it by the resultId of its job:

              astroctl job $(astroctl publish chart.synastry <<< '{"userId": "…", \\
                  "profileId": "…", "partnerProfileId": "…"}')
              astroctl chart-results show <resultId> [--json] [--svg wheel.svg]
            """,
        subcommands: [Show.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a stored chart result: its kind, profiles, parameters and size.",
            discussion: """
                --json prints the result document (JSON kinds); --svg FILE writes a wheel's SVG \
                to a new file. Reading a result does not count as using it (last_used_at, which \
                retention reads, is left as it is). Exit status 1 when there is no such result.
                """
        )

        @Argument(help: "The result id (the resultId of chart.computed or of the job's result).")
        var id: String
        @Flag(help: "Print the stored result document as JSON.") var json = false
        @Option(help: "Write a wheel's SVG to this new file.") var svg: String?
        @OptionGroup var connection: ConnectionOptions

        func validate() throws {
            guard UUID(text: id) != nil else { throw ValidationError("\(id.debugDescription) is not a UUID") }
            if let svg {
                guard !svg.isEmpty, svg.utf8.count <= 4096 else { throw ValidationError("--svg: a file path") }
                guard !FileManager.default.fileExists(atPath: svg) else {
                    throw ValidationError("--svg: \(svg) exists; choose a new file")
                }
            }
        }

        func run() async throws {
            guard let uuid = UUID(text: id) else { throw ValidationError("not a UUID") }
            let row = try await connection.withPool(size: 1) { pool in
                try await pool.withConnection { database in
                    try database.query(
                        """
                        SELECT kind, user_id::text AS user_id, profile_id::text AS profile_id,
                            partner_profile_id::text AS partner, parameters::text AS parameters,
                            result::text AS result, svg, bytes, engine_version,
                            to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created,
                            to_char(last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS used
                        FROM chart_results WHERE id = $1
                        """,
                        [uuid]
                    ).first.map { row in
                        StoredResult(
                            kind: try row.decode(String.self, "kind"),
                            user: try row.decode(String.self, "user_id"),
                            profile: try row.decode(String.self, "profile_id"),
                            partner: try row.decode(String?.self, "partner"),
                            parameters: try row.decode(String.self, "parameters"),
                            result: try row.decode(String?.self, "result"),
                            svg: try row.decode(String?.self, "svg"),
                            bytes: try row.decode(Int.self, "bytes"),
                            engineVersion: try row.decode(String.self, "engine_version"),
                            created: try row.decode(String.self, "created"),
                            lastUsed: try row.decode(String.self, "used")
                        )
                    }
                }
            }
            guard let row else { throw CommandFailure("no chart result \(uuid.lowercasedText)") }
            if let path = svg {
                guard let text = row.svg else { throw CommandFailure("result \(id) is a \(row.kind), not a wheel") }
                do {
                    try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
                } catch {
                    throw CommandFailure("cannot write \(path): \(error.localizedDescription)")
                }
                FileHandle.standardError.write(Data("wrote \(path) (\(text.utf8.count) bytes)\n".utf8))
            }
            if json {
                guard let result = row.result else { throw CommandFailure("result \(id) is a wheel: use --svg FILE") }
                // Transits are stored compact; shown whole, as the API serves them.
                print(
                    Self.pretty(
                        row.kind == "transits" ? (try? TransitReport.expandedJSON(stored: result)) ?? result : result
                    )
                )
                return
            }
            print(Terminal.safe(row.summary(id: uuid.lowercasedText)))
        }

        static func pretty(_ text: String) -> String {
            guard let value = try? JSONValue.parse(Data(text.utf8)) else { return text }
            let encoder = JSONCoding.encoder
            encoder.outputFormatting.insert(.prettyPrinted)
            return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? text
        }
    }

    /// One `chart_results` row as read for display.
    struct StoredResult: Sendable {
        var kind: String
        var user: String
        var profile: String
        var partner: String?
        var parameters: String
        var result: String?
        var svg: String?
        var bytes: Int
        var engineVersion: String
        var created: String
        var lastUsed: String

        func summary(id: String) -> String {
            var lines = [
                "result     \(id)",
                "kind       \(kind)",
                "user       \(user)",
                "profile    \(profile)" + (partner.map { "\npartner    \($0)" } ?? ""),
                "parameters \(parameters)",
                "size       \(bytes) bytes (\(engineVersion))",
                "created    \(created), last used \(lastUsed)",
            ]
            if let result, let document = try? JSONValue.parse(Data(result.utf8)) {
                lines.append(Self.outline(kind: kind, document))
            }
            return lines.joined(separator: "\n")
        }

        /// One line saying what the document holds.
        static func outline(kind: String, _ document: JSONValue) -> String {
            switch kind {
            case "synastry":
                let aspects = document["synastry"]?["aspects"]?.arrayValue?.count ?? 0
                let score: String =
                    if case .number(let value)? = document["compatibility"]?["score"] { "\(Int(value))" } else { "?" }
                return "holds      \(aspects) inter-aspects, compatibility \(score)/100, composite and Davison charts"
            case "transits":
                let transits = document["transits"]?.arrayValue?.count ?? 0
                let ingresses = document["ingresses"]?.arrayValue?.count ?? 0
                return "holds      \(transits) transits, \(ingresses) ingresses"
            case "solar-return":
                return "holds      the return at \(document["instant"]?.stringValue ?? "?") and its chart"
            default:
                return "holds      the progressed chart for \(document["target"]?.stringValue ?? "?")"
            }
        }
    }
}

/// The chart result jobs' bodies, checked by `astroctl publish` before anything is queued, with
/// the same rules and codes as the chart-worker's.
enum ChartResultBodies {
    /// - Throws: `CommandFailure` naming the code and the field when a chart result job's body
    ///   is invalid; nothing for other job types.
    static func validate(_ type: JobType, body: Data) throws {
        do {
            switch type {
            case .chartSynastry: _ = try ChartSynastryRequest.decode(from: body)
            case .chartTransits: _ = try ChartTransitsRequest.decode(from: body)
            case .chartReturn: _ = try ChartReturnRequest.decode(from: body)
            case .chartRender: _ = try ChartRenderRequest.decode(from: body)
            default: return
            }
        } catch {
            throw CommandFailure("\(type) body refused: \(error.code.rawValue): \(error.message)")
        }
    }
}
