import AstroDomain
import Foundation
import Hummingbird
import Postgres
import UUIDText

// The chart-worker's jobs beyond the natal chart (issue 20, part 8), requested by the app:
// `POST /v1/profiles/{id}/synastry|transits|returns|wheels` queue `chart.synastry`,
// `chart.transits`, `chart.return` and `chart.render` for the caller, and
// `GET /v1/chart-results/{id}` serves what they stored. A request is checked here as the job
// checks it (the same AstroDomain validation, so the same codes) and against the database
// (both profiles the caller's, both charts stored, the same zodiac), so a request that cannot
// succeed never becomes a job; the worker checks it all again, since astroctl publishes these
// jobs too. A result's id is derived from its content (CONTRACT.md "Chart results"), so it
// never changes meaning: its `ETag` is the id and clients may keep it.

extension GatewayRoutes {
    /// The body members each route takes (the job's other members come from the token and the
    /// path).
    static let chartJobMembers: [JobType: Set<String>] = [
        .chartSynastry: ["partnerProfileId", "angleMaxOrb"],
        .chartTransits: ["from", "to"],
        .chartReturn: ["kind", "year", "date", "place"],
        .chartRender: ["wheel", "partnerProfileId", "at", "theme"],
    ]

    /// The largest body these routes read: their members are a few short fields.
    static let maxChartJobBodyBytes = 4096

    /// A refused body as the API answers it: 400 `invalid-json` for a body that is not an
    /// object, 422 with the job's code and field for anything else.
    static func chartJobProblem(_ error: ChartJobError) -> Problem {
        Problem(error.code, error.message, field: error.field.isEmpty ? nil : error.field)
    }

    // MARK: Results

    /// How long a client may keep a result without asking: its id names its content, so it
    /// never changes, but it can be deleted (the profile, retention), so not forever.
    static let chartResultMaxAge = 3600

    /// `format`: `json`, `svg` or absent (the result's own type).
    /// - Throws: `Problem` 400 `invalid-format` for anything else, or more than one.
    static func resultFormat(_ request: Request) throws -> String? {
        if let query = request.uri.query, query.utf8.count > maxWheelQueryBytes {
            throw Problem(.invalidQuery, "the query string is over \(maxWheelQueryBytes) bytes")
        }
        let values = request.uri.queryParameters.getAll("format")
        guard let text = values.first else { return nil }
        guard values.count == 1, text == "json" || text == "svg" else {
            throw Problem(.invalidFormat, "format: json or svg", field: "format")
        }
        return text
    }
}

extension GatewayRoutes {
    /// `ProfileChartRule` for a request about the caller's profile (and a partner): one query
    /// feeding the rule, as the workers check it again.
    /// - Throws: `Problem` with the rule's code and field: 404 `profile-not-found` /
    ///   `partner-not-found` (unknown, deleted and other users' ids alike), 409 `chart-not-found` /
    ///   `partner-chart-not-found` before a chart is stored, 422 `same-profile` /
    ///   `zodiac-mismatch`; 503 `database-unavailable`.
    static func checkProfiles(
        _ profile: ProfileID,
        partner: ProfileID?,
        user: UserID,
        resources: ResourceStore,
        context: GatewayRequestContext
    ) async throws {
        let facts = try await database(context) {
            try await resources.profileChartFacts([profile] + (partner.map { [$0] } ?? []))
        }
        if let refusal = ProfileChartRule.check(
            caller: user,
            profileID: profile,
            profile: facts[profile],
            partnerID: partner,
            partner: partner.flatMap { facts[$0] }
        ) {
            throw Problem.profileChart(refusal)
        }
    }
}

extension ChartSynastryRequest {
    /// The body with `jobID` as its job id.
    func json(with jobID: JobID) -> JSONValue {
        var job = self
        job.jobID = jobID
        return job.json
    }
}

extension ChartTransitsRequest {
    /// The body with `jobID` as its job id.
    func json(with jobID: JobID) -> JSONValue {
        var job = self
        job.jobID = jobID
        return job.json
    }
}

extension ChartReturnRequest {
    /// The body with `jobID` as its job id.
    func json(with jobID: JobID) -> JSONValue {
        var job = self
        job.jobID = jobID
        return job.json
    }
}

extension ChartRenderRequest {
    /// The body with `jobID` as its job id.
    func json(with jobID: JobID) -> JSONValue {
        var job = self
        job.jobID = jobID
        return job.json
    }
}

