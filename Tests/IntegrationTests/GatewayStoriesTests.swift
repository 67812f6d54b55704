import AMQP
import AstroDomain
import Foundation
import LLMFake
import Postgres
import TestProcesses
import Testing
import WorkerRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Magical Stories through the real gateway: a story-worker process (its own broker user and
/// database role, pictures from the local images fake, stored under a temporary root the
/// gateway reads), the real broker and database. Another user's ids, malformed ids and page
/// numbers answer 404; lists are bounded and paginate; a stored path outside the root is refused.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct GatewayStoriesTests {
    typealias HTTPAnswer = GatewayHarness.HTTPAnswer
    let pool: PostgresPool

    init() async throws {
        pool = PostgresPool(
            configuration: try await RuntimeTestEnvironment.database(),
            options: .init(maxConnections: 2),
            logger: RuntimeTestEnvironment.logger
        )
    }

    func request(
        _ method: String,
        _ url: String,
        token: String? = nil,
        body: JSONValue? = nil,
        headers: [String: String] = [:]
    ) async throws -> HTTPAnswer {
        try await GatewayHarness.request(method, url, token: token, body: body, headers: headers)
    }

    /// A GET whose body is kept as bytes (a picture).
    func bytes(
        _ url: String,
        token: String,
        headers: [String: String] = [:]
    ) async throws -> (status: Int, headers: [String: String], data: Data) {
        var request = URLRequest(url: URL(string: url)!)
        request.timeoutInterval = 10
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = response as! HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            fields[String(describing: name).lowercased()] = String(describing: value)
        }
        return (http.statusCode, fields, data)
    }

    /// Waits until the job ends; returns its last state.
    func finished(
        _ base: String,
        job: String,
        token: String,
        processes: GatewayHarness.Processes
    ) async throws
        -> HTTPAnswer
    {
        var last: HTTPAnswer?
        do {
            try await RuntimeTestEnvironment.eventually("job \(job) ends", timeout: .seconds(60)) {
                last = try await request("GET", "\(base)/v1/jobs/\(job)", token: token)
                let status = last?.json?["status"]?.stringValue
                return status == "succeeded" || status == "failed" || status == "dead"
            }
        } catch {
            Issue.record("last answer: \(String(describing: last?.json))\n\(processes.output)")
            throw error
        }
        return try #require(last)
    }

    /// A story-worker process drawing through `images`, storing under `storage`.
    func startStoryWorker(
        images: OpenAIImagesFake,
        storage: URL,
        environment: [String: String] = [:]
    ) async throws -> (ChildProcess, AMQPPublisher) {
        let publisher = try await RuntimeTestEnvironment.contractPublisher(
            purging: [.storyGenerate, .storyIllustrate, .storyRead]
        )
        let process = try await GatewayHarness.start(
            "story-worker",
            environment: [
                "AMQP_URL": try RuntimeTestEnvironment.amqpURL(as: BrokerAccess.storyWorker),
                "DATABASE_URL": try await RuntimeTestEnvironment.databaseURL(as: .storyWorker),
                "HTTP_PORT": "0", "HTTP_HOST": "127.0.0.1", "LOG_LEVEL": "warning", "MIGRATE_ON_START": "false",
                "STORY_STORAGE_ROOT": storage.path,
                "IMAGE_BASE_URL": images.baseURL.absoluteString, "IMAGE_MODEL": "fake-image-model",
                "IMAGE_API_KEY": images.apiKey,
            ].merging(environment) { _, new in new },
            label: "gateway-story-worker"
        )
        do {
            try await ChildProcess.eventually("the story-worker consumes story.read", on: [process]) {
                try await publisher.queueState(JobType.storyRead.rawValue).consumerCount > 0
            }
        } catch {
            await process.stop()
            await publisher.close()
            throw error
        }
        return (process, publisher)
    }

    @Test func aStoryIsWrittenIllustratedReadAndItsPicturesServed() async throws {
        let images = try OpenAIImagesFake()
        defer { images.stop() }
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-stories-\(UUID())")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storage) }
        let (worker, publisher) = try await startStoryWorker(images: images, storage: storage)
        defer { worker.stopWaiting() }
        let running = try await GatewayHarness.launch(
            environment: ["STORY_STORAGE_ROOT": storage.path],
            label: "gateway-stories"
        )
        let processes = GatewayHarness.Processes(
            processes: running.processes.processes + [worker]
        )
        defer { processes.stop() }
        let base = running.base
        let (_, token) = try await GatewayHarness.register(base)
        let (_, other) = try await GatewayHarness.register(base)

        // 1. A story for a new child, accepted once for one Idempotency-Key.
        let storyBody: JSONValue = [
            "childName": "Mia", "timeZone": "Europe/Kyiv", "ageGroup": 0, "theme": "courage",
            "mainCharacter": "Felix the Fox", "language": "en", "pageCount": 3,
        ]
        let key = UUID().uuidString
        let posted = try await request(
            "POST",
            "\(base)/v1/stories",
            token: token,
            body: storyBody,
            headers: ["Idempotency-Key": key]
        )
        #expect(posted.status == 202, "\(String(describing: posted.json))\n\(processes.output)")
        let job = try #require(posted.json?["jobId"]?.stringValue)
        let story = try #require(posted.json?["storyId"]?.stringValue)
        #expect(posted.headers["location"] == "/v1/jobs/\(job)")
        let retried = try await request(
            "POST",
            "\(base)/v1/stories",
            token: token,
            body: storyBody,
            headers: ["Idempotency-Key": key]
        )
        #expect(retried.status == 202)
        #expect(retried.json?["jobId"]?.stringValue == job && retried.json?["storyId"]?.stringValue == story)
        let generated = try await finished(base, job: job, token: token, processes: processes)
        #expect(generated.json?["status"] == "succeeded", "\(String(describing: generated.json))")
        #expect(generated.json?["result"]?["storyId"]?.stringValue == story)

        // 2. The story with its pages, none drawn yet; the child it made.
        let shown = try await request("GET", "\(base)/v1/stories/\(story)", token: token)
        #expect(shown.status == 200, "\(String(describing: shown.json))")
        #expect(shown.json?["mainCharacter"] == "Felix the Fox" && shown.json?["childName"] == "Mia")
        #expect(shown.json?["readCount"] == 0)
        let pages = try #require(shown.json?["pages"]?.arrayValue)
        #expect(pages.map { $0["number"] } == [1, 2, 3])
        #expect(
            pages.allSatisfy { !($0["text"]?.stringValue ?? "").isEmpty && $0["illustrationStatus"] == "notStarted" }
        )
        #expect(pages.allSatisfy { $0["image"] == nil })
        let child = try #require(shown.json?["childProfileId"]?.stringValue)
        let children = try await request("GET", "\(base)/v1/children", token: token)
        #expect(children.status == 200)
        #expect(children.json?["items"]?.arrayValue?.map { $0["childId"]?.stringValue } == [child])
        #expect(children.json?["items"]?.arrayValue?.first?["timeZone"] == "Europe/Kyiv")
        let notYet = try await request("GET", "\(base)/v1/stories/\(story)/pages/1/image", token: token)
        #expect(notYet.status == 404 && notYet.json?["code"] == "not-illustrated")

        // 3. Illustrated (an empty body: every page), then each page's picture is the stored file.
        let illustrate = try await request("POST", "\(base)/v1/stories/\(story)/illustrations", token: token)
        #expect(illustrate.status == 202, "\(String(describing: illustrate.json))")
        let illustrated = try await finished(
            base,
            job: try #require(illustrate.json?["jobId"]?.stringValue),
            token: token,
            processes: processes
        )
        #expect(illustrated.json?["status"] == "succeeded", "\(String(describing: illustrated.json))")
        let drawn = try #require(try await request("GET", "\(base)/v1/stories/\(story)", token: token).json)
        #expect(
            drawn["pages"]?.arrayValue?.map { $0["illustrationStatus"] } == ["generated", "generated", "generated"]
        )
        #expect(
            drawn["pages"]?.arrayValue?.dropFirst().first?["image"]?.stringValue == "/v1/stories/\(story)/pages/2/image"
        )
        let stored = try await pool.withConnection { database in
            try database.query(
                "SELECT illustration_path FROM stories.pages WHERE story_id = $1::uuid ORDER BY page_number",
                [story]
            ).map { try $0.decode(String.self, "illustration_path") }
        }
        var etags: Set<String> = []
        for (index, path) in stored.enumerated() {
            let picture = try await bytes("\(base)/v1/stories/\(story)/pages/\(index + 1)/image", token: token)
            #expect(picture.status == 200)
            #expect(picture.headers["content-type"] == "image/png")
            #expect(picture.headers["cache-control"] == "private, no-cache")
            #expect(picture.data == (try Data(contentsOf: storage.appendingPathComponent(path))))
            etags.insert(try #require(picture.headers["etag"]))
        }
        #expect(etags.count == 3, "each page's picture has its own tag")
        let etag = try #require(
            try await bytes("\(base)/v1/stories/\(story)/pages/1/image", token: token).headers["etag"]
        )
        let revalidated = try await bytes(
            "\(base)/v1/stories/\(story)/pages/1/image",
            token: token,
            headers: ["If-None-Match": etag]
        )
        #expect(revalidated.status == 304 && revalidated.data.isEmpty && revalidated.headers["etag"] == etag)

        // 4. Another user: the story, its pictures, its child and its jobs do not exist.
        #expect(try await request("GET", "\(base)/v1/stories/\(story)", token: other).status == 404)
        #expect(try await bytes("\(base)/v1/stories/\(story)/pages/1/image", token: other).status == 404)
        #expect(try await request("GET", "\(base)/v1/children/\(child)/achievements", token: other).status == 404)
        #expect(try await request("GET", "\(base)/v1/stories?childId=\(child)", token: other).status == 404)
        #expect(try await request("POST", "\(base)/v1/stories/\(story)/reads", token: other).status == 404)
        #expect(try await request("POST", "\(base)/v1/stories/\(story)/illustrations", token: other).status == 404)
        #expect(try await request("GET", "\(base)/v1/children", token: other).json?["items"] == [])
        #expect(try await request("GET", "\(base)/v1/stories", token: other).json?["items"] == [])
        var foreignChild = storyBody
        if case .object(var members) = foreignChild {
            members["childName"] = nil
            members["childProfileId"] = .string(child)
            foreignChild = .object(members)
        }
        let refusedChild = try await request("POST", "\(base)/v1/stories", token: other, body: foreignChild)
        #expect(refusedChild.status == 404 && refusedChild.json?["code"] == "child-not-found")

        // 5. Read: the count moves and the child earns "First Story".
        let read = try await request("POST", "\(base)/v1/stories/\(story)/reads", token: token)
        #expect(read.status == 202, "\(String(describing: read.json))")
        let recorded = try await finished(
            base,
            job: try #require(read.json?["jobId"]?.stringValue),
            token: token,
            processes: processes
        )
        #expect(recorded.json?["status"] == "succeeded", "\(String(describing: recorded.json))")
        #expect(try await request("GET", "\(base)/v1/stories/\(story)", token: token).json?["readCount"] == 1)
        let achievements = try await request("GET", "\(base)/v1/children/\(child)/achievements", token: token)
        #expect(achievements.status == 200)
        let earned = achievements.json?["items"]?.arrayValue?.filter { $0["earned"] == true } ?? []
        #expect(
            earned.contains {
                $0["ruleKey"] == "first-story" && $0["name"] == "First Story" && $0["storyId"]?.stringValue == story
            }
        )
        #expect(earned.allSatisfy { $0["earnedAt"] != nil && $0["progress"] == 1 })
        let listed = try await request("GET", "\(base)/v1/stories?childId=\(child)", token: token)
        #expect(listed.json?["items"]?.arrayValue?.map { $0["storyId"]?.stringValue } == [story])

        // Concurrent retries of one reading with one key: one job, one more read.
        let concurrentKey = UUID().uuidString
        let answers = try await withThrowingTaskGroup(of: HTTPAnswer.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    try await request(
                        "POST",
                        "\(base)/v1/stories/\(story)/reads",
                        token: token,
                        headers: ["Idempotency-Key": concurrentKey]
                    )
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 202 })
        let readJobs = Set(answers.compactMap { $0.json?["jobId"]?.stringValue })
        #expect(readJobs.count == 1)
        _ = try await finished(base, job: try #require(readJobs.first), token: token, processes: processes)
        #expect(try await request("GET", "\(base)/v1/stories/\(story)", token: token).json?["readCount"] == 2)

        // 6. Requests refused before anything is published.
        func refused(_ path: String, _ body: JSONValue) async throws -> HTTPAnswer {
            try await request("POST", "\(base)\(path)", token: token, body: body)
        }
        var answer = try await refused(
            "/v1/stories",
            ["childName": "Mia", "ageGroup": 0, "mainCharacter": "F", "language": "en"]
        )
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-theme" && answer.json?["field"] == "theme")
        answer = try await refused(
            "/v1/stories",
            ["childName": "Mia", "ageGroup": 3, "theme": "courage", "mainCharacter": "F", "language": "en"]
        )
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-age-group")
        answer = try await refused(
            "/v1/stories",
            ["ageGroup": 1, "theme": "courage", "mainCharacter": "F", "language": "en"]
        )
        #expect(answer.status == 422 && answer.json?["code"] == "child-required")
        answer = try await refused(
            "/v1/stories",
            [
                "childName": "Mia", "ageGroup": 1, "theme": "courage", "mainCharacter": "F", "language": "en",
                "userId": .string(UUID().uuidString),
            ]
        )
        #expect(answer.status == 400 && answer.json?["code"] == "unexpected-field" && answer.json?["field"] == "userId")
        answer = try await refused("/v1/stories/\(story)/illustrations", ["pages": [4]])
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-pages")
        answer = try await refused("/v1/stories/\(story)/illustrations", ["pages": [1, 1]])
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-pages")
        answer = try await refused("/v1/stories/\(story)/illustrations", ["force": true])
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-force")
        answer = try await refused("/v1/stories/\(story)/reads", ["at": "2999-01-01T00:00:00Z"])
        #expect(answer.status == 422 && answer.json?["code"] == "invalid-read-time")
        // A key used for one story's reading is not another request's.
        let readKey = UUID().uuidString
        let firstRead = try await request(
            "POST",
            "\(base)/v1/stories/\(story)/reads",
            token: token,
            headers: ["Idempotency-Key": readKey]
        )
        #expect(firstRead.status == 202)
        let reusedKey = try await request(
            "POST",
            "\(base)/v1/stories/\(story)/illustrations",
            token: token,
            headers: ["Idempotency-Key": readKey]
        )
        #expect(reusedKey.status == 422 && reusedKey.json?["code"] == "idempotency-key-reused")
        _ = try await finished(
            base,
            job: try #require(firstRead.json?["jobId"]?.stringValue),
            token: token,
            processes: processes
        )

        // SIGTERM; every answer above was one the route table lists.
        let gateway = running.processes.processes[0]
        let code = await gateway.stop(grace: .seconds(20))
        #expect(code == 0, "\(gateway.tail())")
        let log = gateway.output
        #expect(!log.contains("status not in the route table"), "\(log)")
        await worker.stop()
        await publisher.close()
    }

    /// Stories and pages written straight into the database (as the worker would), to check the
    /// read side on its own: pagination, malformed ids and page numbers, and stored paths that
    /// leave the storage root.
    @Test func listsPaginateAndStoredPathsStayInsideTheRoot() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-root-\(UUID())")
        let storage = scratch.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: storage, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let secret = Data("not a picture of this root".utf8)
        try secret.write(to: scratch.appendingPathComponent("secret.png"))
        try FileManager.default.createSymbolicLink(
            at: storage.appendingPathComponent("link.png"),
            withDestinationURL: scratch.appendingPathComponent("secret.png")
        )
        let inside = OpenAIImagesFake.tinyPNG(red: 200, green: 10, blue: 10)
        try FileManager.default.createDirectory(
            at: storage.appendingPathComponent("s"),
            withIntermediateDirectories: true
        )
        try inside.write(to: storage.appendingPathComponent("s/page-01.png"))
        let svg = Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>"#.utf8)
        try svg.write(to: storage.appendingPathComponent("s/page-02.svg"))

        let running = try await GatewayHarness.launch(
            environment: ["STORY_STORAGE_ROOT": storage.path],
            label: "gateway-story-lists"
        )
        defer { running.processes.stop() }
        let base = running.base
        let (user, token) = try await GatewayHarness.register(base)
        let (_, other) = try await GatewayHarness.register(base)

        // Five stories of one child, two of them at the same instant (the id breaks the tie).
        let child = UUID()
        let stories = (0..<5).map { _ in UUID() }
        let paths = ["s/page-01.png", "s/page-02.svg", "../secret.png", "link.png", "s/missing.png", "s/page-01.exe"]
        try await pool.withTransaction { database in
            try database.execute(
                """
                INSERT INTO stories.child_profiles (id, user_id, name, created_at)
                VALUES ($1, $2::uuid, 'Ola', '2026-01-01T00:00:00Z'),
                    (gen_random_uuid(), $2::uuid, 'Ivan', '2026-01-02T00:00:00Z'),
                    (gen_random_uuid(), $2::uuid, 'Petro', '2026-01-02T00:00:00Z')
                """,
                [child, user]
            )
            for (index, story) in stories.enumerated() {
                try database.execute(
                    """
                    INSERT INTO stories.stories (id, user_id, child_profile_id, title, child_name, age_group, theme,
                        main_character, language, writer, writer_version, created_at)
                    VALUES ($1, $2::uuid, $3, $4, 'Ola', 1, 'courage', 'Felix', 'en', 'built-in', 't',
                        '2026-01-01T00:00:00Z'::timestamptz + make_interval(mins => $5::int))
                    """,
                    [story, user, child, "Story \(index)", min(index, 3)]
                )
            }
            for (index, path) in paths.enumerated() {
                try database.execute(
                    """
                    INSERT INTO stories.pages (id, story_id, page_number, text, illustration_path, illustration_status)
                    VALUES (gen_random_uuid(), $1, $2, 'Once upon a time.', $3, 'generated')
                    """,
                    [stories[0], index + 1, path]
                )
            }
        }

        // Pages of two: newest first, each story once, no cursor after the last.
        var seen: [String] = []
        var cursor: String?
        var pagesRead = 0
        repeat {
            let answer = try await request(
                "GET",
                "\(base)/v1/stories?childId=\(child)&limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""),
                token: token
            )
            #expect(answer.status == 200, "\(String(describing: answer.json))")
            let items = answer.json?["items"]?.arrayValue ?? []
            #expect(items.count <= 2)
            seen += items.compactMap { $0["storyId"]?.stringValue }
            cursor = answer.json?["nextCursor"]?.stringValue
            pagesRead += 1
        } while cursor != nil && pagesRead < 10
        #expect(pagesRead == 3)
        #expect(Set(seen).count == 5 && seen.count == 5)
        #expect(seen.first == stories[3].uuidString.lowercased() || seen.first == stories[4].uuidString.lowercased())
        #expect(seen.last == stories[0].uuidString.lowercased())
        let all = try await request("GET", "\(base)/v1/stories?limit=100", token: token)
        #expect(all.json?["items"]?.arrayValue?.count == 5 && all.json?["nextCursor"] == nil)
        #expect(try await request("GET", "\(base)/v1/stories", token: other).json?["items"] == [])
        // Children: oldest first, two then one (two made at the same instant).
        let firstChildren = try await request("GET", "\(base)/v1/children?limit=2", token: token)
        let firstNames = firstChildren.json?["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(firstNames.count == 2 && firstNames.first == "Ola")
        let childCursor = try #require(firstChildren.json?["nextCursor"]?.stringValue)
        let restChildren = try await request("GET", "\(base)/v1/children?limit=2&cursor=\(childCursor)", token: token)
        let restNames = restChildren.json?["items"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(restNames.count == 1 && restChildren.json?["nextCursor"] == nil)
        #expect(Set(firstNames + restNames) == ["Ola", "Ivan", "Petro"])

        // Bounds: limit, cursor and childId are checked.
        for query in ["limit=0", "limit=101", "limit=abc", "limit=1000000", "cursor=nonsense", "cursor=", "childId=42"]
        {
            let answer = try await request("GET", "\(base)/v1/stories?\(query)", token: token)
            #expect(answer.status == 400, "\(query): \(answer.status)")
            #expect(answer.headers["content-type"] == "application/problem+json")
        }
        #expect(try await request("GET", "\(base)/v1/children?limit=0", token: token).status == 400)
        #expect(try await request("GET", "\(base)/v1/stories?childId=\(UUID())", token: token).status == 404)

        // Malformed ids and page numbers: 404.
        let story = stories[0].uuidString.lowercased()
        for path in [
            "/v1/stories/not-a-uuid", "/v1/stories/\(story)x", "/v1/children/42/achievements",
            "/v1/stories/\(story)/pages/0/image", "/v1/stories/\(story)/pages/101/image",
            "/v1/stories/\(story)/pages/abc/image", "/v1/stories/\(story)/pages/-1/image",
            "/v1/stories/\(story)/pages/0001/image", "/v1/stories/\(story)/pages/7/image",
            "/v1/stories/\(UUID())/pages/1/image", "/v1/stories/not-a-uuid/pages/1/image",
        ] {
            let answer = try await bytes("\(base)\(path)", token: token)
            #expect(answer.status == 404, "\(path): \(answer.status)")
        }
        #expect(try await request("POST", "\(base)/v1/stories/nope/reads", token: token).status == 404)

        // Pictures inside the root are served, with their type; SVG sandboxed.
        let png = try await bytes("\(base)/v1/stories/\(story)/pages/1/image", token: token)
        #expect(png.status == 200 && png.data == inside && png.headers["content-type"] == "image/png")
        #expect(png.headers["x-content-type-options"] == "nosniff")
        let drawing = try await bytes("\(base)/v1/stories/\(story)/pages/2/image", token: token)
        #expect(drawing.status == 200 && drawing.data == svg && drawing.headers["content-type"] == "image/svg+xml")
        #expect(drawing.headers["content-security-policy"]?.contains("sandbox") == true)
        #expect(try await bytes("\(base)/v1/stories/\(story)/pages/1/image", token: other).status == 404)

        // Stored paths that leave the root (`..`, a link), a missing file and an unknown type:
        // refused, never the file outside.
        for page in 3...6 {
            let answer = try await bytes("\(base)/v1/stories/\(story)/pages/\(page)/image", token: token)
            #expect(answer.status == 500, "page \(page): \(answer.status)")
            #expect(answer.data != secret)
            #expect(
                (try? JSONValue.parse(answer.data))?["code"] == "illustration-unavailable",
                "page \(page): \(String(decoding: answer.data, as: UTF8.self))"
            )
        }
        let gateway = running.processes.processes[0]
        await gateway.stop(grace: .seconds(20))
        let log = gateway.output
        #expect(log.components(separatedBy: "illustration-path-refused").count - 1 == 2, "\(log)")
        #expect(log.contains("illustration-unreadable") && log.contains("illustration-type-unknown"))
        #expect(!log.contains("status not in the route table"))
    }

    /// Migration 0018: the gateway's role reads the story columns its routes show, and nothing
    /// else of the stories schema; it writes none of it.
    @Test func theGatewaysRoleOnlyReadsWhatTheStoryRoutesShow() async throws {
        let gateway = PostgresPool(
            configuration: try PostgresConfiguration(url: try await GatewayHarness.gatewayDatabaseURL()),
            options: .init(maxConnections: 1),
            logger: RuntimeTestEnvironment.logger
        )
        defer { Task { await gateway.close() } }
        func failure(_ sql: SQL) async -> String? {
            do {
                try await gateway.withConnection { _ = try $0.execute(sql) }
                return nil
            } catch let error as PostgresError {
                return error.sqlState ?? "\(error)"
            } catch {
                return "\(error)"
            }
        }
        let denied = "42501"
        #expect(
            await failure(
                "SELECT id, title, read_count, last_read_at, is_favorite, created_at FROM stories.stories LIMIT 1"
            ) == nil
        )
        #expect(await failure("SELECT page_number, text, illustration_path FROM stories.pages LIMIT 1") == nil)
        #expect(await failure("SELECT rule_key, progress, earned_at FROM stories.achievements LIMIT 1") == nil)
        #expect(await failure("SELECT id, name, timezone FROM stories.child_profiles LIMIT 1") == nil)
        // Not what a story cost or who wrote it, not a child's birth date, not collections.
        #expect(await failure("SELECT cost_usd FROM stories.stories LIMIT 1") == denied)
        #expect(await failure("SELECT writer FROM stories.stories LIMIT 1") == denied)
        #expect(await failure("SELECT illustration_error FROM stories.pages LIMIT 1") == denied)
        #expect(await failure("SELECT date_of_birth FROM stories.child_profiles LIMIT 1") == denied)
        #expect(await failure("SELECT 1 FROM stories.collections LIMIT 1") == denied)
        #expect(await failure("SELECT 1 FROM stories.story_reads LIMIT 1") == denied)
        // And it writes nothing there.
        #expect(await failure("UPDATE stories.stories SET read_count = read_count + 1 WHERE false") == denied)
        #expect(await failure("DELETE FROM stories.pages WHERE false") == denied)
        #expect(
            await failure(
                "INSERT INTO stories.child_profiles (id, user_id, name) SELECT gen_random_uuid(), id, 'X' FROM users WHERE false"
            ) == denied
        )
        #expect(await failure("UPDATE stories.achievements SET progress = 1 WHERE false") == denied)
    }
}
