import AstroDomain
import ChartWheel
import Foundation
import Hummingbird
import Postgres
import Synchronization

// The natal wheel as SVG (issue 20, part 6): `GET /v1/profiles/{id}/chart.svg?theme=light|dark`
// draws the chart the chart-worker stored with ChartWheel, in the gateway, per request. Drawing
// is pure CPU and takes well under a millisecond, so no job and no stored rendering: the
// drawing is a function of the stored chart, the profile's name (the wheel's title), the
// renderer's version and the theme, and the `ETag` is derived from exactly those, so a client
// revalidating its copy costs one indexed look-up and no drawing.

extension GatewayRoutes {
    /// The longest query string the wheel route reads (`theme=light` is 11 bytes); a longer one
    /// is refused rather than parsed.
    static let maxWheelQueryBytes = 256

    /// The `theme` of the query: `light` when absent.
    /// - Throws: `Problem` 400 `invalid-query` for a query string over `maxWheelQueryBytes`,
    ///   `invalid-theme` for more than one theme or one other than `light` and `dark`.
    static func wheelTheme(_ request: Request) throws -> WheelTheme {
        if let query = request.uri.query, query.utf8.count > maxWheelQueryBytes {
            throw Problem(.invalidQuery, "the query string is over \(maxWheelQueryBytes) bytes")
        }
        let values = request.uri.queryParameters.getAll("theme")
        guard let text = values.first else { return .light }
        guard values.count == 1, let theme = WheelTheme(rawValue: text) else {
            throw Problem(.invalidTheme, "theme: light or dark", field: "theme")
        }
        return theme
    }

    /// A strong validator of the drawing: the stored chart (its id and the time it last changed,
    /// which the chart-worker moves exactly when the chart's input digest changes), the engine
    /// that computed it, the renderer's version, the theme and the name in the title.
    static func wheelETag(_ chart: ResourceStore.WheelChart, theme: WheelTheme) -> String {
        let source = [
            "natal-wheel", chart.chartID.description, String(chart.changedMicros), chart.engineVersion,
            ChartWheel.version, theme.rawValue, chart.name,
        ].joined(separator: "\n")
        return "\"" + sha256Hex(Data(source.utf8)).prefix(32) + "\""
    }

    /// Decodes the stored chart and draws it. A chart that does not decode or draw is a fault of
    /// the stored data, not of the request: logged with the reason, answered 500.
    static func renderNatalWheel(
        _ chart: ResourceStore.WheelChart,
        theme: WheelTheme,
        context: GatewayRequestContext
    ) throws -> String {
        do {
            let natal = try JSONCoding.decoder.decode(NatalChart.self, from: Data(chart.document.utf8))
            return try ChartWheel.svg(WheelInput.natal(natal, name: chart.name, theme: theme))
        } catch {
            context.logger.error(
                "natal wheel not drawn",
                metadata: ["chart.id": "\(chart.chartID)", "error": "\(String(describing: error).prefix(300))"]
            )
            throw Problem(
                .chartUnreadable,
                "the stored chart cannot be drawn"
            )
        }
    }
}

/// `If-None-Match` against one strong `ETag` (RFC 9110 §13.1.2: weak comparison, so `W/` of the
/// same tag matches too; `*` matches any current representation).
enum ETagMatch {
    /// The longest header read; a longer one is treated as no match (the full answer is sent).
    static let maxHeaderBytes = 1024

    static func matches(_ header: String, _ etag: String) -> Bool {
        guard header.utf8.count <= maxHeaderBytes else { return false }
        return header.split(separator: ",").contains { part in
            let tag = part.trimmingCharacters(in: .whitespaces)
            return tag == etag || tag == "W/" + etag || tag == "*"
        }
    }
}

extension ResourceStore {
    /// What the wheel of a profile is drawn from.
    struct WheelChart: Sendable, Equatable {
        /// The profile's name: the wheel's title.
        var name: String
        var chartID: ChartID
        var engineVersion: String
        /// `birth_charts.updated_at` in microseconds since 1970.
        var changedMicros: Int64
        /// The stored chart as PostgreSQL writes the `jsonb` out.
        var document: String
    }

    /// What `GET /v1/profiles/{id}/chart.svg` finds.
    enum WheelChartLookup: Sendable, Equatable {
        case noProfile
        case notCalculated
        case chart(WheelChart)
    }

    /// The profile's name and stored chart: one statement, two unique-index look-ups, with the
    /// columns migration 0015 grants the gateway.
    /// - Throws: `PostgresError`.
    func wheelChart(_ id: ProfileID, user: UserID) async throws -> WheelChartLookup {
        try await pool.withConnection { database -> WheelChartLookup in
            guard
                let row = try database.query(
                    """
                    SELECT p.name, c.id AS chart_id, c.engine_version,
                           (extract(epoch FROM c.updated_at) * 1000000)::bigint AS changed,
                           c.chart_data::text AS chart
                    FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
                    WHERE p.id = $1 AND p.user_id = $2
                    """,
                    [id.uuid, user.uuid]
                ).first
            else { return .noProfile }
            guard let chartID = try row.decode(UUID?.self, "chart_id"), let document = row.rawText("chart") else {
                return .notCalculated
            }
            return .chart(
                WheelChart(
                    name: try row.decode(String.self, "name"),
                    chartID: ChartID(chartID),
                    engineVersion: try row.decode(String.self, "engine_version"),
                    changedMicros: try row.decode(Int64.self, "changed"),
                    document: document
                )
            )
        }
    }
}

/// Drawn wheels by `ETag`, so the same wheel asked again (another device of the user, a client
/// without its copy) is not decoded and drawn again. Bounded by count and bytes, oldest out
/// first; an `ETag` names everything the drawing depends on, so an entry is never stale, only
/// unused. Entries are reached only after the route found the profile to be the caller's.
final class WheelRenderCache: Sendable {
    /// The process's cache (the gateway serves one set of users; tests share it harmlessly, as
    /// keys name the chart they were drawn from).
    static let shared = WheelRenderCache(maxEntries: 256, maxBytes: 8 << 20)

    private struct State {
        var entries: [String: String] = [:]
        var order: [String] = []
        var bytes = 0
    }

    private let state = Mutex(State())
    let maxEntries: Int
    let maxBytes: Int

    /// - Parameters:
    ///   - maxEntries: The most wheels kept (at least 1).
    ///   - maxBytes: The most bytes of SVG kept; a wheel larger than this is drawn and not kept.
    init(maxEntries: Int, maxBytes: Int) {
        self.maxEntries = max(1, maxEntries)
        self.maxBytes = max(0, maxBytes)
    }

    /// The wheel of `etag`, drawn by `draw` when not kept; what `draw` throws is rethrown and
    /// nothing is kept. Two requests missing at once both draw (the result is the same bytes).
    func svg(etag: String, draw: () throws -> String) throws -> String {
        if let kept = state.withLock({ $0.entries[etag] }) { return kept }
        let drawn = try draw()
        let size = drawn.utf8.count
        guard size <= maxBytes else { return drawn }
        state.withLock { state in
            guard state.entries[etag] == nil else { return }
            while !state.order.isEmpty && (state.order.count >= maxEntries || state.bytes + size > maxBytes) {
                let oldest = state.order.removeFirst()
                state.bytes -= state.entries.removeValue(forKey: oldest)?.utf8.count ?? 0
            }
            state.entries[etag] = drawn
            state.order.append(etag)
            state.bytes += size
        }
        return drawn
    }

    /// How many wheels are kept and their bytes (tests).
    var usage: (entries: Int, bytes: Int) { state.withLock { ($0.entries.count, $0.bytes) } }
}
