import AstroCLISupport
import AstroDomain
import ChartEngine
import ChartWheel
import Foundation

/// `astroctl chart … --svg wheel.svg`: the chart wheel, and the bi-wheel with a second chart
/// (`--outer-*`) or the sky at an instant (`--transits-at`).
extension ChartCommand {
    /// Whether the flags ask for anything of the wheel (checked before computing).
    var wantsWheel: Bool {
        svg != nil || transitsAt != nil || outerDate != nil || outerTime != nil || outerTz != nil
            || outerLat != nil || outerLon != nil
    }

    /// Writes the wheel of `chart` to `--svg`, with an outer ring when asked.
    func writeWheel(chart: NatalChart, name: String, engine: ChartEngine) async throws {
        guard let path = svg, !path.isEmpty else {
            Self.fail(field: "--svg", message: "--theme, --transits-at and --outer-* need --svg FILE")
        }
        guard let theme = WheelTheme(rawValue: self.theme) else {
            Self.fail(field: "--theme", message: "expected light or dark, got \(InputQuote.short(self.theme))")
        }
        let hasOuterBirth = outerDate != nil || outerTime != nil || outerTz != nil || outerLat != nil || outerLon != nil
        if hasOuterBirth && transitsAt != nil {
            Self.fail(
                field: "--transits-at",
                message: "give either --transits-at or the --outer-* birth data, not both"
            )
        }
        var input = WheelInput.natal(chart, name: name, theme: theme)
        if let transitsAt {
            guard let instant = ISO8601.date(from: transitsAt) else {
                Self.fail(
                    field: "--transits-at",
                    message: "expected a UTC instant like 2026-11-24T18:00:00Z, got \(InputQuote.short(transitsAt))"
                )
            }
            // The sky at that minute (the birth-data shape has minutes), at the natal place.
            let parts = Self.utcDateAndTime(instant)
            let birth = BirthData(
                name: "Transits",
                birthDate: parts.date,
                birthTime: parts.time,
                timezone: "Etc/UTC",
                latitude: chart.latitude,
                longitude: chart.longitude,
                locationName: ""
            )
            let sky = try await outerChart(birth, engine: engine, field: "--transits-at")
            let label = "Transits \(parts.date) \(parts.time) UTC"
            input = .biWheel(
                inner: chart,
                innerName: name,
                outer: sky,
                outerName: label,
                title: "\(name) — natal chart with transits",
                theme: theme
            )
        } else if hasOuterBirth {
            guard let outerDate, let outerTime, let outerTz, let outerLat, let outerLon else {
                Self.fail(
                    field: "--outer-date",
                    message:
                        "a second chart needs all of --outer-date, --outer-time, --outer-tz, --outer-lat, --outer-lon"
                )
            }
            let birth = BirthData(
                name: outerName,
                birthDate: outerDate,
                birthTime: outerTime,
                timezone: outerTz,
                latitude: outerLat,
                longitude: outerLon,
                locationName: ""
            )
            let partner = try await outerChart(birth, engine: engine, field: "--outer-*")
            input = .biWheel(
                inner: chart,
                innerName: name,
                outer: partner,
                outerName: outerName,
                title: "\(name) (inner) and \(outerName) (outer)",
                theme: theme
            )
        }
        let text: String
        do {
            text = try ChartWheel.svg(input)
        } catch {
            throw CommandFailure("wheel: \(error)")
        }
        do {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw CommandFailure("cannot write \(path): \(error.localizedDescription)")
        }
        FileHandle.standardError.write(Data("wrote \(path) (\(text.utf8.count) bytes)\n".utf8))
    }

    private func outerChart(_ birth: BirthData, engine: ChartEngine, field: String) async throws -> NatalChart {
        do {
            return try await engine.chart(for: birth, calculatedAt: Date(timeIntervalSince1970: 0))
        } catch {
            if error.isPermanent { Self.fail(field: field, message: error.message) }
            throw CommandFailure("\(error)")
        }
    }

    static func utcDateAndTime(_ date: Date) -> (date: String, time: String) {
        let text = ISO8601.string(from: date)  // yyyy-MM-ddTHH:mm:ss…Z
        let characters = Array(text)
        return (String(characters[0..<10]), String(characters[11..<16]))
    }
}
