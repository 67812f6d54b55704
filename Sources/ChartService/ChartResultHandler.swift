import AstroDomain
import ChartEngine
import ChartWheel
import Foundation
import Postgres
import UUIDText
import WorkerRuntime

/// The chart-worker's result jobs: `chart.synastry`, `chart.transits`, `chart.return` and
/// `chart.render` (CONTRACT.md "Chart results").
///
/// `prepare` reads the input charts (the job's user's profiles only), derives the result's id
/// from everything the result depends on (`ChartResultID`), and computes only when no row has
/// that id yet and the user's `ChartResultQuota` allows another; the ephemeris work runs on the
/// engine's own threads. `commit` then stores the row (checking the quota again, in the job's
/// transaction; or, for a cached result, only touches `last_used_at`) and emits `chart.computed`.
/// Transit results are stored in their compact form (`TransitReport.compactJSON`).
public struct ChartResultHandler: JobHandler {
    public let jobType: JobType
    private let engine: ChartEngine
    private let pool: PostgresPool
    private let quota: ChartResultQuota

    /// - Parameters:
    ///   - jobType: one of `JobType.chartResultJobs`.
    ///   - quota: the most results one user may have computed within 24 hours.
    public init(jobType: JobType, engine: ChartEngine, pool: PostgresPool, quota: ChartResultQuota = .init()) {
        precondition(JobType.chartResultJobs.contains(jobType), "not a chart result job: \(jobType)")
        self.jobType = jobType
        self.engine = engine
        self.pool = pool
        self.quota = quota
    }

    /// One handler per chart result job type.
    public static func all(
        engine: ChartEngine,
        pool: PostgresPool,
        quota: ChartResultQuota = .init()
    ) -> [ChartResultHandler] {
        JobType.chartResultJobs.map { ChartResultHandler(jobType: $0, engine: engine, pool: pool, quota: quota) }
    }

    /// The quota from the chart-worker's environment (`CHART_RESULT_DAILY_QUOTA`).
    /// - Throws: `ConfigurationError` naming the variable.
    public static func quota(from environment: [String: String]) throws(ConfigurationError) -> ChartResultQuota {
        do {
            return try ChartResultQuota(setting: environment[ChartResultQuota.variable])
        } catch {
            throw ConfigurationError(variable: ChartResultQuota.variable, problem: error.problem)
        }
    }

    /// What a job stores: a new row, or the id of a row already stored.
    public struct Prepared: Sendable {
        var userID: UserID
        var resultID: UUID
        var kind: ChartResultKind
        /// `nil` when the row was already stored when the job was prepared.
        var row: ChartResultRow?
    }

    /// Decodes the body, reads the input charts, and computes the result unless it is stored.
    /// - Throws: `JobRejection` with a `ChartJobError` code (bad body, `profile-not-found`,
    ///   `chart-not-found`, `zodiac-mismatch`, …) or an engine code for input the engine refuses;
    ///   `PostgresError` (classified by the runtime) and ephemeris outages (retried).
    public func prepare(_ job: JobEnvelope) async throws -> Prepared {
        do {
            switch jobType {
            case .chartSynastry: return try await prepareSynastry(ChartSynastryRequest.decode(from: job.body))
            case .chartTransits: return try await prepareTransits(ChartTransitsRequest.decode(from: job.body))
            case .chartReturn: return try await prepareReturn(ChartReturnRequest.decode(from: job.body))
            default: return try await prepareRender(ChartRenderRequest.decode(from: job.body), job: job)
            }
        } catch let error as ChartJobError {
            throw JobRejection(
                code: error.code.rawValue,
                message: error.message,
                publicReason: "\(error.field) refused"
            )
        }
    }

    public func commit(_ prepared: Prepared, job: JobEnvelope, database: PostgresConnection) throws -> JobOutcome {
        var cached = prepared.row == nil
        if let row = prepared.row {
            // Jobs prepared side by side all passed the quota before computing; the count of
            // those committed since is read again here (in this job's transaction).
            try Self.checkQuota(quota, user: prepared.userID, database: database)
            do {
                // A job of the same inputs may have stored it meanwhile: that row stands.
                let inserted = try row.insert(database: database)
                cached = !inserted
            } catch let error as PostgresError where error.sqlState == "23503" {
                // A profile deleted since `prepare` read it.
                throw JobRejection(
                    code: .profileNotFound,
                    message: "the profile was deleted while its result was computed"
                )
            }
        } else {
            let touched = try database.execute(
                "UPDATE chart_results SET last_used_at = now() WHERE id = $1",
                [prepared.resultID]
            )
            // Deleted by retention between `prepare` and now: the next attempt computes it.
            if touched == 0 { throw ChartResultVanished(id: prepared.resultID) }
        }
        let fields: [String: JSONValue] = [
            "userId": .string(prepared.userID.description),
            "resultId": .string(prepared.resultID.lowercasedText),
            "kind": .string(prepared.kind.rawValue),
            "cached": .bool(cached),
        ]
        let event = JobEvent(jobID: job.jobID, userID: prepared.userID, type: .chartComputed, fields: fields)
        return JobOutcome(
            result: .object(fields),
            messages: [try .event(event)],
            measurements: [
                BusinessMeasurement(.chartResults, [prepared.kind.rawValue, cached ? "cached" : "computed"])
            ]
        )
    }

