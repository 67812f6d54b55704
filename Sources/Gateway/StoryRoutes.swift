import AstroDomain
import Foundation
import Hummingbird
import UUIDText

/// Magical Stories through the gateway: a caller's children and their achievements, stories
/// (written, illustrated and read by the story-worker's `story.generate`, `story.illustrate` and
/// `story.read` jobs) and the pages' pictures.
///
/// Every id is checked to be the caller's: a malformed id, another user's id and an unknown id
/// all answer 404 `not-found`, so ids cannot be probed. Job bodies are checked before anything is
/// published; what only the worker knows (whether a theme is in its knowledge base, whether a
/// name has a blocked word) fails the job, and `GET /v1/jobs/{id}` shows why.
extension GatewayRoutes {
    /// Largest `limit` of a list; `defaultListLimit` without one.
    static let maxListLimit = 100
    static let defaultListLimit = 20
    /// Highest page number a route accepts (`story.illustrate` takes at most 100 pages).
    static let maxPageNumber = 100
    /// Most achievements listed for a child (the rule book has far fewer).
    static let maxAchievements = 500
    /// The kind letters of the stories' list cursors (a cursor is read back only by its list).
    static let childrenCursorKind: Character = "c"
    static let storiesCursorKind: Character = "s"

    // MARK: Children

    // MARK: Stories

    // MARK: Helpers

