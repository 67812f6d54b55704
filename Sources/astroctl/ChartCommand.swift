import AMQP
import ArgumentParser
import AstroCLISupport
import AstroDomain
import ChartEngine
import Ephemeris
import Foundation
import Postgres
import Synchronization
import UUIDText
import WorkerRuntime

struct ChartCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chart",
        abstract: "Compute a natal chart from birth data (offline), or publish a chart job.",
        discussion: """
            Offline (no broker, no database): computes the chart here with the Swiss \
            Ephemeris and prints a table, or the NatalChart JSON of the contract with \
            --json.

              astroctl chart --date 1990-10-07 --time 15:00 --tz Europe/Kyiv \\
                  --lat 50.4501 --lon 30.5234
              astroctl chart … --house-system koch --points nodes,chiron,lilith \\
                  --sidereal lahiri --json

            A local time that does not exist (DST gap) or happened twice (DST overlap) is \
            refused unless --dst-policy says which instant to take. Invalid input: exit \
            status 2 and one line naming the field and the rule.

            With --publish, the job goes to the chart-worker instead (chart.calculate), \
            for --user; with --wait it prints the stored chart once the worker has \
            committed it:

              astroctl chart --publish --user 4c1a… --wait \\
                  --date … --time … --tz … --lat … --lon …

            --svg FILE also writes the chart wheel (--theme light|dark); a bi-wheel adds \
            an outer ring: the sky at --transits-at 2026-11-24T18:00:00Z, or a second \
            chart from --outer-date/--outer-time/--outer-tz/--outer-lat/--outer-lon \
            (--outer-name), with the aspects between the rings.

            Subcommands: transits, progressed and return take these birth flags; synastry, \
            composite, davison and compatibility take two births as --a-… and --b-… \
            (`astroctl pair …` is the same commands under their older name).
            """,
        subcommands: [
            ChartTransitsCommand.self, ChartProgressedCommand.self, ChartReturnCommand.self,
            ChartTwoBirthCommand<ChartSynastryCommand>.self, ChartTwoBirthCommand<ChartCompositeCommand>.self,
            ChartTwoBirthCommand<ChartDavisonCommand>.self, ChartTwoBirthCommand<ChartCompatibilityCommand>.self,
        ]
    )

    // The birth flags are optional to the parser only: `chart synastry|composite|davison|
    // compatibility` take two births (--a-…, --b-…) and none of these. The natal chart and
    // `chart transits|progressed|return` still need all five; a missing one is refused with
    // exit status 2 naming the flag, by the same validation as a wrong one (`requestBody`).
    @Option(help: "Birth date, YYYY-MM-DD (1900-01-01 … 2100-12-31); required.") var date: String?
    @Option(help: "Local birth time, HH:mm (24-hour); required.") var time: String?
    @Option(name: .customLong("tz"), help: "IANA time zone of the birth place, e.g. Europe/Kyiv; required.")
    var timezone: String?
    @Option(
        name: .customLong("lat"),
        parsing: .unconditional,
        help: "Latitude in degrees, north positive (−90…90); required."
    )
    var latitude: Double?
    @Option(
        name: .customLong("lon"),
        parsing: .unconditional,
        help: "Longitude in degrees, east positive (−180…180); required."
    )
    var longitude: Double?
    @Option(help: "Profile name (1–50 characters).") var name = "Chart"
    @Option(help: "Place name, for display.") var location = ""
    @Option(
        help: "placidus (default), koch, porphyry, regiomontanus, campanus, equal, wholeSign."
    ) var houseSystem = "placidus"
    @Option(help: "For a local time in a DST gap or overlap: earlier or later.") var dstPolicy: String?
    @Option(
        help: "Optional points, comma separated: nodes, chiron, lilith (or MeanNode, TrueNode, Chiron, MeanLilith)."
    )
    var points: String?
    @Option(help: "Sidereal zodiac with this ayanamsa: lahiri, faganBradley, raman (default: tropical).") var sidereal:
        String?
    @Flag(help: "Print the NatalChart JSON instead of a table.") var json = false
    @Option(help: "Also write the chart wheel as SVG to this file.") var svg: String?
    @Option(help: "With --svg: light (default) or dark.") var theme = "light"
    @Option(help: "With --svg: a bi-wheel whose outer ring is the sky at this UTC instant (2026-11-24T18:00:00Z).")
    var transitsAt: String?
    @Option(help: "With --svg: a bi-wheel with a second chart born on this date (YYYY-MM-DD).") var outerDate: String?
    @Option(help: "With --outer-date: local birth time, HH:mm.") var outerTime: String?
    @Option(help: "With --outer-date: IANA time zone.") var outerTz: String?
    @Option(parsing: .unconditional, help: "With --outer-date: latitude.") var outerLat: Double?
    @Option(parsing: .unconditional, help: "With --outer-date: longitude.") var outerLon: Double?
    @Option(help: "With --outer-date: the second person's name.") var outerName = "Partner"

    @Flag(help: "Publish a chart.calculate job instead of computing here.") var publish = false
    @Option(help: "With --publish: the user the profile belongs to (UUID).") var user: String?
    @Option(help: "With --publish: the profile to update (UUID); a new profile otherwise.") var profile: String?
    @Flag(help: "With --publish: wait for the worker and print the stored chart.") var wait = false
    @Option(parsing: .unconditional, help: "With --wait: give up after this many seconds.") var timeout = 60
    @OptionGroup var connection: ConnectionOptions

    /// The chart.calculate body these flags describe (validated by the same code the worker uses).
    func requestBody(jobID: JobID, userID: String) -> JSONValue {
        var profileObject: [String: JSONValue] = ["name": .string(name), "locationName": .string(location)]
        // A flag not given stays out of the body, which the validation then names as missing.
        if let date { profileObject["birthDate"] = .string(date) }
        if let time { profileObject["birthTime"] = .string(time) }
        if let timezone { profileObject["timezone"] = .string(timezone) }
        if let latitude { profileObject["latitude"] = .number(latitude) }
        if let longitude { profileObject["longitude"] = .number(longitude) }
        if let profile { profileObject["id"] = .string(profile) }
        var body: [String: JSONValue] = [
            "jobId": .string(jobID.description), "userId": .string(userID), "profile": .object(profileObject),
            "houseSystem": .string(houseSystem),
        ]
        if let dstPolicy { body["dstPolicy"] = .string(dstPolicy) }
        if let points { body["points"] = .array(Self.expandPoints(points).map { .string($0) }) }
        if let sidereal { body["sidereal"] = .string(sidereal) }
        return .object(body)
    }

    static func expandPoints(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { item -> [String] in
            switch item.lowercased() {
            case "nodes": return ["MeanNode", "TrueNode"]
            case "node": return ["MeanNode"]
            case "chiron": return ["Chiron"]
            case "lilith": return ["MeanLilith"]
            default: return [item]
            }
        }
    }

    func run() async throws {
        if publish {
            try await runPublished()
            return
        }
        let request: ChartCalculateRequest
        do {
            request = try ChartCalculateRequest(json: requestBody(jobID: .random(), userID: UUID().lowercasedText))
        } catch {
            Self.fail(field: Self.flagName(error.field), message: error.message)
        }
        let engine: ChartEngine
        do {
            engine = ChartEngine(ephemeris: try Ephemeris(configuration: EphemerisConfiguration(threads: 1)))
        } catch {
            throw CommandFailure("ephemeris: \(error.message)")
        }
        let chart: NatalChart
        do {
            chart = try await engine.chart(for: request.birthData)
        } catch {
            if error.isPermanent { Self.fail(field: Self.flagName(error.field ?? ""), message: error.message) }
            throw CommandFailure("\(error)")
        }
        if wantsWheel { try await writeWheel(chart: chart, name: request.birthData.name, engine: engine) }
        if json {
            let encoder = JSONCoding.encoder
            encoder.outputFormatting.insert(.prettyPrinted)
            print(String(decoding: try encoder.encode(chart), as: UTF8.self))
        } else {
            print(Terminal.safe(ChartTable.render(chart, name: request.birthData.name)))
        }
    }

    private func runPublished() async throws {
        guard let user, UUID(text: user) != nil else {
            Self.fail(field: "--user", message: "--publish needs --user with the user's UUID")
        }
        let jobID = JobID.random()
        let body = requestBody(jobID: jobID, userID: user)
        do {
            _ = try ChartCalculateRequest(json: body)
        } catch {
            Self.fail(field: Self.flagName(error.field), message: error.message)
        }
        let data = try JSONCoding.encoder.encode(body)
        var properties = MessageProperties(contentType: "application/json")
        properties.messageID = jobID.description
        properties.appID = "astroctl"
        let message = OutgoingMessage(
            exchange: JobCommands.exchange(for: .chartCalculate),
            routingKey: JobType.chartCalculate.rawValue,
            body: data,
            properties: properties
        )
        guard wait else {
            try await connection.withPublisher { try await $0.publish(message) }
            print(jobID)
            return
        }
        let event = try await EventWaiter.publishAndWait(
            message,
            jobID: jobID,
            events: [.chartCalculated, .chartFailed],
            timeout: .seconds(timeout),
            connection: connection
        )
        if let error = event["error"] {
            throw CommandFailure(
                "chart job \(jobID) failed: \(error["code"]?.stringValue ?? "?"): \(error["message"]?.stringValue ?? "")"
            )
        }
        guard let chartID = event["chartId"]?.stringValue.flatMap({ UUID(text: $0) }) else {
            throw CommandFailure("the chart.calculated event of \(jobID) carries no chartId")
        }
        let stored = try await connection.withPool(size: 1) { pool in
            try await pool.withConnection { database -> String? in
                try database.query("SELECT chart_data::text AS chart FROM birth_charts WHERE id = $1", [chartID]).first?
                    .decode(String.self, "chart")
            }
        }
        guard let stored else { throw CommandFailure("chart \(chartID) is not in the database") }
        if json {
            print(stored)
        } else {
            let chart = try JSONCoding.decoder.decode(NatalChart.self, from: Data(stored.utf8))
            print(
                "job \(jobID): profile \(event["profileId"]?.stringValue ?? "?"), chart \(chartID.lowercasedText)"
            )
            print(Terminal.safe(ChartTable.render(chart, name: name)))
        }
    }

    /// The command-line flag for a field path of the job body.
    static func flagName(_ field: String) -> String {
        switch field {
        case "profile.birthDate": return "--date"
        case "profile.birthTime": return "--time"
        case "profile.timezone": return "--tz"
        case "profile.latitude": return "--lat"
        case "profile.longitude": return "--lon"
        case "profile.name": return "--name"
        case "profile.locationName": return "--location"
        case "profile.id": return "--profile"
        case "houseSystem": return "--house-system"
        case "dstPolicy": return "--dst-policy"
        case "points": return "--points"
        case "sidereal": return "--sidereal"
        case "userId": return "--user"
        default: return field.isEmpty ? "input" : field
        }
    }

    /// Invalid input: one line on standard error, exit status 2.
    static func fail(field: String, message: String) -> Never {
        FileHandle.standardError.write(Data("astroctl chart: \(field): \(withoutFieldPrefix(message))\n".utf8))
        Foundation.exit(2)
    }

    /// The engine's messages start with the body's field path (`profile.latitude: …`); the flag
    /// already names the field, so that prefix is dropped.
    static func withoutFieldPrefix(_ message: String) -> String {
        let parts = message.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, !parts[0].contains(" ") else { return message }
        return parts[1].trimmingCharacters(in: .whitespaces)
    }
}