    // MARK: The four jobs

    private func prepareSynastry(_ request: ChartSynastryRequest) async throws -> Prepared {
        let (a, loadedB) = try await load(request.profileID, partner: request.partnerProfileID, user: request.userID)
        // `load` returns the partner's chart whenever it is given a partner.
        guard let b = loadedB else { preconditionFailure("load returned no partner chart") }
        let id = ChartResultID.derive(
            user: request.userID,
            profile: request.profileID,
            kind: .synastry,
            parameters: request.parameters,
            inputDigests: [a.digest, b.digest]
        )
        var prepared = Prepared(userID: request.userID, resultID: id, kind: .synastry, row: nil)
        if try await isStored(id) { return prepared }
        try await checkQuota(user: request.userID)
        let document = try await Self.synastryDocument(
            a.chart,
            b.chart,
            angleMaxOrb: request.angleMaxOrb,
            engine: engine
        )
        prepared.row = try ChartResultRow(
            id: id,
            request: (request.userID, request.profileID, request.partnerProfileID),
            kind: .synastry,
            parameters: request.parameters,
            result: document
        )
        return prepared
    }

    /// The synastry result document: `{synastry, compatibility, composite, davison}`. A composite
    /// or Davison chart the engine cannot cast for these two (sidereal composite, birthplaces
    /// exactly antipodal) is `null` with its reason in `compositeError`/`davisonError`; the rest
    /// of the document stands.
    /// - Throws: `ChartJobError` `zodiac-mismatch`/`unsupported-chart`, or the engine's
    ///   transient errors.
    static func synastryDocument(
        _ a: NatalChart,
        _ b: NatalChart,
        angleMaxOrb: Double?,
        engine: ChartEngine
    ) async throws -> JSONValue {
        let synastry: Synastry
        do {
            synastry = try ChartEngine.synastry(a, b, options: SynastryOptions(angleMaxOrb: angleMaxOrb))
        } catch {
            throw relationshipRejection(error)
        }
        var document: [String: JSONValue] = [
            "synastry": try jsonValue(synastry),
            "compatibility": try jsonValue(CompatibilityScoring.score(synastry)),
        ]
        do {
            document["composite"] = try jsonValue(try await engine.composite(a, b))
        } catch let error as RelationshipChartError where error.isPermanent {
            document["composite"] = .null
            document["compositeError"] = .object(["code": .string(error.code), "message": .string(error.message)])
        }
        do {
            document["davison"] = try jsonValue(try await engine.davison(a, b))
        } catch let error as RelationshipChartError where error.isPermanent {
            document["davison"] = .null
            document["davisonError"] = .object(["code": .string(error.code), "message": .string(error.message)])
        }
        return .object(document)
    }

    private func prepareTransits(_ request: ChartTransitsRequest) async throws -> Prepared {
        let (natal, _) = try await load(request.profileID, user: request.userID)
        let id = ChartResultID.derive(
            user: request.userID,
            profile: request.profileID,
            kind: .transits,
            parameters: request.parameters,
            inputDigests: [natal.digest]
        )
        var prepared = Prepared(userID: request.userID, resultID: id, kind: .transits, row: nil)
        if try await isStored(id) { return prepared }
        try await checkQuota(user: request.userID)
        let report: TransitReport
        do {
            report = try await engine.transits(for: natal.chart, from: request.from, to: request.to)
        } catch {
            throw Self.transitRejection(error, field: "to")
        }
        prepared.row = try ChartResultRow(
            id: id,
            request: (request.userID, request.profileID, nil),
            kind: .transits,
            parameters: request.parameters,
            result: try Self.compact(report)
        )
        return prepared
    }

