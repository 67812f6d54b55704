import AstroDomain
import Foundation
import Testing
import Yams

@testable import Gateway

/// The answer types (`APIAnswers.swift`) against `openapi.yaml`: every JSON answer a route writes,
/// encoded as the gateway encodes it, in its fullest form (every optional member set) and its
/// barest (none set), must satisfy the schema its operation documents for that status — every
/// required member present, no member the schema does not name, and the types, formats, enums,
/// bounds and nulls it gives. Every documented JSON answer has a sample here, so an operation
/// added to the spec without one fails too.
@Suite("API answers against their schemas")
struct APIAnswerSchemaTests {
    let document: [String: Any]

    init() throws {
        let text = try String(contentsOf: OpenAPIDocumentTests.rootURL, encoding: .utf8)
        document = try #require(try Yams.load(yaml: text) as? [String: Any], "openapi.yaml: not a mapping")
    }

    // MARK: Samples

    static let job = JobID(UUID(uuidString: "0f8b1c62-3f7e-4a57-9c8e-2b1d7a6e5f10")!)
    static let user = UserID(UUID(uuidString: "6c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e")!)
    static let profile = ProfileID(UUID(uuidString: "7a8b9c0d-1e2f-4a3b-9c4d-5e6f7a8b9c0d")!)
    static let other = UUID(uuidString: "1b2c3d4e-5f60-4718-a9b0-c1d2e3f4a5b6")!
    static let date = Date(timeIntervalSince1970: 1_780_000_000.123)

    static func profileAnswer(chart: Bool) -> ProfileAnswer {
        ProfileAnswer(
            profileId: profile,
            name: "Олена",
            birthDate: "1990-05-17",
            birthTime: "06:45",
            timezone: "Europe/Kyiv",
            latitude: 50.4501,
            longitude: 30.5234,
            locationName: "Kyiv",
            createdAt: date,
            updatedAt: date,
            chart: chart
                ? ProfileAnswer.Chart(
                    chartId: ChartID(other),
                    houseSystem: "placidus",
                    engineVersion: "1.4.0",
                    calculatedAt: date
                ) : nil
        )
    }

    static func ledgerAnswer(consumed: Bool) -> LedgerEntryAnswer {
        LedgerEntryAnswer(
            id: 42,
            entry: consumed ? "consumed" : "issued",
            creditId: CreditID(other),
            transactionId: "2000000123456789",
            jobId: job,
            profileId: OrNull(consumed ? profile : nil),
            area: OrNull(consumed ? "career" : nil),
            language: OrNull(consumed ? "uk" : nil),
            reason: OrNull(consumed ? "partner report" : nil),
            createdAt: date
        )
    }

    static func reportAnswer(text: Bool, partner: Bool) -> ReportAnswer {
        ReportAnswer(
            reportId: ReportID(other),
            profileId: profile,
            partnerProfileId: partner ? ProfileID(other) : nil,
            area: partner ? "relationships" : "career",
            language: "en",
            wordCount: 812,
            writer: "expert-rules",
            generatedAt: date,
            createdAt: date,
            text: text ? "## Key influences\n…" : nil,
            position: 1_780_000_000_123_000
        )
    }

    static func jobView(ended: Bool) -> GatewayStore.JobView {
        GatewayStore.JobView(
            kind: "report.request",
            createdAt: date,
            progress: JobProgress(
                status: ended ? "failed" : "queued",
                attempts: ended ? 1 : 0,
                error: ended ? ["code": "chart-not-found", "message": "the profile has no chart"] : nil,
                result: ended ? ["profileId": .string(profile.description), "area": "career"] : nil,
                finishedAt: ended ? date : nil
            )
        )
    }

    static func story(child: Bool, read: Bool) -> StoryStore.StorySummary {
        StoryStore.StorySummary(
            id: other,
            childProfileID: child ? other : nil,
            title: "The Brave Little Fox",
            childName: "Mia",
            ageGroup: 1,
            theme: "courage",
            mainCharacter: "Fox",
            language: "uk",
            readCount: read ? 3 : 0,
            lastReadAt: read ? date : nil,
            isFavorite: read,
            createdAt: date
        )
    }