/// Publishes a job and waits for the event that reports its outcome.
enum EventWaiter {
    static func publishAndWait(
        _ message: OutgoingMessage,
        jobID: JobID,
        events: [EventType],
        timeout: Duration,
        connection: ConnectionOptions
    ) async throws -> JSONValue {
        let amqp = try connection.amqpConfiguration()
        let logger = connection.logger
        let queue = "astroctl.wait.\(jobID.description.prefix(8)).\(UUID().lowercasedText.prefix(4))"
        let publisher = AMQPPublisher(configuration: amqp, logger: logger)
        try await publisher.connect()
        // Bind before publishing, so even an instant worker cannot finish unseen.
        try await publisher.declare(
            Topology(
                queues: [QueueSpec(name: queue, durable: false, autoDelete: true, messageTTL: .seconds(600))],
                bindings: events.map {
                    BindingSpec(queue: queue, exchange: BrokerNames.eventsExchange, routingKey: $0.rawValue)
                }
            )
        )
        let consumer = AMQPConsumer(
            configuration: amqp,
            topology: .empty,
            queues: [queue],
            prefetch: 50,
            logger: logger
        )
        try await consumer.start()
        do {
            try await publisher.publish(message)
        } catch {
            // (A `catch where` on this typed error crashes the 6.3.1 compiler in this function.)
            let unroutable = error.kind == .unroutable
            await consumer.close()
            try? await publisher.deleteQueue(queue)
            await publisher.close()
            if unroutable {
                throw CommandFailure("no queue is bound for \(message.routingKey): run `astroctl migrate` first")
            }
            throw error
        }
        FileHandle.standardError.write(Data("published job \(jobID); waiting for the worker…\n".utf8))
        let found = Mutex<JSONValue?>(nil)
        let listener = Task {
            for await delivery in consumer.deliveries {
                try? await consumer.ack(delivery)
                guard let event = try? JSONValue.parse(delivery.body),
                    event["jobId"]?.stringValue == jobID.description
                else { continue }
                found.withLock { $0 = event }
                return
            }
        }
        let deadline = ContinuousClock.now + timeout
        while found.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        listener.cancel()
        await consumer.close()
        try? await publisher.deleteQueue(queue)
        await publisher.close()
        guard let event = found.withLock({ $0 }) else {
            throw CommandFailure(
                "no outcome for job \(jobID) within \(timeout): is a worker running? (`astroctl job \(jobID)`)"
            )
        }
        return event
    }
}

