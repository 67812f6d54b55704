import AstroDomain
import Foundation
import Hummingbird
import JOSE
import UUIDText
import ZoneInfo

/// `limit` and `cursor` of the list routes.
///
/// `limit`: 1…100 items, 20 when absent. `cursor`: the `nextCursor` of the previous page, opaque
/// to the client (base64url of a kind letter and the last item's position); anything else, or a
/// cursor of another list, is 400 `invalid-cursor`. Every list query names the caller, so a
/// cursor made up by hand reaches nothing of another user's.
enum Pagination {
    static let defaultLimit = GatewayRoutes.defaultListLimit
    static let maxLimit = GatewayRoutes.maxListLimit
    /// The longest cursor read (the longest the gateway writes is a profile name's: 50
    /// characters of up to 4 bytes, in base64url).
    static let maxCursorBytes = 512

    /// The page size asked for.
    /// - Throws: `Problem` 400 `invalid-limit` for anything but one whole number 1…100.
    /// - Parameter values: Every `limit` of the query.
    static func limit(_ values: [String]) throws -> Int {
        guard let text = values.first else { return defaultLimit }
        guard values.count == 1, (1...3).contains(text.utf8.count),
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let limit = Int(text), (1...maxLimit).contains(limit)
        else {
            throw Problem(.invalidLimit, "limit: a whole number from 1 to \(maxLimit)", field: "limit")
        }
        return limit
    }

    /// The cursor's position text for a list of `kind`, or `nil` for the first page.
    /// - Throws: `Problem` 400 `invalid-cursor` for a cursor this list did not write.
    /// - Parameter values: Every `cursor` of the query.
    static func cursor(_ values: [String], kind: Character) throws -> Substring? {
        guard let text = values.first else { return nil }
        guard values.count == 1, (1...maxCursorBytes).contains(text.utf8.count),
            let data = Base64URL.decode(text),
            let decoded = String(validating: data, as: UTF8.self),
            decoded.utf8.count > 2, decoded.first == kind, decoded.dropFirst().first == ":"
        else {
            throw invalidCursor
        }
        return decoded.dropFirst(2)
    }

    /// A cursor of a list of `kind` at `position`.
    static func cursor(kind: Character, _ position: String) -> String {
        Base64URL.encode(Array("\(kind):\(position)".utf8))
    }

    static let invalidCursor = Problem(
        .invalidCursor,
        "cursor: not a nextCursor of this list",
        field: "cursor"
    )

    /// Digits only, 1…`maxDigits` of them, as a number.
    static func digits(_ text: Substring, maxDigits: Int) -> Int64? {
        guard (1...maxDigits).contains(text.utf8.count),
            text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else { return nil }
        return Int64(text)
    }

    /// A profiles cursor: the last profile's name (1…50 characters, as the schema allows).
    static func profileName(_ position: Substring) throws -> String {
        guard (1...50).contains(position.unicodeScalars.count), !position.utf8.contains(0) else {
            throw invalidCursor
        }
        return String(position)
    }

    /// A ledger cursor: the last entry's id.
    static func ledgerID(_ position: Substring) throws -> Int64 {
        guard let id = digits(position, maxDigits: 19), id > 0 else { throw invalidCursor }
        return id
    }

    /// A position in a list ordered by creation time: the last item's `created_at` in
    /// microseconds (below 2^53, where a Double is still exact in the interval arithmetic that
    /// turns it back into a timestamp, and a bound PostgreSQL's timestamps stay within: beyond it
    /// a cursor would be a 500 "out of range", not a 400) and its id, as `<micros>:<uuid>`.
    static func timePosition(_ position: Substring) throws -> (micros: Int64, id: UUID) {
        let parts = position.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let micros = digits(parts[0], maxDigits: 16), micros < 9_007_199_254_740_992,
            parts[1].utf8.count == 36, let id = UUID(text: String(parts[1]))
        else { throw invalidCursor }
        return (micros, id)
    }

    /// A cursor of a list of `kind` ordered by creation time (see `timePosition`).
    static func timeCursor(kind: Character, micros: Int64, id: UUID) -> String {
        cursor(kind: kind, "\(micros):\(id.lowercasedText)")
    }

    /// A reports cursor: the last report's creation time and id (see `timePosition`).
    static func reportPosition(_ position: Substring) throws -> ResourceStore.ReportPosition {
        let (micros, id) = try timePosition(position)
        return ResourceStore.ReportPosition(micros: micros, id: ReportID(id))
    }
}