extension ResourceStore {
    /// What `ProfileChartRule` needs of `ids` (at most two): each profile's owner and its chart's
    /// zodiac, in one statement (the billing-worker's `CreditLedger.checkProfiles` reads the same).
    /// An unknown or deleted id is absent.
    /// - Throws: `PostgresError`.
    func profileChartFacts(_ ids: [ProfileID]) async throws -> [ProfileID: ProfileChartFacts] {
        precondition((1...2).contains(ids.count))
        return try await pool.withConnection { database -> [ProfileID: ProfileChartFacts] in
            var facts: [ProfileID: ProfileChartFacts] = [:]
            for row in try database.query(
                """
                SELECT p.id, p.user_id, CASE WHEN c.id IS NULL THEN NULL
                    ELSE coalesce(c.chart_data->>'zodiac', 'tropical') END AS zodiac
                FROM user_profiles p LEFT JOIN birth_charts c ON c.profile_id = p.id
                WHERE p.id = $1 OR p.id = $2
                """,
                [ids[0].uuid, ids.last!.uuid]
            ) {
                facts[ProfileID(try row.decode(UUID.self, "id"))] = ProfileChartFacts(
                    owner: UserID(try row.decode(UUID.self, "user_id")),
                    chartZodiac: try row.decode(String?.self, "zodiac")
                )
            }
            return facts
        }
    }

    /// A stored chart result as `GET /v1/chart-results/{id}` serves it.
    struct ChartResultView: Sendable, Equatable {
        var kind: String
        /// The JSON document (`resultId`, `id` (its old name, for one release), `kind`,
        /// `profileId`, `partnerProfileId`, `parameters`,
        /// `createdAt`, `result` or `svg`), built by PostgreSQL from the stored `jsonb` without
        /// parsing it here.
        var jsonText: String
        /// A wheel's SVG.
        var svg: String?
        /// A transit result's stored document (compact, or full for rows stored before the
        /// compact form), which `jsonText` still lacks as its `result`.
        var transitsText: String?
    }

    /// The caller's result `id` (touching its `last_used_at`, at most once an hour, for the
    /// retention of unused results, and setting `read_at` the first time, for the retention of
    /// unread ones); `nil` when there is no such result of the caller.
    /// - Throws: `PostgresError`.
    func chartResult(_ id: UUID, user: UserID) async throws -> ChartResultView? {
        try await pool.withConnection { database -> ChartResultView? in
            guard
                let row = try database.query(
                    """
                    WITH touched AS (
                        UPDATE chart_results SET last_used_at = CASE
                                WHEN last_used_at < now() - interval '1 hour' THEN now() ELSE last_used_at END,
                            read_at = coalesce(read_at, now())
                        WHERE id = $1 AND user_id = $2
                            AND (last_used_at < now() - interval '1 hour' OR read_at IS NULL)
                        RETURNING id
                    )
                    SELECT kind, svg, CASE WHEN kind = 'transits' THEN result::text END AS transits,
                        jsonb_build_object('resultId', id, 'id', id, 'kind', kind, 'profileId', profile_id,
                            'partnerProfileId', partner_profile_id, 'parameters', parameters,
                            'createdAt', to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                            'engineVersion', engine_version, 'bytes', bytes)
                        || CASE WHEN kind = 'transits' THEN '{}'::jsonb
                            WHEN svg IS NULL THEN jsonb_build_object('result', result)
                            ELSE jsonb_build_object('svg', svg) END AS document
                    FROM chart_results WHERE id = $1 AND user_id = $2
                    """,
                    [id, user.uuid]
                ).first
            else { return nil }
            return ChartResultView(
                kind: try row.decode(String.self, "kind"),
                jsonText: row.rawText("document") ?? "{}",
                svg: try row.decode(String?.self, "svg"),
                transitsText: row.rawText("transits")
            )
        }
    }

    /// The user's chart results computed within `ChartResultQuota.windowSeconds`, and when the
    /// oldest of them was (`chart_results_computed`, migration 0034: the chart-worker's query too).
    /// - Throws: `PostgresError`.
    func chartResultsComputed(user: UserID) async throws -> (computed: Int, oldest: Date?) {
        try await pool.withConnection { database -> (computed: Int, oldest: Date?) in
            let row = try database.query(
                "SELECT computed, oldest FROM chart_results_computed($1, $2)",
                [user.uuid, Double(ChartResultQuota.windowSeconds)]
            ).first
            return (try row?.decode(Int.self, "computed") ?? 0, try row?.decode(Date?.self, "oldest"))
        }
    }