    static func achievement(earned: Bool) -> StoryStore.Achievement {
        StoryStore.Achievement(
            id: other,
            ruleKey: "stories-completed-1",
            name: "First story",
            description: "Read a story to the end",
            type: "storiesCompleted",
            icon: "book",
            progress: earned ? 1 : 0.5,
            earnedAt: earned ? date : nil,
            storyID: earned ? other : nil
        )
    }

    static let child = StoryStore.Child(id: other, name: "Mia", timeZone: "Europe/Kyiv", createdAt: date)

    /// Every JSON answer of the API: operation, status, and its samples (fullest, barest).
    static let samples: [(operation: String, status: String, answers: [any Encodable & Sendable])] = [
        (
            "registerDevice", "201",
            [TokensAnswer(userId: user, accessToken: "a.b.c", expiresIn: 900, refreshToken: "r")]
        ),
        ("refreshToken", "200", [TokensAnswer(userId: user, accessToken: "a.b.c", expiresIn: 900, refreshToken: "r")]),
        ("createDeviceChallenge", "201", [DeviceChallengeAnswer(challenge: "c", expiresIn: 300)]),
        ("createProfile", "202", [JobAccepted(job, profile: profile)]),
        ("updateProfile", "202", [JobAccepted(job, profile: profile)]),
        (
            "listProfiles", "200",
            [
                PageAnswer(items: [profileAnswer(chart: true)], nextCursor: "cDpPbGVuYQ"),
                PageAnswer(items: [profileAnswer(chart: false)], nextCursor: nil),
                PageAnswer<ProfileAnswer>(items: [], nextCursor: nil),
            ]
        ),
        ("getProfile", "200", [profileAnswer(chart: true), profileAnswer(chart: false)]),
        ("requestSynastry", "202", [JobAccepted(job)]),
        ("requestTransits", "202", [JobAccepted(job)]),
        ("requestReturn", "202", [JobAccepted(job)]),
        ("requestWheel", "202", [JobAccepted(job)]),
        ("createPurchase", "202", [JobAccepted(job)]),
        (
            "getCredits", "200",
            [CreditsAnswer([nil: 2, .career: 1]), CreditsAnswer([:])]
        ),
        (
            "listLedger", "200",
            [
                PageAnswer(
                    items: [
                        ledgerAnswer(consumed: true), ledgerAnswer(consumed: false),
                    ],
                    nextCursor: "bDo0Mg"
                )
            ]
        ),
        (
            "putConsent", "200",
            [
                ConsentAnswerView(
                    ConsentRecord(
                        answer: ConsentAnswer(consented: true, textVersion: "2026-1", answeredAt: date),
                        recordedAt: date
                    )
                )
            ]
        ),
        (
            "getConsent", "200",
            [
                ConsentAnswerView(
                    ConsentRecord(
                        answer: ConsentAnswer(consented: false, textVersion: "2026-1", answeredAt: date),
                        recordedAt: date
                    )
                )
            ]
        ),
        ("requestReport", "202", [JobAccepted(job)]),
        (
            "listReports", "200",
            [
                PageAnswer(
                    items: [
                        reportAnswer(text: false, partner: true),
                        reportAnswer(text: false, partner: false),
                    ],
                    nextCursor: "cjox"
                )
            ]
        ),
        (
            "getReport", "200",
            [reportAnswer(text: true, partner: true), reportAnswer(text: true, partner: false)]
        ),
        ("getJob", "200", [JobAnswer(jobView(ended: true), jobID: job), JobAnswer(jobView(ended: false), jobID: job)]),
        ("receiveAppStoreNotification", "200", [NotificationAcceptedAnswer(jobId: job)]),
        (
            "listChildren", "200",
            [
                PageAnswer(items: [ChildAnswer(child)], nextCursor: "YzpwYWdl"),
                PageAnswer<ChildAnswer>(items: [], nextCursor: nil),
            ]
        ),
        (
            "listChildAchievements", "200",
            [
                ChildAchievementsAnswer(
                    childProfileId: ChildID(other),
                    childId: ChildID(other),
                    items: [
                        AchievementAnswer(achievement(earned: true)), AchievementAnswer(achievement(earned: false)),
                    ]
                )
            ]
        ),
        ("createStory", "202", [JobAccepted(job, story: StoryID(other))]),
        (
            "listStories", "200",
            [
                PageAnswer(
                    items: [
                        StoryAnswer(story(child: true, read: true)), StoryAnswer(story(child: false, read: false)),
                    ],
                    nextCursor: "czpwYWdl"
                )
            ]
        ),
        (
            "getStory", "200",
            [
                StoryAnswer(
                    story(child: true, read: true),
                    pages: [
                        StoryStore.StoryPage(number: 1, text: "Once upon a time", illustrationStatus: "generated"),
                        StoryStore.StoryPage(number: 2, text: "The end", illustrationStatus: "notStarted"),
                    ]
                ),
                StoryAnswer(story(child: false, read: false), pages: []),
            ]
        ),
        ("illustrateStory", "202", [JobAccepted(job, story: StoryID(other))]),
        ("recordStoryRead", "202", [JobAccepted(job, story: StoryID(other))]),
        ("deleteCurrentUser", "202", [JobAccepted(job)]),
        ("exportCurrentUser", "202", [JobAccepted(job, downloadPath: "/v1/me/exports/\(job)")]),
    ]