extension GatewayRoutes {
    /// A string member of a body; `nil` when absent or `null`.
    /// - Throws: `Problem` 422 `invalid-field-type` for another type.
    static func optionalString(_ json: JSONValue, _ key: String) throws -> String? {
        switch json[key] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw Problem(.invalidFieldType, "\(key): expected a string", field: key)
        }
    }
}

extension GatewayRoutes {
    /// The caller's profiles: create, list, read, update, delete, the stored chart and its wheel.
    struct Profiles: GatewayController {
        let resources: ResourceStore
        let jobs: JobAcceptor
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.createProfile, use: createProfile)
            routes.authenticated(.listProfiles, use: listProfiles)
            routes.authenticated(.getProfile, use: getProfile)
            routes.authenticated(.updateProfile, use: updateProfile)
            routes.authenticated(.deleteProfile, use: deleteProfile)
            routes.authenticated(.getProfileChart, use: getProfileChart)
            routes.authenticated(.getProfileChartSVG, use: getProfileChartSVG)
        }

        func createProfile(
            _ request: Request,
            context: GatewayRequestContext
        )
            async throws -> Response
        {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            guard case .object(let members) = try jsonObject(data) else { throw Problem(.invalidJSON, "") }
            // This route creates a profile: an id to update (someone else's, perhaps) is refused here
            // rather than left to the worker.
            if let id = members["profile"]?["id"], id != .null {
                throw Problem(
                    .unexpectedField,
                    "profile.id: a new profile gets its id from the server",
                    field: "profile.id"
                )
            }
            return try await acceptChartCalculate(
                members,
                user: user,
                profile: nil,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.chartCalculate, path: "POST /v1/profiles", data),
                context: context
            )
        }

        func listProfiles(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let parameters = request.uri.queryParameters
            let limit = try Pagination.limit(parameters.getAll("limit"))
            let after = try Pagination.cursor(parameters.getAll("cursor"), kind: "p").map(Pagination.profileName)
            // One more than asked says whether there is a next page.
            let rows = try await database(context) {
                try await resources.profiles(user: user, after: after, limit: limit + 1)
            }
            let page = rows.prefix(limit)
            let next = rows.count > limit ? page.last.map { Pagination.cursor(kind: "p", $0.name) } : nil
            return try respond(PageAnswer(items: Array(page), nextCursor: next), status: .ok)
        }

        func getProfile(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ProfileID(try pathID(context, "id"))
            guard let profile = try await database(context, { try await resources.profile(id, user: user) })
            else {
                throw Problem.notFound()
            }
            return try respond(profile, status: .ok)
        }

        /// New birth data for the caller's profile: a `chart.calculate` job with the profile's id,
        /// which the chart-worker runs as an update (the profile and its chart in one transaction).
        func updateProfile(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ProfileID(try pathID(context, "id"))
            let idempotencyKey = try idempotencyKey(request)
            guard try await database(context, { try await resources.profileHasChart(id, user: user) }) != nil
            else {
                throw Problem.notFound()
            }
            let data = try await body(request)
            guard case .object(var members) = try jsonObject(data) else { throw Problem(.invalidJSON, "") }
            if case .object(var profile)? = members["profile"] {
                // The path names the profile; a body naming another one is a mistake, not a move.
                if let named = profile["id"], named != .null {
                    guard case .string(let text) = named, text.utf8.count == 36, ProfileID(text) == id else {
                        throw Problem(
                            .profileIDMismatch,
                            "profile.id: the body names another profile than the path",
                            field: "profile.id"
                        )
                    }
                }
                profile["id"] = .string(id.description)
                members["profile"] = .object(profile)
            }
            return try await acceptChartCalculate(
                members,
                user: user,
                profile: id,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.chartCalculate, path: "PUT /v1/profiles/\(id)", data),
                context: context
            )
        }

        /// Validates a profile write's body as the chart-worker will, refuses early what it can
        /// (`refuseEarly`), and queues the `chart.calculate` (202).
        /// - Parameters:
        ///   - members: The body's members; the caller's `userId` and a job id are set here, so
        ///     neither comes from the client.
        ///   - profile: The profile an update writes (the body's `profile.id` already set to it);
        ///     nil for a new one.
        /// - Throws: `Problem` 422 (the chart input's codes), 409 `duplicate-profile-name`, 503.
        func acceptChartCalculate(
            _ members: [String: JSONValue],
            user: UserID,
            profile: ProfileID?,
            idempotencyKey: String?,
            requestHash: String,
            context: GatewayRequestContext
        ) async throws -> Response {
            var members = members
            members["userId"] = .string(user.description)
            // Only to validate: `accept` gives the job its id.
            members["jobId"] = .string(JobID.random().description)
            let validated: ChartCalculateRequest
            do {
                validated = try ChartCalculateRequest(json: .object(members))
            } catch {
                throw Problem.chartInput(error)
            }
            try await refuseEarly(
                validated,
                user: user,
                except: profile,
                idempotencyKey: idempotencyKey,
                context: context
            )
            return try await jobs.accept(
                .chartCalculate,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash,
                context: context
            ) { jobID in
                var job = validated
                job.jobID = jobID
                // The profile the job writes, named now: a new one's id derives from the job's.
                let written = job.profileID ?? ProfileID.created(by: jobID)
                return (try job.jsonData(), JobAccepted(jobID, profile: written))
            }
        }

        /// Refuses before publishing what the chart-worker would refuse on the user's input, so
        /// the app gets a problem now instead of a job that fails later: a birth time in a
        /// daylight-saving gap or overlap without `dstPolicy` (422, read with the worker's own
        /// time zone database), and a name another of the user's profiles has (409
        /// `duplicate-profile-name`; the worker keeps its check for two requests racing). A retry
        /// with the `Idempotency-Key` of a request already accepted is not refused for the name
        /// its own job gave the profile: it replays its 202.
        /// - Throws: `Problem` 422 (the chart input's code), 409, or 503 when the database fails.
        func refuseEarly(
            _ validated: ChartCalculateRequest,
            user: UserID,
            except profile: ProfileID?,
            idempotencyKey: String?,
            context: GatewayRequestContext
        ) async throws {
            do {
                _ = try validated.birthData.resolveInstant(timeZones: SystemTimeZones.shared)
            } catch {
                throw Problem.chartInput(error)
            }
            let name = validated.birthData.name
            let replaying = idempotencyKey.map {
                GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: $0)
            }
            let taken = try await database(context) {
                try await resources.nameTaken(name, user: user, except: profile, replaying: replaying)
            }
            if taken {
                throw Problem(
                    .duplicateProfileName,
                    "profile.name: you already have a profile named \(InputQuote.short(name).debugDescription)",
                    field: "profile.name"
                )
            }
        }

        /// Deletes the caller's profile, its chart and its reports.
        ///
        /// The gateway deletes the row itself (migration 0015 grants it DELETE on `user_profiles`
        /// and nothing else): there is no computation to queue, the app expects the profile gone
        /// when the answer comes, and the schema's foreign keys already say what goes with it.
        /// Credits spent on the profile stay spent, and the ledger keeps the profile's id. While a
        /// paid report is being written for it (or with it as the partner), 409 `report-in-progress`.
        func deleteProfile(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ProfileID(try pathID(context, "id"))
            switch try await database(context, { try await resources.deleteProfile(id, user: user) }) {
            case .deleted: break
            case .notFound: throw Problem.notFound()
            case .reportInProgress:
                throw Problem(
                    .reportInProgress,
                    "a report is being written for this profile: delete it once the report is done",
                    retryAfter: 30
                )
            }
            context.logger.info("profile deleted", metadata: ["profile.id": "\(id)", "user.id": "\(user)"])
            return Response(status: .noContent)
        }

        /// The stored chart, as stored: one statement, the document passed through unparsed.
        func getProfileChart(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ProfileID(try pathID(context, "id"))
            switch try await database(context, { try await resources.chart(id, user: user) }) {
            case .chart(let document):
                return Response(
                    status: .ok,
                    headers: [.contentType: "application/json"],
                    body: .init(byteBuffer: ByteBuffer(string: document))
                )
            case .notCalculated:
                throw Problem(
                    .chartNotFound,
                    "the profile's chart is not calculated yet"
                )
            case .noProfile:
                throw Problem.notFound()
            }
        }

        /// `GET /v1/profiles/{id}/chart.svg`: the profile's natal wheel (200 `image/svg+xml`), 304
        /// for a matching `If-None-Match`, 422 `invalid-theme`, 400 `invalid-query`, 404 for no such
        /// profile of the caller, 409 `chart-not-found` before its chart is stored.
        func getProfileChartSVG(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ProfileID(try pathID(context, "id"))
            let theme = try wheelTheme(request)
            let stored: ResourceStore.WheelChart
            switch try await database(context, { try await resources.wheelChart(id, user: user) }) {
            case .noProfile:
                throw Problem.notFound()
            case .notCalculated:
                throw Problem(
                    .chartNotFound,
                    "the profile's chart is not calculated yet; wait for its chart.calculate job"
                )
            case .chart(let chart):
                stored = chart
            }
            let etag = wheelETag(stored, theme: theme)
            var headers: HTTPFields = [
                .eTag: etag,
                // Revalidated on every use: a profile's new birth data or name changes its wheel
                // under the same URL, and a revalidation costs one look-up, no drawing.
                .cacheControl: "private, no-cache",
                .init("X-Content-Type-Options")!: "nosniff",
                // An SVG opened on its own must not run scripts or load anything.
                .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; sandbox",
            ]
            if let match = request.headers[.ifNoneMatch], ETagMatch.matches(match, etag) {
                return Response(status: .notModified, headers: headers)
            }
            let svg = try WheelRenderCache.shared.svg(etag: etag) {
                try renderNatalWheel(stored, theme: theme, context: context)
            }
            headers[.contentType] = "image/svg+xml; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: svg)))
        }
    }

    /// Purchases to verify, the caller's credits and their ledger.
    struct Billing: GatewayController {
        let resources: ResourceStore
        let jobs: JobAcceptor
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.createPurchase, use: createPurchase)
            routes.authenticated(.getCredits, use: getCredits)
            routes.authenticated(.listLedger, use: listLedger)
        }

        /// A StoreKit 2 purchase to verify: `billing.verify-purchase` for the caller.
        func createPurchase(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            let json = try jsonObject(data)
            let signed = try optionalString(json, "signedTransaction")
            let transactionID = try optionalString(json, "transactionId")
            // A restore on a new install (issue 18): the billing-worker may move another account's
            // unspent credits of this purchase to the caller (README, "Restore on a new device").
            let restore: Bool?
            switch json["restore"] {
            case nil, .null?: restore = nil
            case .bool(let flag)?: restore = flag
            default: throw Problem(.invalidFieldType, "restore: expected a boolean", field: "restore")
            }
            let job: VerifyPurchaseRequest
            switch (signed, transactionID) {
            case (let signed?, nil):
                guard CompactJWS.hasCompactShape(signed) else {
                    throw Problem(
                        .invalidSignedTransaction,
                        "signedTransaction: expected StoreKit 2's JWS (three base64url parts)",
                        field: "signedTransaction"
                    )
                }
                job = VerifyPurchaseRequest(jobID: .random(), userID: user, signedTransaction: signed)
            case (nil, let id?):
                guard (1...64).contains(id.utf8.count),
                    id.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
                else {
                    throw Problem(
                        .invalidTransactionID,
                        "transactionId: 1 to 64 digits",
                        field: "transactionId"
                    )
                }
                job = VerifyPurchaseRequest(jobID: .random(), userID: user, transactionID: id)
            case (_?, _?):
                throw Problem(
                    .conflictingFields,
                    "send signedTransaction or transactionId, not both",
                    field: "transactionId"
                )
            case (nil, nil):
                throw Problem(
                    .missingField,
                    "signedTransaction: missing (or send transactionId)",
                    field: "signedTransaction"
                )
            }
            return try await jobs.accept(
                .billingVerifyPurchase,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.billingVerifyPurchase, path: "POST /v1/purchases", data),
                context: context
            ) { jobID in
                var body = job
                body.jobID = jobID
                body.restore = restore
                return (try JSONCoding.encoder.encode(body), JobAccepted(jobID))
            }
        }

        func getCredits(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let counts = try await database(context) { try await resources.availableCredits(user: user) }
            return try respond(CreditsAnswer(counts), status: .ok)
        }

        func listLedger(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let parameters = request.uri.queryParameters
            let limit = try Pagination.limit(parameters.getAll("limit"))
            let before = try Pagination.cursor(parameters.getAll("cursor"), kind: "l").map(Pagination.ledgerID)
            let rows = try await database(context) {
                try await resources.ledger(user: user, before: before, limit: limit + 1)
            }
            let page = rows.prefix(limit)
            let next = rows.count > limit ? page.last.map { Pagination.cursor(kind: "l", "\($0.id)") } : nil
            return try respond(PageAnswer(items: Array(page), nextCursor: next), status: .ok)
        }
    }

    /// Reports: requested (a credit spent), listed, read.
    struct Reports: GatewayController {
        let resources: ResourceStore
        let jobs: JobAcceptor
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.requestReport, use: requestReport)
            routes.authenticated(.listReports, use: listReports)
            routes.authenticated(.getReport, use: getReport)
        }

        /// Spend a credit on a report: `report.request` for the caller's profile.
        func requestReport(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            let json = try jsonObject(data)
            guard let profileText = try optionalString(json, "profileId") else {
                throw Problem(.missingField, "profileId: missing", field: "profileId")
            }
            guard profileText.utf8.count == 36, let profile = ProfileID(profileText) else {
                throw Problem(.invalidID, "profileId: not a UUID", field: "profileId")
            }
            guard let area = try optionalString(json, "area").flatMap(ReportArea.init(rawValue:)) else {
                throw Problem(
                    .unknownArea,
                    "area: one of \(ReportArea.allCases.map(\.rawValue).joined(separator: ", "))",
                    field: "area"
                )
            }
            guard let language = try optionalString(json, "language").flatMap(ReportLanguage.init(rawValue:)) else {
                throw Problem(
                    .unknownLanguage,
                    "language: one of \(ReportLanguage.allCases.map(\.rawValue).joined(separator: ", "))",
                    field: "language"
                )
            }
            // A report for two (CONTRACT.md "Reports for two"): checked here as the billing-worker
            // checks it again before spending a credit.
            var partner: ProfileID?
            if let partnerText = try optionalString(json, "partnerProfileId") {
                guard partnerText.utf8.count == 36, let id = ProfileID(partnerText) else {
                    throw Problem(.invalidID, "partnerProfileId: not a UUID", field: "partnerProfileId")
                }
                partner = id
            }
            if let code = PartnerRule.staticRejection(profileID: profile, partnerProfileID: partner, area: area) {
                throw Problem(
                    code,
                    code == PartnerRule.sameProfile
                        ? "partnerProfileId: must be another profile than profileId"
                        : "partnerProfileId: allowed only with area relationships",
                    field: "partnerProfileId"
                )
            }
            // The billing-worker checks the same again in the transaction that spends the credit; the
            // check here answers at once instead of with a failed job, and never publishes a job
            // about another user's profile. A tropical and a sidereal chart have no synastry: refused
            // here, before a credit is spent that the report-worker would only give back.
            try await checkProfiles(profile, partner: partner, user: user, resources: resources, context: context)
            let job = ReportRequest(
                jobID: .random(),
                userID: user,
                profileID: profile,
                area: area,
                language: language,
                partnerProfileID: partner
            )
            return try await jobs.accept(
                .reportRequest,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.reportRequest, path: "POST /v1/reports", data),
                context: context
            ) { jobID in
                var body = job
                body.jobID = jobID
                return (try JSONCoding.encoder.encode(body), JobAccepted(jobID))
            }
        }

        func getReport(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = ReportID(try pathID(context, "id"))
            guard let report = try await database(context, { try await resources.report(id, user: user) }) else {
                throw Problem.notFound()
            }
            return try respond(report, status: .ok)
        }

        func listReports(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let parameters = request.uri.queryParameters
            var profile: ProfileID?
            let named = parameters.getAll("profileId")
            if let text = named.first {
                // An id like any other: malformed, unknown and another user's all answer 404.
                guard named.count == 1, text.utf8.count == 36, let id = ProfileID(text) else {
                    throw Problem.notFound()
                }
                profile = id
            }
            let limit = try Pagination.limit(parameters.getAll("limit"))
            let after = try Pagination.cursor(parameters.getAll("cursor"), kind: "r").map(Pagination.reportPosition)
            guard
                let rows = try await database(
                    context,
                    { try await resources.reports(user: user, profile: profile, after: after, limit: limit + 1) }
                )
            else {
                throw Problem.notFound()
            }
            let page = rows.prefix(limit)
            let next =
                rows.count > limit ? page.last.map { Pagination.cursor(kind: "r", "\($0.position):\($0.id)") } : nil
            return try respond(PageAnswer(items: Array(page), nextCursor: next), status: .ok)
        }
    }
}