    private func prepareReturn(_ request: ChartReturnRequest) async throws -> Prepared {
        let (natal, _) = try await load(request.profileID, user: request.userID)
        let kind = request.kind.resultKind
        let id = ChartResultID.derive(
            user: request.userID,
            profile: request.profileID,
            kind: kind,
            parameters: request.parameters,
            inputDigests: [natal.digest]
        )
        var prepared = Prepared(userID: request.userID, resultID: id, kind: kind, row: nil)
        if try await isStored(id) { return prepared }
        try await checkQuota(user: request.userID)
        let birth = Self.birthData(of: natal.chart, name: natal.name)
        let result: JSONValue
        switch request.kind {
        case .solarReturn:
            let place = request.place.map {
                ChartPlace(latitude: $0.latitude, longitude: $0.longitude, locationName: $0.locationName)
            }
            let solarReturn: SolarReturn
            do {
                solarReturn = try await engine.solarReturn(for: birth, year: request.year ?? 0, place: place)
            } catch {
                throw Self.transitRejection(error, field: "year")
            }
            result = try Self.jsonValue(solarReturn)
        case .progressed:
            let progressed: ProgressedChart
            do {
                progressed = try await engine.progressed(for: birth, target: request.date ?? Date())
            } catch {
                throw Self.transitRejection(error, field: "date")
            }
            result = try Self.jsonValue(progressed)
        }
        prepared.row = try ChartResultRow(
            id: id,
            request: (request.userID, request.profileID, nil),
            kind: kind,
            parameters: request.parameters,
            result: result
        )
        return prepared
    }

    private func prepareRender(_ request: ChartRenderRequest, job: JobEnvelope) async throws -> Prepared {
        var request = request
        if request.wheel == .transits {
            // The sky is cast to the minute (the birth-data shape), so `at` is kept to the minute;
            // without one it is when the job runs, and a retry may then store another wheel.
            let at = request.at ?? job.receivedAt
            request.at = Date(timeIntervalSince1970: (at.timeIntervalSince1970 / 60).rounded(.down) * 60)
            try ChartRenderRequest.validateAt(request.at ?? at)
        }
        let (inner, outer) = try await load(request.profileID, partner: request.partnerProfileID, user: request.userID)
        // The names are drawn, so they are inputs too (a chart's digest leaves the name out).
        let id = ChartResultID.derive(
            user: request.userID,
            profile: request.profileID,
            kind: .wheel,
            parameters: request.parameters,
            inputDigests: [inner.digest] + (outer.map { [$0.digest] } ?? []),
            wheel: (ChartWheel.version, [inner.name] + (outer.map { [$0.name] } ?? []))
        )
        var prepared = Prepared(userID: request.userID, resultID: id, kind: .wheel, row: nil)
        if try await isStored(id) { return prepared }
        try await checkQuota(user: request.userID)
        let theme: WheelTheme = request.theme == .dark ? .dark : .light
        let input: WheelInput
        switch request.wheel {
        case .natal:
            input = .natal(inner.chart, name: inner.name, theme: theme)
        case .synastry:
            guard let outer else { preconditionFailure("a synastry wheel's request has a partner") }
            input = try Self.synastryWheel(inner, outer, theme: theme)
        case .transits:
            let at = request.at ?? job.receivedAt
            let sky = try await skyChart(at: at, natal: inner.chart)
            let label =
                "Transits " + String(ChartJobInstant.text(at).prefix(16)).replacingOccurrences(of: "T", with: " ")
            input = .biWheel(
                inner: inner.chart,
                innerName: inner.name,
                outer: sky,
                outerName: label + " UTC",
                title: "\(inner.name) — natal chart with transits",
                theme: theme
            )
        }
        let svg: String
        do {
            svg = try ChartWheel.svg(input)
        } catch {
            throw ChartJobError(.unsupportedChart, field: "profileId", message: "the wheel cannot be drawn: \(error)")
        }
        guard svg.utf8.count <= ChartResultLimits.maxSVGBytes else {
            throw ChartJobError(
                .svgTooLarge,
                field: "wheel",
                message: "the wheel is \(svg.utf8.count) bytes, more than \(ChartResultLimits.maxSVGBytes)"
            )
        }
        prepared.row = ChartResultRow(
            id: id,
            userID: request.userID.uuid,
            profileID: request.profileID.uuid,
            partnerProfileID: request.partnerProfileID?.uuid,
            kind: .wheel,
            parametersJSON: request.parameters.jsonString(),
            resultJSON: nil,
            svg: svg,
            bytes: svg.utf8.count
        )
        return prepared
    }