    /// Answers that are documents stored by a worker and passed through as they are (their
    /// schemas are checked against the workers' writers elsewhere): not the gateway's types.
    static let storedDocuments: Set<String> = ["getProfileChart 200", "getChartResult 200"]

    // MARK: Tests

    @Test func everyAnswerSatisfiesItsOperationsSchema() throws {
        for sample in Self.samples {
            let schema = try #require(
                jsonSchema(operation: sample.operation, status: sample.status),
                "\(sample.operation) \(sample.status): no application/json schema in openapi.yaml"
            )
            for (index, answer) in sample.answers.enumerated() {
                let data = try GatewayRoutes.answerEncoder.encode(answer)
                let value = try JSONValue.parse(data)
                let problems = SchemaCheck(document: document).problems(value, schema, at: "$")
                #expect(
                    problems.isEmpty,
                    "\(sample.operation) \(sample.status) sample \(index): \(problems.joined(separator: "; "))\n\(String(decoding: data, as: UTF8.self))"
                )
            }
        }
    }

    @Test func everyDocumentedJSONAnswerHasASample() throws {
        let paths = try #require(document["paths"] as? [String: Any])
        var documented: Set<String> = []
        for (_, item) in paths {
            for (_, value) in item as? [String: Any] ?? [:] {
                guard let operation = value as? [String: Any], let id = operation["operationId"] as? String else {
                    continue
                }
                for (status, _) in operation["responses"] as? [AnyHashable: Any] ?? [:]
                where "\(status)".hasPrefix("2") && jsonSchema(operation: id, status: "\(status)") != nil {
                    documented.insert("\(id) \(status)")
                }
            }
        }
        let sampled = Set(Self.samples.map { "\($0.operation) \($0.status)" })
        #expect(documented.subtracting(sampled).subtracting(Self.storedDocuments).isEmpty, "answers without a sample")
        #expect(sampled.subtracting(documented).isEmpty, "samples of answers the spec does not document")
    }

    /// The checker itself can fail: a missing required member, an undocumented member, a wrong
    /// type, a value outside the enum and a malformed uuid are each reported.
    @Test func theCheckerReportsWhatDoesNotFit() throws {
        let schema = try #require(jsonSchema(operation: "getReport", status: "200"))
        let good = try JSONValue.parse(
            GatewayRoutes.answerEncoder.encode(Self.reportAnswer(text: true, partner: false))
        )
        let check = SchemaCheck(document: document)
        #expect(check.problems(good, schema, at: "$").isEmpty)
        guard case .object(let members) = good else {
            Issue.record("a report is not an object")
            return
        }
        let broken: [(String, [String: JSONValue])] = [
            ("missing", members.filter { $0.key != "text" }),
            ("undocumented", members.merging(["reportID": "x"]) { $1 }),
            ("wrong type", members.merging(["wordCount": "812"]) { $1 }),
            ("outside the enum", members.merging(["area": "love"]) { $1 }),
            ("malformed uuid", members.merging(["profileId": "7a8b"]) { $1 }),
            ("not an integer", members.merging(["wordCount": 8.5]) { $1 }),
        ]
        for (name, object) in broken {
            #expect(!check.problems(.object(object), schema, at: "$").isEmpty, "\(name): not reported")
        }
    }

    // MARK: Spec reading

    /// The `application/json` schema of `operation`'s `status` answer.
    func jsonSchema(operation: String, status: String) -> Any? {
        let check = SchemaCheck(document: document)
        for (_, item) in document["paths"] as? [String: Any] ?? [:] {
            for (_, value) in item as? [String: Any] ?? [:] {
                guard let op = value as? [String: Any], op["operationId"] as? String == operation else { continue }
                let responses = op["responses"] as? [AnyHashable: Any] ?? [:]
                guard let answer = responses.first(where: { "\($0.key)" == status })?.value,
                    let resolved = check.resolve(answer),
                    let content = resolved["content"] as? [String: Any],
                    let json = content["application/json"] as? [String: Any]
                else { return nil }
                return json["schema"]
            }
        }
        return nil
    }
}