    /// Whether the caller has result `id`, touching its `last_used_at` as `chartResult` does.
    /// - Throws: `PostgresError`.
    func touchChartResult(_ id: UUID, user: UserID) async throws -> Bool {
        try await pool.withConnection { database -> Bool in
            try !database.query(
                """
                WITH touched AS (
                    UPDATE chart_results SET last_used_at = CASE
                            WHEN last_used_at < now() - interval '1 hour' THEN now() ELSE last_used_at END,
                        read_at = coalesce(read_at, now())
                    WHERE id = $1 AND user_id = $2
                        AND (last_used_at < now() - interval '1 hour' OR read_at IS NULL)
                    RETURNING id
                )
                SELECT 1 FROM chart_results WHERE id = $1 AND user_id = $2
                """,
                [id, user.uuid]
            ).isEmpty
        }
    }
}

extension GatewayRoutes {
    /// Chart jobs beyond the natal chart (synastry, transits, returns, wheels) and their results.
    struct ChartJobs: GatewayController {
        let resources: ResourceStore
        let jobs: JobAcceptor
        let body: BodyReader
        let chartResultQuota: ChartResultQuota
        let metrics: GatewayMetrics

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.requestSynastry, use: requestSynastry)
            routes.authenticated(.requestTransits, use: requestTransits)
            routes.authenticated(.requestReturn, use: requestReturn)
            routes.authenticated(.requestWheel, use: requestWheel)
            routes.authenticated(.getChartResult, use: getChartResult)
        }

        /// `POST /v1/profiles/{id}/synastry`: `chart.synastry` of the profile and `partnerProfileId`.
        func requestSynastry(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            try await requestChartJob(.chartSynastry, route: "synastry", request, context: context) {
                (json: JSONValue) throws(ChartJobError) in
                let job = try ChartSynastryRequest(json: json)
                return (job.partnerProfileID, { job.json(with: $0) })
            }
        }

        /// `POST /v1/profiles/{id}/transits`: `chart.transits` for `from` … `to`.
        func requestTransits(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            try await requestChartJob(.chartTransits, route: "transits", request, context: context) {
                (json: JSONValue) throws(ChartJobError) in
                let job = try ChartTransitsRequest(json: json)
                return (nil, { job.json(with: $0) })
            }
        }

        /// `POST /v1/profiles/{id}/returns`: `chart.return` (a solar return or a progression).
        func requestReturn(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            try await requestChartJob(.chartReturn, route: "returns", request, context: context) {
                (json: JSONValue) throws(ChartJobError) in
                let job = try ChartReturnRequest(json: json)
                return (nil, { job.json(with: $0) })
            }
        }

        /// `POST /v1/profiles/{id}/wheels`: `chart.render` (a natal wheel or a bi-wheel).
        func requestWheel(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            try await requestChartJob(.chartRender, route: "wheels", request, context: context) {
                (json: JSONValue) throws(ChartJobError) in
                let job = try ChartRenderRequest(json: json)
                // The job ignores members its wheel does not use; here they are refused, so that a
                // request never means something other than what it says.
                if job.wheel != .synastry, json["partnerProfileId"] != nil {
                    throw ChartJobError(
                        .invalidFieldType,
                        field: "partnerProfileId",
                        message: "partnerProfileId: only the synastry wheel takes a partner"
                    )
                }
                if job.wheel != .transits, json["at"] != nil {
                    throw ChartJobError(.invalidFieldType, field: "at", message: "at: only the transits wheel takes at")
                }
                return (job.partnerProfileID, { job.json(with: $0) })
            }
        }

        /// What every chart job route does: the caller, the path's profile, the body checked by the
        /// job's own validation, both profiles checked in the database, then `accept` (idempotency,
        /// publish with confirm, 202).
        /// - Parameter validate: The job's validation of the whole body (with a provisional job id);
        ///   returns the partner profile, if any, and the body for the job id `accept` gives.
        func requestChartJob(
            _ kind: JobType,
            route: String,
            _ request: Request,
            context: GatewayRequestContext,
            validate: (JSONValue) throws(ChartJobError) -> (ProfileID?, @Sendable (JobID) -> JSONValue)
        ) async throws -> Response {
            let user = try context.user
            let profile = ProfileID(try pathID(context, "id"))
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request, limit: min(body.maxBytes, maxChartJobBodyBytes))
            var members = try GatewayRoutes.members(data, allowed: chartJobMembers[kind] ?? [], optionalBody: false)
            // The user comes from the token and the profile from the path; the job id is `accept`'s.
            members["jobId"] = .string(JobID.random().description)
            members["userId"] = .string(user.description)
            members["profileId"] = .string(profile.description)
            let partner: ProfileID?
            let jobBody: @Sendable (JobID) -> JSONValue
            do {
                (partner, jobBody) = try validate(.object(members))
            } catch {
                throw chartJobProblem(error)
            }
            try await checkProfiles(profile, partner: partner, user: user, context: context)
            try await checkQuota(user: user, context: context)
            return try await jobs.accept(
                kind,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(kind, path: "POST /v1/profiles/\(profile)/\(route)", data),
                context: context
            ) { jobID in
                (jobBody(jobID).jsonData(), JobAccepted(jobID))
            }
        }

        /// The caller's chart results computed within 24 hours against `ChartResultQuota` (the
        /// chart-worker checks again: this only spares the queue).
        /// - Throws: `Problem` 429 `chart-quota-exceeded` with `Retry-After` (when the oldest counted
        ///   result leaves the window).
        func checkQuota(user: UserID, context: GatewayRequestContext) async throws {
            let quota = chartResultQuota
            guard quota.limit != nil else { return }
            let (computed, oldest) = try await database(context) {
                try await resources.chartResultsComputed(user: user)
            }
            guard !quota.allowsAnother(computed: computed) else { return }
            let seconds = ChartResultQuota.retryAfter(oldest: oldest, now: Date())
            metrics.recordRateLimited(limit: "chart-results")
            throw Problem(ChartResultQuota.code, quota.refusal(retryAfter: seconds).message, retryAfter: seconds)
        }

        /// `ProfileChartRule` for the request's profiles (`GatewayRoutes.checkProfiles`).
        func checkProfiles(
            _ profile: ProfileID,
            partner: ProfileID?,
            user: UserID,
            context: GatewayRequestContext
        ) async throws {
            try await GatewayRoutes.checkProfiles(
                profile,
                partner: partner,
                user: user,
                resources: resources,
                context: context
            )
        }

        /// `GET /v1/chart-results/{id}`: a stored result of the caller: JSON kinds as
        /// `application/json`, wheels as `image/svg+xml` (`format=json` gives any result's JSON
        /// document, a wheel's with its SVG as a string). 304 for `If-None-Match` of its id, 404
        /// for no such result of the caller, 400 `invalid-format`.
        func getChartResult(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = try pathID(context, "id")
            let format = try resultFormat(request)
            let etag = "\"\(id.lowercasedText)\""
            var headers: HTTPFields = [
                .eTag: etag,
                .cacheControl: "private, max-age=\(chartResultMaxAge)",
                .init("X-Content-Type-Options")!: "nosniff",
            ]
            if let match = request.headers[.ifNoneMatch], ETagMatch.matches(match, etag) {
                // The id names the content; only whether it is still the caller's is asked.
                guard try await database(context, { try await resources.touchChartResult(id, user: user) })
                else { throw Problem.notFound() }
                return Response(status: .notModified, headers: headers)
            }
            guard var result = try await database(context, { try await resources.chartResult(id, user: user) })
            else { throw Problem.notFound() }
            if let stored = result.transitsText {
                // Transits are stored compact (TransitReport+Compact.swift); the API serves them whole.
                let full: String
                do {
                    full = try TransitReport.expandedJSON(stored: stored)
                } catch {
                    context.logger.error("stored transit result unreadable", metadata: ["chart.result": "\(id)"])
                    throw Problem(
                        .internalError,
                        "the stored result cannot be read"
                    )
                }
                result.jsonText = String(result.jsonText.dropLast()) + ",\"result\":" + full + "}"
            }
            if result.kind == ChartResultKind.wheel.rawValue, format != "json", let svg = result.svg {
                headers[.contentType] = "image/svg+xml; charset=utf-8"
                headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: svg)))
            }
            if format == "svg" {
                throw Problem(
                    .invalidFormat,
                    "format: svg is only for a wheel; this result is JSON",
                    field: "format"
                )
            }
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: result.jsonText)))
        }
    }
}
