import AstroDomain
import Foundation
import Hummingbird
import Postgres
import Testing
import WorkerRuntime

@testable import Gateway

/// Magical Stories in process (RouteGateway): children and their achievements, stories, their
/// illustration and reading jobs, and the pages' pictures. Children, stories, pages and
/// achievements are stored as the story-worker stores them; the pictures are files under the
/// storage root the gateway reads.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct GatewayRouteStoryTests {
    /// What `seed` stored for one user.
    struct Family {
        var child: String
        var story: String
        /// A story without a child profile (a child named only by `childName`).
        var childless: String
        var achievement: String
    }

    /// A child of `user` with a three-page story (page 1 drawn, as `pictures/<story>/1.svg`
    /// under `root`), a story without a child profile, and an earned achievement.
    static func seed(_ gateway: RouteGateway, _ user: RouteGateway.User, root: URL?) async throws -> Family {
        let family = Family(
            child: UUID().uuidString.lowercased(),
            story: UUID().uuidString.lowercased(),
            childless: UUID().uuidString.lowercased(),
            achievement: UUID().uuidString.lowercased()
        )
        let picture = "pictures/\(family.story)/1.svg"
        if let root {
            let file = root.appendingPathComponent(picture)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(),
                withIntermediateDirectories: true
            )
            try Data(#"<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>"#.utf8).write(to: file)
        }
        try await gateway.admin.withTransaction { database in
            _ = try database.execute(
                "INSERT INTO stories.child_profiles (id, user_id, name, timezone) VALUES ($1::uuid, $2, 'Оля', 'Europe/Kyiv')",
                [family.child, user.id.uuid]
            )
            for (story, child) in [(family.story, family.child as String?), (family.childless, nil)] {
                _ = try database.execute(
                    """
                    INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                        main_character, language, writer, writer_version)
                    VALUES ($1::uuid, $2, $3::uuid, 'The Brave Little Fox', 'Оля', 1, 'courage', 'a fox', 'en',
                        'built-in', 'test')
                    """,
                    [story, user.id.uuid, child]
                )
                for page in 1...3 {
                    _ = try database.execute(
                        """
                        INSERT INTO stories.pages (id, story_id, page_number, text, illustration_status, illustration_path)
                        VALUES ($1, $2::uuid, $3, $4, $5, $6)
                        """,
                        [
                            UUID(), story, page, "Page \(page).", page == 1 ? "generated" : "notStarted",
                            page == 1 ? picture : nil,
                        ]
                    )
                }
            }
            _ = try database.execute(
                """
                INSERT INTO stories.achievements (id, child_profile_id, rule_key, name, type, earned_at, progress, story_id)
                VALUES ($1::uuid, $2::uuid, 'first-story', 'First story', 'specialMilestone', now(), 1, $3::uuid)
                """,
                [family.achievement, family.child, family.story]
            )
        }
        return family
    }

    /// An id of a story job's body in lower case: those bodies write their own ids (`storyId`,
    /// `childProfileId`) in upper case, as they did before they were typed (StoryMessages.swift).
    static func id(_ value: JSONValue?) -> String? { value?.stringValue?.lowercased() }

    static let storyBody: JSONValue = [
        "childName": "Оля", "ageGroup": 1, "theme": "courage", "mainCharacter": "Felix the Fox", "language": "en",
        "pageCount": 3,
    ]

    @Test func childrenAndTheirAchievementsAreTheirUsersOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let family = try await Self.seed(gateway, user, root: nil)
            let strangers = try await Self.seed(gateway, other, root: nil)

            let children = try await gateway.call(.get, "/v1/children", token: user.token)
            #expect(children.status == 200, "\(children)")
            let child = try #require(children.json?["items"]?.arrayValue?.first)
            #expect(children.json?["items"]?.arrayValue?.count == 1)
            #expect(child["childId"] == .string(family.child) && child["name"] == "Оля")
            #expect(child["childProfileId"] == .string(family.child))
            #expect(child["timeZone"] == "Europe/Kyiv")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/children?limit=0", token: user.token),
                400,
                "invalid-limit",
                field: "limit"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/children?cursor=abc", token: user.token),
                400,
                "invalid-cursor",
                field: "cursor"
            )

            let achievements = try await gateway.call(
                .get,
                "/v1/children/\(family.child)/achievements",
                token: user.token
            )
            #expect(achievements.status == 200, "\(achievements)")
            #expect(achievements.json?["childId"] == .string(family.child))
            #expect(achievements.json?["childProfileId"] == .string(family.child))
            let earned = try #require(achievements.json?["items"]?.arrayValue?.first)
            #expect(earned["achievementId"] == .string(family.achievement) && earned["earned"] == true)
            #expect(earned["storyId"] == .string(family.story) && earned["ruleKey"] == "first-story")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/children/\(strangers.child)/achievements", token: user.token),
                404,
                "not-found",
                "another user's child"
            )
        }
    }

    @Test func aStoryIsQueuedWithTheIdItWillHaveAndBadRequestsAreRefused() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let family = try await Self.seed(gateway, user, root: nil)
            let strangers = try await Self.seed(gateway, other, root: nil)

            let answer = try await gateway.call(.post, "/v1/stories", token: user.token, json: Self.storyBody)
            let (_, job) = try await gateway.expectAccepted(answer, .storyGenerate, user: user)
            let storyID = try #require(answer.json?["storyId"]?.stringValue)
            // The id the worker will give the story (derived from the published job's).
            let published = try JSONCoding.decoder.decode(StoryGenerateRequest.self, from: job.jsonData())
            #expect(published.storyID.description == storyID && published.userID == user.id)
            #expect(job["childName"] == "Оля" && job["theme"] == "courage" && job["pageCount"] == 3)
            let forChild = try await gateway.call(
                .post,
                "/v1/stories",
                token: user.token,
                json: [
                    "childProfileId": .string(family.child), "ageGroup": 0, "theme": "kindness",
                    "mainCharacter": "Bear", "language": "uk",
                ]
            )
            let (_, childJob) = try await gateway.expectAccepted(forChild, .storyGenerate, user: user)
            #expect(Self.id(childJob["childProfileId"]) == family.child)

            func body(_ changes: [String: JSONValue]) -> JSONValue {
                guard case .object(var members) = Self.storyBody else { return Self.storyBody }
                for (key, value) in changes { members[key] = value }
                return .object(members)
            }
            let refusals: [(body: JSONValue, status: Int, code: String, field: String?)] = [
                ([1], 400, "invalid-json", nil),
                (body(["userId": "x"]), 400, "unexpected-field", "userId"),
                (body(["ageGroup": 3]), 422, "invalid-age-group", "ageGroup"),
                (body(["ageGroup": .null]), 422, "invalid-age-group", "ageGroup"),
                (body(["theme": "Courage!"]), 422, "invalid-theme", "theme"),
                (body(["theme": "dragons"]), 422, "unknown-theme", "theme"),
                (body(["mainCharacter": ""]), 422, "invalid-name", "mainCharacter"),
                (body(["mainCharacter": "a\u{7}b"]), 422, "invalid-characters", "mainCharacter"),
                (body(["language": "fr"]), 422, "unknown-language", "language"),
                (body(["pageCount": 10]), 422, "invalid-page-count", "pageCount"),
                (body(["childName": .null]), 422, "child-required", "childProfileId"),
                (body(["childProfileId": .string(family.child)]), 422, "child-required", "childName"),
                (body(["childName": .null, "childProfileId": "nope"]), 422, "invalid-id", "childProfileId"),
                (body(["timeZone": "Mars/Base"]), 422, "unknown-timezone", "timeZone"),
                (
                    body(["childName": .null, "childProfileId": .string(strangers.child)]), 404, "child-not-found",
                    "childProfileId"
                ),
            ]
            for refusal in refusals {
                let refused = try await gateway.call(.post, "/v1/stories", token: user.token, json: refusal.body)
                gateway.expectProblem(refused, refusal.status, refusal.code, field: refusal.field, "\(refusal.body)")
            }
            #expect(try await gateway.recordedJobs(user, kind: .storyGenerate) == 2)
            try await gateway.expectIdempotent(
                .post,
                "/v1/stories",
                user: user,
                kind: .storyGenerate,
                body: body(["theme": "friendship"]),
                other: .init(method: .post, uri: "/v1/stories", body: body(["theme": "honesty"]))
            )
        }
    }

    @Test func overTheDailyStoryQuotaAStoryIsRefused429() async throws {
        try await RouteGateway.run(environment: ["STORY_GENERATIONS_PER_DAY": "1"]) { gateway in
            let user = try await gateway.register()
            #expect(try await gateway.call(.post, "/v1/stories", token: user.token, json: Self.storyBody).status == 202)
            let refused = try await gateway.call(.post, "/v1/stories", token: user.token, json: Self.storyBody)
            gateway.expectProblem(refused, 429, "story-quota-exceeded")
            #expect(refused.header("Retry-After").flatMap(Int.init) != nil, "\(refused.headers)")
        }
    }

    @Test func storiesAreListedAndReadWithTheirPagesByTheirUserOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let family = try await Self.seed(gateway, user, root: nil)
            let strangers = try await Self.seed(gateway, other, root: nil)

            let list = try await gateway.call(.get, "/v1/stories?limit=1", token: user.token)
            #expect(list.status == 200 && list.json?["items"]?.arrayValue?.count == 1, "\(list)")
            let cursor = try #require(list.json?["nextCursor"]?.stringValue)
            let rest = try await gateway.call(.get, "/v1/stories?cursor=\(cursor)", token: user.token)
            let ids = (list.json?["items"]?.arrayValue ?? []) + (rest.json?["items"]?.arrayValue ?? [])
            #expect(Set(ids.compactMap { $0["storyId"]?.stringValue }) == [family.story, family.childless])
            // The filter is `childProfileId`; `childId`, its old name, still works for a release.
            for name in ["childProfileId", "childId"] {
                let ofChild = try await gateway.call(.get, "/v1/stories?\(name)=\(family.child)", token: user.token)
                #expect(
                    ofChild.json?["items"]?.arrayValue?.compactMap { $0["storyId"]?.stringValue } == [family.story],
                    "\(name): \(ofChild)"
                )
            }
            gateway.expectProblem(
                try await gateway.call(
                    .get,
                    "/v1/stories?childProfileId=\(family.child)&childId=\(strangers.child)",
                    token: user.token
                ),
                422,
                "conflicting-fields",
                field: "childProfileId"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories?childProfileId=\(strangers.child)", token: user.token),
                404,
                "not-found",
                "stories of another user's child"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories?childId=nope", token: user.token),
                400,
                "invalid-child-id",
                field: "childId"
            )
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories?limit=500", token: user.token),
                400,
                "invalid-limit",
                field: "limit"
            )

            let story = try await gateway.call(.get, "/v1/stories/\(family.story)", token: user.token)
            #expect(story.status == 200, "\(story)")
            #expect(
                story.json?["title"] == "The Brave Little Fox" && story.json?["childProfileId"] == .string(family.child)
            )
            let pages = try #require(story.json?["pages"]?.arrayValue)
            #expect(pages.map { $0["number"] } == [1, 2, 3])
            #expect(pages[0]["image"] == .string("/v1/stories/\(family.story)/pages/1/image"))
            #expect(pages[1]["image"] == nil && pages[1]["illustrationStatus"] == "notStarted")
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories/\(strangers.story)", token: user.token),
                404,
                "not-found",
                "another user's story"
            )
        }
    }

    @Test func illustrationsAndReadingsAreQueuedForTheCallersStoriesOnly() async throws {
        try await RouteGateway.run { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let family = try await Self.seed(gateway, user, root: nil)
            let strangers = try await Self.seed(gateway, other, root: nil)
            let base = "/v1/stories/\(family.story)"

            let all = try await gateway.call(.post, "\(base)/illustrations", token: user.token)
            let (_, drawAll) = try await gateway.expectAccepted(all, .storyIllustrate, user: user)
            #expect(Self.id(drawAll["storyId"]) == family.story && all.json?["storyId"] == .string(family.story))
            let chosen = try await gateway.call(
                .post,
                "\(base)/illustrations",
                token: user.token,
                json: ["pages": [1, 3], "force": true]
            )
            let (_, redraw) = try await gateway.expectAccepted(chosen, .storyIllustrate, user: user)
            #expect(redraw["pages"] == [1, 3] && redraw["force"] == true)

            let illustrationRefusals: [(body: JSONValue, status: Int, code: String, field: String?)] = [
                (["pages": []], 422, "invalid-pages", "pages"),
                (["pages": [1, 1]], 422, "invalid-pages", "pages"),
                (["pages": [0]], 422, "invalid-pages", "pages"),
                (["pages": [4]], 422, "invalid-pages", "pages"),
                (["force": true], 422, "invalid-force", "force"),
                (["pages": [1], "force": "yes"], 422, "invalid-force", "force"),
                (["colour": "red"], 400, "unexpected-field", "colour"),
            ]
            for refusal in illustrationRefusals {
                let refused = try await gateway.call(
                    .post,
                    "\(base)/illustrations",
                    token: user.token,
                    json: refusal.body
                )
                gateway.expectProblem(refused, refusal.status, refusal.code, field: refusal.field, "\(refusal.body)")
            }
            gateway.expectProblem(
                try await gateway.call(.post, "/v1/stories/\(strangers.story)/illustrations", token: user.token),
                404,
                "not-found",
                "illustrating another user's story"
            )

            let read = try await gateway.call(.post, "\(base)/reads", token: user.token)
            let (_, reading) = try await gateway.expectAccepted(read, .storyRead, user: user)
            #expect(Self.id(reading["storyId"]) == family.story)
            let at = ISO8601.string(from: Date().addingTimeInterval(-3600))
            let dated = try await gateway.call(
                .post,
                "\(base)/reads",
                token: user.token,
                json: ["at": .string(at), "childProfileId": .string(family.child)]
            )
            let (_, datedReading) = try await gateway.expectAccepted(dated, .storyRead, user: user)
            #expect(Self.id(datedReading["childProfileId"]) == family.child)

            let future = ISO8601.string(from: Date().addingTimeInterval(3 * 86_400))
            let readRefusals: [(path: String, body: JSONValue?, status: Int, code: String, field: String?)] = [
                (base, ["at": .string(future)], 422, "invalid-read-time", "at"),
                (base, ["at": "yesterday"], 422, "invalid-read-time", "at"),
                (base, ["childProfileId": "nope"], 422, "invalid-id", "childProfileId"),
                (base, ["childProfileId": .string(strangers.child)], 404, "child-not-found", "childProfileId"),
                (base, ["page": 1], 400, "unexpected-field", "page"),
                ("/v1/stories/\(family.childless)", nil, 422, "child-required", nil),
                ("/v1/stories/\(strangers.story)", nil, 404, "not-found", nil),
            ]
            for refusal in readRefusals {
                let refused = try await gateway.call(
                    .post,
                    "\(refusal.path)/reads",
                    token: user.token,
                    json: refusal.body
                )
                gateway.expectProblem(refused, refusal.status, refusal.code, field: refusal.field, "\(refusal)")
            }
            #expect(try await gateway.recordedJobs(other) == 0)
            try await gateway.expectIdempotent(
                .post,
                "\(base)/reads",
                user: user,
                kind: .storyRead,
                body: ["at": .string(at)],
                other: .init(method: .post, uri: "\(base)/illustrations", body: ["pages": [2]])
            )
            try await gateway.expectIdempotent(
                .post,
                "\(base)/illustrations",
                user: user,
                kind: .storyIllustrate,
                body: ["pages": [2]],
                other: .init(method: .post, uri: "\(base)/illustrations", body: ["pages": [3]])
            )
        }
    }

    @Test func aPagesPictureIsServedWithAnETagToItsUserOnly() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("route-pictures-\(UUID())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try await RouteGateway.run(environment: ["STORY_STORAGE_ROOT": root.path]) { gateway in
            let user = try await gateway.register()
            let other = try await gateway.register()
            let family = try await Self.seed(gateway, user, root: root)
            let strangers = try await Self.seed(gateway, other, root: root)
            let image = "/v1/stories/\(family.story)/pages/1/image"

            let picture = try await gateway.call(.get, image, token: user.token)
            #expect(picture.status == 200, "\(picture)")
            #expect(picture.header("Content-Type") == "image/svg+xml")
            #expect(picture.text.contains("<circle"))
            #expect(picture.header("Cache-Control") == "private, no-cache")
            #expect(picture.header("Content-Security-Policy")?.contains("sandbox") == true)
            let etag = try #require(picture.header("ETag"))
            let cached = try await gateway.call(.get, image, token: user.token, headers: ["If-None-Match": etag])
            #expect(cached.status == 304 && cached.body.isEmpty)

            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories/\(family.story)/pages/2/image", token: user.token),
                404,
                "not-illustrated"
            )
            for page in ["4", "0", "x", "1000"] {
                gateway.expectProblem(
                    try await gateway.call(.get, "/v1/stories/\(family.story)/pages/\(page)/image", token: user.token),
                    404,
                    "not-found",
                    "page \(page)"
                )
            }
            gateway.expectProblem(
                try await gateway.call(.get, "/v1/stories/\(strangers.story)/pages/1/image", token: user.token),
                404,
                "not-found",
                "another user's picture"
            )
            // A picture the database names but the volume lacks.
            try FileManager.default.removeItem(at: root.appendingPathComponent("pictures/\(family.story)/1.svg"))
            gateway.expectProblem(
                try await gateway.call(.get, image, token: user.token),
                500,
                "illustration-unavailable"
            )
        }
    }
}