/// A JSON Schema check of the subset `openapi.yaml` uses (OpenAPI 3.1): `$ref`, `allOf`, `type`
/// (one or several, `null` among them), `properties`, `required`, `additionalProperties`,
/// `items`, `enum`, `const`, `format` (uuid, date, date-time), `pattern`, lengths and bounds.
/// Stricter than JSON Schema on one point, the one that matters for answers: an object member
/// its schema does not name is a problem unless the schema allows additional members.
struct SchemaCheck {
    let document: [String: Any]

    func mapping(_ value: Any?) -> [String: Any]? {
        guard let dictionary = value as? [AnyHashable: Any] else { return nil }
        return Dictionary(uniqueKeysWithValues: dictionary.map { ("\($0.key)", $0.value) })
    }

    /// Follows a local `$ref` (`#/components/…`).
    func resolve(_ value: Any?) -> [String: Any]? {
        guard let object = mapping(value) else { return nil }
        guard let reference = object["$ref"] as? String else { return object }
        guard reference.hasPrefix("#/") else { return nil }
        var current: Any? = document
        for part in reference.dropFirst(2).split(separator: "/") { current = mapping(current)?[String(part)] }
        return resolve(current)
    }

    /// The schema's parts: itself and, through `allOf`, every part it is made of.
    func parts(_ schema: [String: Any]) -> [[String: Any]] {
        var result = [schema]
        for part in schema["allOf"] as? [Any] ?? [] {
            if let resolved = resolve(part) { result += parts(resolved) }
        }
        return result
    }

    func problems(_ value: JSONValue, _ rawSchema: Any, at path: String) -> [String] {
        guard let schema = resolve(rawSchema) else { return ["\(path): unresolvable schema"] }
        let all = parts(schema)
        var problems: [String] = []
        for part in all { problems += local(value, part, at: path) }
        if case .object(let members) = value {
            var named: Set<String> = []
            var additional: Any?
            for part in all {
                named.formUnion((mapping(part["properties"]) ?? [:]).keys)
                if let allowed = part["additionalProperties"] { additional = allowed }
            }
            for (key, member) in members where !named.contains(key) {
                switch additional {
                case let allowed as Bool where allowed: break
                case let extra? where !(extra is Bool): problems += self.problems(member, extra, at: "\(path).\(key)")
                default: problems.append("\(path).\(key): not in the schema")
                }
            }
        }
        return problems
    }