    /// The members of a JSON object body, refusing members not in `allowed`; an empty body is
    /// `{}` when `optionalBody`.
    /// - Throws: `Problem` 400 `invalid-json` or `unexpected-field`.
    static func members(_ data: Data, allowed: Set<String>, optionalBody: Bool) throws -> [String: JSONValue] {
        if optionalBody, data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return [:] }
        guard case .object(let members) = try jsonObject(data) else { throw Problem(.invalidJSON, "") }
        if let unexpected = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw Problem(
                .unexpectedField,
                "\(unexpected.prefix(64)): not a field of this request",
                field: String(unexpected.prefix(64))
            )
        }
        return members
    }

    /// A whole number member in `range`; nil when absent (or null) and not `required`.
    static func integer(
        _ members: [String: JSONValue],
        _ key: String,
        in range: ClosedRange<Int>,
        code: ErrorCode,
        required: Bool
    ) throws -> Int? {
        guard let value = members[key], value != .null else {
            if required { throw Problem(code, "\(key): required", field: key) }
            return nil
        }
        guard case .number(let number) = value, number.rounded() == number,
            (Double(range.lowerBound)...Double(range.upperBound)).contains(number)
        else {
            throw Problem(
                code,
                "\(key): a whole number from \(range.lowerBound) to \(range.upperBound)",
                field: key
            )
        }
        return Int(number)
    }

    /// A name (the child's or the main character's): 1–50 characters after trimming, no control
    /// characters, as the worker requires.
    static func name(_ members: [String: JSONValue], _ key: String) throws -> String {
        guard case .string(let raw)? = members[key] else {
            throw Problem(.invalidName, "\(key): a name of 1–50 characters is required", field: key)
        }
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        switch TextRules.problem(in: text, maximum: 50) {
        case nil: return text
        case .controlCharacter(let position, let scalar)?:
            let problem = TextRules.Problem.controlCharacter(position: position, scalar: scalar)
            throw Problem(.invalidCharacters, "\(key) \(problem.phrase)", field: key)
        case .tooShort?, .tooLong?:
            throw Problem(.invalidName, "\(key) must be 1–50 characters", field: key)
        }
    }

    /// The stories list's child filter and the name it came under: `childProfileId`, or
    /// `childId` (its old name, accepted for one release).
    /// - Throws: `Problem` 400 `conflicting-fields` when both name different children.
    static func childFilter(_ request: Request) throws -> (name: String, text: String)? {
        let query = request.uri.queryParameters
        switch (query.get("childProfileId"), query.get("childId")) {
        case (let text?, let old?) where text != old:
            throw Problem(
                .conflictingFields,
                "childProfileId and childId (its old name) name different children",
                field: "childProfileId"
            )
        case (let text?, _): return ("childProfileId", text)
        case (nil, let old?): return ("childId", old)
        case (nil, nil): return nil
        }
    }

    /// A theme's key: 1–40 of `a-z 0-9 -`, and one of `StoryThemes.keys`.
    /// - Throws: `Problem` 422 `invalid-theme` for anything but such a key, `unknown-theme` (as
    ///   the story-worker would fail the job) for a key no story is written for.
    static func theme(_ members: [String: JSONValue]) throws -> String {
        guard case .string(let text)? = members["theme"], (1...40).contains(text.utf8.count),
            text.utf8.allSatisfy({ (97...122).contains($0) || (48...57).contains($0) || $0 == 45 })
        else {
            throw Problem(.invalidTheme, "theme: a theme key such as courage", field: "theme")
        }
        guard StoryThemes.keys.contains(text) else {
            throw Problem(
                .unknownTheme,
                "theme: one of \(StoryThemes.keys.joined(separator: ", "))",
                field: "theme"
            )
        }
        return text
    }

    static func language(_ members: [String: JSONValue]) throws -> ReportLanguage {
        guard case .string(let text)? = members["language"], let language = ReportLanguage(rawValue: text) else {
            throw Problem(
                .unknownLanguage,
                "language: one of \(ReportLanguage.allCases.map(\.rawValue).joined(separator: ", "))",
                field: "language"
            )
        }
        return language
    }

    /// An optional id member of the body.
    /// - Throws: `Problem` 422 `invalid-id` when present and not a UUID.
    static func optionalID(_ members: [String: JSONValue], _ key: String) throws -> UUID? {
        guard let value = members[key], value != .null else { return nil }
        guard case .string(let text) = value, let id = UUID(text: text) else {
            throw Problem(.invalidID, "\(key): expected an id", field: key)
        }
        return id
    }

    /// A path id: a malformed one is no resource of the caller's.
    /// - Throws: `Problem` 404.
    static func pathID(_ context: GatewayRequestContext, _ name: String) throws -> UUID {
        guard let text = context.parameters.get(name), let id = UUID(text: text) else {
            throw Problem.notFound()
        }
        return id
    }

    /// `cursor` and `limit` of a list of `kind` (the shared rules of `Pagination`).
    /// - Throws: `Problem` 400 `invalid-cursor` or `invalid-limit`.
    static func pagination(_ request: Request, kind: Character) throws -> (StoryStore.Cursor?, Int) {
        let parameters = request.uri.queryParameters
        let limit = try Pagination.limit(parameters.getAll("limit"))
        let cursor = try Pagination.cursor(parameters.getAll("cursor"), kind: kind).map(Pagination.timePosition)
        return (cursor.map { StoryStore.Cursor(createdAtMicros: $0.micros, id: $0.id) }, limit)
    }

    /// A list answer: `items`, and `nextCursor` when there is more.
    static func list<Item: Encodable & Sendable>(
        _ items: [Item],
        next: StoryStore.Cursor?,
        kind: Character
    ) throws -> Response {
        let cursor = next.map { Pagination.timeCursor(kind: kind, micros: $0.createdAtMicros, id: $0.id) }
        return try respond(PageAnswer(items: items, nextCursor: cursor), status: .ok)
    }
}

extension GatewayRoutes {
    /// Magical Stories: children, their achievements, stories, illustrations, reads, pictures.
    struct Stories: GatewayController {
        let stories: StoryStore
        let illustrations: IllustrationFiles
        let quotas: DailyQuotas
        let jobs: JobAcceptor
        let body: BodyReader