    /// The synastry bi-wheel: the cross-aspect lines are the synastry's own planet-to-planet
    /// aspects (the same orbs as the stored synastry), so the picture and the table agree.
    static func synastryWheel(_ inner: LoadedChart, _ outer: LoadedChart, theme: WheelTheme) throws -> WheelInput {
        guard inner.chart.zodiac == outer.chart.zodiac else {
            throw ChartJobError(
                .zodiacMismatch,
                field: "partnerProfileId",
                message: "the profiles' charts are in different zodiacs (\(inner.chart.zodiac.rawValue), "
                    + "\(outer.chart.zodiac.rawValue))"
            )
        }
        let synastry: Synastry
        do {
            synastry = try ChartEngine.synastry(inner.chart, outer.chart)
        } catch {
            throw relationshipRejection(error)
        }
        let cross = synastry.aspects.compactMap { aspect -> WheelAspect? in
            guard case .planet(let first) = aspect.a.point, case .planet(let second) = aspect.b.point else {
                return nil
            }
            return WheelAspect(first: first.rawValue, second: second.rawValue, type: aspect.type, orb: aspect.orb)
        }
        return .biWheel(
            inner: inner.chart,
            innerName: inner.name,
            outer: outer.chart,
            outerName: outer.name,
            title: "\(inner.name) (inner) and \(outer.name) (outer) — synastry",
            crossAspects: cross,
            theme: theme
        )
    }

    /// The sky at `at` (to the minute) at the natal place, in the natal chart's zodiac and
    /// house system.
    private func skyChart(at: Date, natal: NatalChart) async throws -> NatalChart {
        let text = ChartJobInstant.text(at)
        let birth = BirthData(
            name: "Transits",
            birthDate: String(text.prefix(10)),
            birthTime: String(text.dropFirst(11).prefix(5)),
            timezone: "Etc/UTC",
            latitude: natal.latitude,
            longitude: natal.longitude,
            locationName: "",
            houseSystem: natal.houseSystemRequested ?? natal.houseSystem,
            zodiac: natal.zodiac
        )
        do {
            return try await engine.chart(for: birth)
        } catch {
            if error.isPermanent {
                throw ChartJobError(.invalidRange, field: "at", message: "at: \(error.message)")
            }
            throw error
        }
    }

    // MARK: Reading the input charts

    /// A stored chart of one of the job user's profiles.
    struct LoadedChart: Sendable {
        var chart: NatalChart
        var digest: String
        var name: String
    }

    /// The stored charts of a job's profile and partner, after `ProfileChartRule` (both the
    /// job user's, both charts stored, one zodiac).
    /// - Throws: `ChartJobError` with the rule's code, or `chart-unreadable` /
    ///   `partner-chart-unreadable` for a stored chart that does not decode; `PostgresError`.
    private func load(
        _ profile: ProfileID,
        partner: ProfileID? = nil,
        user: UserID
    ) async throws -> (LoadedChart, LoadedChart?) {
        let rows = try await pool.withConnection { database in
            try database.query(
                """
                SELECT p.id, p.user_id, p.name, c.chart_data::text AS chart, c.input_digest,
                    coalesce(c.chart_data->>'zodiac', 'tropical') AS zodiac
                FROM user_profiles AS p LEFT JOIN birth_charts AS c ON c.profile_id = p.id
                WHERE p.id = $1 OR p.id = $2
                """,
                [profile.uuid, (partner ?? profile).uuid]
            ).map {
                (
                    id: try $0.decode(UUID.self, "id"), user: try $0.decode(UUID.self, "user_id"),
                    name: try $0.decode(String.self, "name"), chart: try $0.decode(String?.self, "chart"),
                    digest: try $0.decode(String?.self, "input_digest"), zodiac: try $0.decode(String.self, "zodiac")
                )
            }
        }
        func facts(_ id: ProfileID?) -> ProfileChartFacts? {
            guard let id, let row = rows.first(where: { $0.id == id.uuid }) else { return nil }
            return ProfileChartFacts(
                owner: UserID(row.user),
                chartZodiac: row.chart != nil && row.digest != nil ? row.zodiac : nil
            )
        }
        if let refusal = ProfileChartRule.check(
            caller: user,
            profileID: profile,
            profile: facts(profile),
            partnerID: partner,
            partner: facts(partner)
        ) {
            throw ChartJobError(refusal.code, field: refusal.field, message: refusal.message)
        }
        func loaded(_ id: ProfileID, role: ProfileRole) throws -> LoadedChart {
            // The rule passed: the row and its chart are there.
            let row = rows.first { $0.id == id.uuid }!
            do {
                let chart = try JSONCoding.decoder.decode(NatalChart.self, from: Data(row.chart!.utf8))
                return LoadedChart(chart: chart, digest: row.digest!, name: row.name)
            } catch {
                throw ChartJobError(
                    role == .profile ? .chartUnreadable : .partnerChartUnreadable,
                    field: role.field,
                    message: "\(role.field): the stored chart of profile \(id) cannot be read"
                )
            }
        }
        return (try loaded(profile, role: .profile), try partner.map { try loaded($0, role: .partner) })
    }