    /// What one schema part (no `allOf`) says of the value itself.
    private func local(_ value: JSONValue, _ schema: [String: Any], at path: String) -> [String] {
        var problems: [String] = []
        let types: [String] =
            (schema["type"] as? [Any])?.compactMap { $0 as? String } ?? (schema["type"] as? String).map { [$0] } ?? []
        if !types.isEmpty, !types.contains(where: { Self.has(value, type: $0) }) {
            return ["\(path): \(Self.describe(value)) is not \(types.joined(separator: " or "))"]
        }
        if let allowed = schema["enum"] as? [Any], !allowed.contains(where: { Self.equal(value, $0) }) {
            problems.append("\(path): \(Self.describe(value)) is not one of \(allowed)")
        }
        if let constant = schema["const"], !Self.equal(value, constant) {
            problems.append("\(path): \(Self.describe(value)) is not \(constant)")
        }
        switch value {
        case .string(let text):
            problems += string(text, schema, at: path)
        case .number(let number):
            if let minimum = (schema["minimum"] as? NSNumber)?.doubleValue, number < minimum {
                problems.append("\(path): \(number) < \(minimum)")
            }
            if let maximum = (schema["maximum"] as? NSNumber)?.doubleValue, number > maximum {
                problems.append("\(path): \(number) > \(maximum)")
            }
        case .object(let members):
            for key in schema["required"] as? [String] ?? [] where members[key] == nil {
                problems.append("\(path).\(key): required, missing")
            }
            for (key, member) in members {
                if let property = mapping(schema["properties"])?[key] {
                    problems += self.problems(member, property, at: "\(path).\(key)")
                }
            }
        case .array(let items):
            if let itemSchema = schema["items"] {
                for (index, item) in items.enumerated() {
                    problems += self.problems(item, itemSchema, at: "\(path)[\(index)]")
                }
            }
        default:
            break
        }
        return problems
    }

    private func string(_ text: String, _ schema: [String: Any], at path: String) -> [String] {
        var problems: [String] = []
        let length = text.count
        if let minimum = schema["minLength"] as? Int, length < minimum {
            problems.append("\(path): shorter than \(minimum)")
        }
        if let maximum = schema["maxLength"] as? Int, length > maximum {
            problems.append("\(path): longer than \(maximum)")
        }
        if let pattern = schema["pattern"] as? String,
            text.range(of: pattern, options: .regularExpression) == nil
        {
            problems.append("\(path): \(text.debugDescription) does not match \(pattern)")
        }
        switch schema["format"] as? String {
        case "uuid":
            if text.utf8.count != 36 || UUID(uuidString: text) == nil || text != text.lowercased() {
                problems.append("\(path): \(text.debugDescription) is not a lower-case uuid")
            }
        case "date-time":
            if ISO8601.date(from: text) == nil {
                problems.append("\(path): \(text.debugDescription) is not a date-time")
            }
        case "date":
            if text.range(of: #"^\d{4}-\d{2}-\d{2}$"#, options: .regularExpression) == nil {
                problems.append("\(path): \(text.debugDescription) is not a date")
            }
        default:
            break
        }
        return problems
    }

    static func has(_ value: JSONValue, type: String) -> Bool {
        switch (value, type) {
        case (.null, "null"), (.bool, "boolean"), (.string, "string"), (.array, "array"), (.object, "object"),
            (.number, "number"):
            true
        case (.number(let number), "integer"): number.rounded() == number
        default: false
        }
    }

    static func equal(_ value: JSONValue, _ yaml: Any) -> Bool {
        switch value {
        case .null: yaml is NSNull
        case .string(let text): (yaml as? String) == text
        case .bool(let flag): (yaml as? Bool) == flag
        case .number(let number): (yaml as? NSNumber)?.doubleValue == number
        default: false
        }
    }

    static func describe(_ value: JSONValue) -> String {
        String(decoding: value.jsonData(), as: UTF8.self)
    }
}