        func addRoutes(to routes: Registrar) {
            routes.authenticated(.listChildren, use: listChildren)
            routes.authenticated(.listChildAchievements, use: childAchievements)
            routes.authenticated(.createStory, use: createStory)
            routes.authenticated(.listStories, use: listStories)
            routes.authenticated(.getStory, use: getStory)
            routes.authenticated(.illustrateStory, use: illustrateStory)
            routes.authenticated(.recordStoryRead, use: recordRead)
            routes.authenticated(.getStoryPageImage, use: pageImage)
        }

        /// `GET /v1/children`: the caller's children (made by `story.generate` with a `childName`),
        /// oldest first, paginated.
        func listChildren(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let (cursor, limit) = try pagination(request, kind: childrenCursorKind)
            let page = try await database(context) {
                try await stories.children(user: user, after: cursor, limit: limit)
            }
            return try list(page.items.map(ChildAnswer.init), next: page.next, kind: childrenCursorKind)
        }

        /// `GET /v1/children/{id}/achievements`: a child's achievements, earned (newest first) then
        /// in progress.
        func childAchievements(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let child = try pathID(context, "id")
            guard
                let achievements = try await database(
                    context,
                    { try await stories.achievements(child: child, user: user, limit: maxAchievements) }
                )
            else { throw Problem.notFound() }
            let answer = ChildAchievementsAnswer(
                childProfileId: ChildID(child),
                childId: ChildID(child),
                items: achievements.map(AchievementAnswer.init)
            )
            return try respond(answer, status: .ok)
        }

        /// `POST /v1/stories` → `story.generate`; answers the job id and the id the story will have.
        func createStory(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            let members = try members(
                data,
                allowed: [
                    "childProfileId", "childName", "timeZone", "ageGroup", "theme", "mainCharacter", "language",
                    "pageCount",
                ],
                optionalBody: false
            )
            var job = StoryGenerateRequest(
                jobID: .random(),
                userID: user,
                ageGroup: try integer(members, "ageGroup", in: 0...2, code: .invalidAgeGroup, required: true) ?? 0,
                theme: try theme(members),
                mainCharacter: try name(members, "mainCharacter"),
                language: try language(members)
            )
            job.pageCount = try integer(members, "pageCount", in: 3...9, code: .invalidPageCount, required: false)
            let childID = try optionalID(members, "childProfileId")
            // `JSONValue?.none`, not `nil`: JSONValue is ExpressibleByNilLiteral, so a bare `nil` here
            // would become `JSONValue.null` and a `"childName": null` would count as a name given.
            let childName = members["childName"].flatMap { $0 == .null ? JSONValue?.none : $0 }
            switch (childID, childName) {
            case (nil, nil):
                throw Problem(.childRequired, "give childProfileId or childName", field: "childProfileId")
            case (.some, .some):
                throw Problem(.childRequired, "give childProfileId or childName, not both", field: "childName")
            case (nil, .some):
                job.childName = try name(members, "childName")
            case (let child?, nil):
                job.childProfileID = ChildID(child)
            }
            if let zone = members["timeZone"], zone != .null {
                guard case .string(let text) = zone, (try? BirthData.timeZone(named: text)) != nil else {
                    throw Problem(.unknownTimezone, "timeZone: expected an IANA time zone", field: "timeZone")
                }
                job.timeZone = text
            }
            if let child = childID {
                guard try await database(context, { try await stories.ownsChild(child, user: user) }) else {
                    throw Problem(
                        .childNotFound,
                        "no such child profile",
                        field: "childProfileId"
                    )
                }
            }
            return try await jobs.accept(
                .storyGenerate,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.storyGenerate, path: "/v1/stories", data),
                context: context,
                quota: quotas.storyGeneration
            ) { jobID in
                var body = job
                body.jobID = jobID
                return (try JSONCoding.encoder.encode(body), JobAccepted(jobID, story: body.storyID))
            }
        }