    /// Refuses a computation beyond the user's quota, before any ephemeris work.
    /// - Throws: `ChartJobError` `chart-quota-exceeded`; `PostgresError`.
    private func checkQuota(user: UserID) async throws {
        guard quota.limit != nil else { return }
        let quota = self.quota
        try await pool.withConnection { database in try Self.checkQuota(quota, user: user, database: database) }
    }

    /// The user's results computed within the window (`chart_results_computed`, migration 0034:
    /// the query the gateway runs too) against the quota.
    /// - Throws: `ChartJobError` `chart-quota-exceeded` (as `JobRejection` from `commit`, which
    ///   `prepare`'s caller converts); `PostgresError`.
    static func checkQuota(_ quota: ChartResultQuota, user: UserID, database: PostgresConnection) throws {
        guard quota.limit != nil else { return }
        let row = try database.query(
            "SELECT computed, oldest FROM chart_results_computed($1, $2)",
            [user.uuid, Double(ChartResultQuota.windowSeconds)]
        ).first
        let computed = try row?.decode(Int.self, "computed") ?? 0
        guard !quota.allowsAnother(computed: computed) else { return }
        let oldest = try row?.decode(Date?.self, "oldest")
        let error = quota.refusal(retryAfter: ChartResultQuota.retryAfter(oldest: oldest, now: Date()))
        throw JobRejection(code: error.code.rawValue, message: error.message)
    }

    private func isStored(_ id: UUID) async throws -> Bool {
        try await pool.withConnection { database in
            !(try database.query("SELECT 1 FROM chart_results WHERE id = $1", [id]).isEmpty)
        }
    }

    // MARK: Helpers

    /// The birth data a stored chart was cast from (the chart carries all of it but the name).
    static func birthData(of chart: NatalChart, name: String) -> BirthData {
        BirthData(
            name: name,
            birthDate: chart.birthDate,
            birthTime: chart.birthTime,
            timezone: chart.timezone,
            latitude: chart.latitude,
            longitude: chart.longitude,
            locationName: chart.locationName,
            houseSystem: chart.houseSystemRequested ?? chart.houseSystem,
            dstPolicy: chart.dstPolicyApplied,
            points: chart.points?.map(\.name) ?? [],
            zodiac: chart.zodiac
        )
    }

    /// A transit report's stored (compact) form.
    /// - Throws: `JobRejection` `unsupported-chart` for a report the form cannot hold (the
    ///   engine gives none).
    static func compact(_ report: TransitReport) throws -> JSONValue {
        do {
            return try report.compactJSON()
        } catch {
            throw ChartJobError(
                .unsupportedChart,
                field: "profileId",
                message: "the transits cannot be stored: \(error)"
            )
        }
    }

    static func jsonValue(_ value: some Encodable) throws -> JSONValue {
        try JSONValue.parse(JSONCoding.encoder.encode(value))
    }

    static func relationshipRejection(_ error: RelationshipChartError) -> any Error {
        guard error.isPermanent else { return error }
        if case .zodiacMismatch = error {
            return ChartJobError(.zodiacMismatch, field: "partnerProfileId", message: error.message)
        }
        return ChartJobError(.unsupportedChart, field: "profileId", message: "\(error.code): \(error.message)")
    }

    /// Engine range errors as `invalid-range`/`invalid-year`; a stored chart the engine refuses
    /// as `unsupported-chart`; an ephemeris outage as itself (retried).
    static func transitRejection(_ error: TransitError, field: String) -> any Error {
        switch error {
        case .chart(let chart):
            guard chart.isPermanent else { return chart }
            return ChartJobError(.unsupportedChart, field: "profileId", message: "\(chart.code): \(chart.message)")
        default:
            return ChartJobError(field == "year" ? .invalidYear : .invalidRange, field: field, message: error.message)
        }
    }
}

/// A cached result's row was deleted (retention) between `prepare` and `commit`: retried, and the
/// next attempt computes it again.
struct ChartResultVanished: RetryClassifiedError, CustomStringConvertible {
    var id: UUID
    var failureCode: String { ErrorCode.chartResultVanished.rawValue }
    var isTransient: Bool { true }
    var description: String { "chart result \(id.lowercasedText) was deleted before it could be used" }
}