/// The readable chart table: `Sun  21°46'49" Libra  H9  R`.
enum ChartTable {
    static func degrees(_ longitude: Double) -> String {
        // A stored chart is read back from the database: any number prints, none traps.
        guard longitude.isFinite else { return "  ?°??'??\"" }
        let inSign = longitude.truncatingRemainder(dividingBy: 30)
        var totalSeconds = Int((inSign * 3600).rounded(.down))
        let d = totalSeconds / 3600
        totalSeconds %= 3600
        return String(format: "%2d°%02d'%02d\"", d, totalSeconds / 60, totalSeconds % 60)
    }

    static func orb(_ value: Double) -> String {
        guard let minutes = Int(exactly: (value * 60).rounded()), abs(minutes) < 1_000_000 else { return "?°??'" }
        return String(format: "%d°%02d'", minutes / 60, minutes % 60)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    static func render(_ chart: NatalChart, name: String) -> String {
        var lines: [String] = []
        let place = chart.locationName.isEmpty ? "" : ", \(chart.locationName)"
        lines.append("\(name): \(chart.birthDate) \(chart.birthTime) \(chart.timezone)\(place)")
        lines.append(
            String(
                format: "UTC %@  JD %.6f  lat %.4f  lon %.4f",
                ISO8601.string(from: chart.utc),
                chart.julianDayUT,
                chart.latitude,
                chart.longitude
            )
        )
        var system = "houses: \(chart.houseSystem.rawValue)"
        if let requested = chart.houseSystemRequested { system += " (requested \(requested.rawValue))" }
        lines.append(system + "  zodiac: \(chart.zodiac.rawValue)")
        lines.append("")
        for planet in chart.planets {
            lines.append(
                pad(planet.name.rawValue, 11) + degrees(planet.longitude) + " " + pad(planet.sign.rawValue, 12)
                    + "H\(planet.house)"
                    + (planet.isRetrograde ? (planet.house < 10 ? "  R" : " R") : "")
            )
        }
        for point in chart.points ?? [] {
            lines.append(
                pad(point.name.rawValue, 11) + degrees(point.longitude) + " " + pad(point.sign.rawValue, 12)
                    + "H\(point.house)"
                    + (point.isRetrograde ? (point.house < 10 ? "  R" : " R") : "")
            )
        }
        lines.append("")
        lines.append(pad("Asc", 11) + degrees(chart.ascendant) + " " + ZodiacSign(longitude: chart.ascendant).rawValue)
        lines.append(pad("MC", 11) + degrees(chart.midheaven) + " " + ZodiacSign(longitude: chart.midheaven).rawValue)
        lines.append("")
        for house in chart.houses {
            lines.append(pad("House \(house.number)", 11) + degrees(house.cusp) + " " + house.sign.rawValue)
        }
        if !chart.aspects.isEmpty {
            lines.append("")
            for aspect in chart.aspects {
                lines.append(
                    pad("\(aspect.planet1.rawValue) \(aspect.type.rawValue) \(aspect.planet2.rawValue)", 30) + "orb "
                        + orb(aspect.orb) + (aspect.isApplying ? "  applying" : "  separating")
                )
            }
        }
        for warning in chart.warnings {
            lines.append("")
            lines.append("warning \(warning.code): \(warning.message)")
        }
        return lines.joined(separator: "\n")
    }
}