        /// `GET /v1/stories[?childId=]`: the caller's stories (one child's with `childId`), newest
        /// first, paginated; without pages.
        func listStories(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let (cursor, limit) = try pagination(request, kind: storiesCursorKind)
            var child: UUID?
            if let (name, text) = try GatewayRoutes.childFilter(request) {
                guard let id = UUID(text: text) else {
                    throw Problem(.invalidChildID, "\(name): expected a child profile id", field: name)
                }
                guard try await database(context, { try await stories.ownsChild(id, user: user) }) else {
                    throw Problem.notFound()
                }
                child = id
            }
            let page = try await database(context) {
                try await stories.stories(user: user, child: child, after: cursor, limit: limit)
            }
            return try list(page.items.map { StoryAnswer($0) }, next: page.next, kind: storiesCursorKind)
        }

        /// `GET /v1/stories/{id}`: the story with its pages' text and illustration state; a page with
        /// a picture names its image's path.
        func getStory(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let id = try pathID(context, "id")
            guard
                let (story, pages) = try await database(
                    context,
                    { try await stories.story(id, user: user, maxPages: maxPageNumber) }
                )
            else { throw Problem.notFound() }
            return try respond(StoryAnswer(story, pages: pages), status: .ok)
        }

        /// `POST /v1/stories/{id}/illustrations` → `story.illustrate`: every page without a picture,
        /// or the chosen `pages` (with `force`, redrawn even if they have one).
        func illustrateStory(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let storyID = try pathID(context, "id")
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            let members = try members(data, allowed: ["pages", "force"], optionalBody: true)
            var pages: [Int]?
            if let value = members["pages"], value != .null {
                guard case .array(let items) = value, (1...maxPageNumber).contains(items.count) else {
                    throw Problem(.invalidPages, "pages: 1 to \(maxPageNumber) page numbers", field: "pages")
                }
                let numbers = items.compactMap { item -> Int? in
                    guard case .number(let number) = item, number.rounded() == number,
                        (1...Double(maxPageNumber)).contains(number)
                    else { return nil }
                    return Int(number)
                }
                guard numbers.count == items.count, Set(numbers).count == numbers.count else {
                    throw Problem(.invalidPages, "pages: distinct page numbers from 1", field: "pages")
                }
                pages = numbers
            }
            var force: Bool?
            if let value = members["force"], value != .null {
                guard case .bool(let flag) = value else {
                    throw Problem(.invalidForce, "force: expected true or false", field: "force")
                }
                guard pages != nil || !flag else {
                    throw Problem(.invalidForce, "force redraws the chosen pages: give pages", field: "force")
                }
                force = flag
            }
            guard let facts = try await database(context, { try await stories.storyFacts(storyID, user: user) })
            else { throw Problem.notFound() }
            if let missing = pages?.first(where: { !facts.pages.contains($0) }) {
                throw Problem(.invalidPages, "pages: the story has no page \(missing)", field: "pages")
            }
            return try await jobs.accept(
                .storyIllustrate,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.storyIllustrate, path: "/v1/stories/\(storyID)", data),
                context: context,
                // Only a forced redraw replaces pictures already drawn (and paid for): it counts
                // its pages; drawing pages without a picture is bounded by the story's pages.
                quota: force == true ? quotas.redraw(pages: pages?.count ?? 0) : nil
            ) { jobID in
                let job = StoryIllustrateRequest(
                    jobID: jobID,
                    userID: user,
                    storyID: StoryID(storyID),
                    pages: pages,
                    force: force
                )
                return (try JSONCoding.encoder.encode(job), JobAccepted(jobID, story: StoryID(storyID)))
            }
        }

        /// `POST /v1/stories/{id}/reads` → `story.read`: a child (the story's own unless
        /// `childProfileId` names another of the caller's) finished reading it, now or `at`.
        func recordRead(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let storyID = try pathID(context, "id")
            let idempotencyKey = try idempotencyKey(request)
            let data = try await body(request)
            let members = try members(data, allowed: ["childProfileId", "at"], optionalBody: true)
            let reader = try optionalID(members, "childProfileId")
            var at: Date?
            if let value = members["at"], value != .null {
                // A reading at most a day ahead (clock skew, zones), as the worker allows, and not
                // before the app existed.
                guard case .string(let text) = value, text.utf8.count <= 40, let date = ISO8601.date(from: text),
                    date <= Date().addingTimeInterval(24 * 3600), date >= Date(timeIntervalSince1970: 946_684_800)
                else {
                    throw Problem(
                        .invalidReadTime,
                        "at: an ISO 8601 time from 2000 to a day from now",
                        field: "at"
                    )
                }
                at = date
            }
            guard let facts = try await database(context, { try await stories.storyFacts(storyID, user: user) })
            else { throw Problem.notFound() }
            if let reader {
                guard try await database(context, { try await stories.ownsChild(reader, user: user) }) else {
                    throw Problem(
                        .childNotFound,
                        "no such child profile",
                        field: "childProfileId"
                    )
                }
            } else if facts.child == nil {
                throw Problem(.childRequired, "the story has no child profile: give childProfileId", field: nil)
            }
            return try await jobs.accept(
                .storyRead,
                user: user,
                idempotencyKey: idempotencyKey,
                requestHash: requestHash(.storyRead, path: "/v1/stories/\(storyID)", data),
                context: context
            ) { jobID in
                let job = StoryReadRequest(
                    jobID: jobID,
                    userID: user,
                    storyID: StoryID(storyID),
                    childProfileID: reader.map { ChildID($0) },
                    at: at
                )
                return (try JSONCoding.encoder.encode(job), JobAccepted(jobID, story: StoryID(storyID)))
            }
        }

        /// `GET /v1/stories/{id}/pages/{n}/image`: the page's picture as stored by the story-worker,
        /// with a strong `ETag` (and 304 for a matching `If-None-Match`); 404 until it is drawn.
        func pageImage(
            _ request: Request,
            context: GatewayRequestContext
        ) async throws -> Response {
            let user = try context.user
            let storyID = try pathID(context, "id")
            guard let text = context.parameters.get("n"), (1...3).contains(text.utf8.count),
                text.utf8.allSatisfy({ (48...57).contains($0) }), let page = Int(text),
                (1...maxPageNumber).contains(page)
            else { throw Problem.notFound() }
            guard
                let illustration = try await database(
                    context,
                    { try await stories.illustration(story: storyID, page: page, user: user) }
                )
            else { throw Problem.notFound() }
            guard illustration.status == "generated", let path = illustration.path else {
                throw Problem(
                    .notIllustrated,
                    "page \(page) has no picture yet (\(illustration.status))"
                )
            }
            let image: IllustrationFiles.Image
            do {
                image = try await illustrations.load(path)
            } catch let failure as IllustrationFiles.Failure {
                // The database names a picture the volume cannot give: a fault of the deployment or
                // of the stored data, logged with the reason; the client learns only that it failed.
                context.logger.error(
                    "illustration not served",
                    metadata: [
                        "story.id": "\(storyID)", "page": "\(page)", "illustration.error": "\(failure.code)",
                        "reason": "\(failure)",
                    ]
                )
                throw Problem(
                    .illustrationUnavailable,
                    "the picture cannot be read"
                )
            }
            var headers: HTTPFields = [
                .eTag: image.etag,
                // Private (it needs the caller's token); revalidated each time, since a page can be
                // drawn again under the same path.
                .cacheControl: "private, no-cache",
                .init("X-Content-Type-Options")!: "nosniff",
            ]
            if image.mediaType == "image/svg+xml" {
                // An SVG opened on its own must not run scripts or load anything.
                headers[.contentSecurityPolicy] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
            }
            if let match = request.headers[.ifNoneMatch], match.utf8.count <= 1024,
                match.split(separator: ",").contains(where: {
                    let tag = $0.trimmingCharacters(in: .whitespaces)
                    return tag == image.etag || tag == "W/" + image.etag || tag == "*"
                })
            {
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = image.mediaType
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: image.data)))
        }
    }
}
