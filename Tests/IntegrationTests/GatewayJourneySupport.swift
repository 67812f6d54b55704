import AstroDomain
import Foundation
import Testing

/// "A user who used every feature", through the real gateway and workers: what UserExportTests,
/// UserDeletionTests and InfoLogPrivacyTests each build before they check their own outcome
/// (the export's contents, the erasure, the logs).
enum GatewayJourney {
    typealias Answer = GatewayHarness.HTTPAnswer

    /// Calls to a running gateway, and a job's end awaited through it.
    struct Client: Sendable {
        let base: String
        let processes: GatewayHarness.Processes

        func call(_ method: String, _ path: String, token: String, body: JSONValue? = nil) async throws -> Answer {
            try await GatewayHarness.request(method, "\(base)\(path)", token: token, body: body)
        }

        /// The accepted job's final state; it must have succeeded (the processes' logs otherwise).
        func finished(_ answer: Answer, token: String) async throws -> JSONValue {
            let job = try GatewayResourcesTests.accepted(answer)
            let done = try await GatewayResourcesTests.finished(base, job, token: token) { processes.output }
            #expect(done["status"] == "succeeded", "\(done)")
            return done
        }
    }

    /// The person's values, each one that no other test writes (the callers look for them).
    struct Person: Sendable {
        var name: String
        var place: String
        var birthDate: String
        var birthTime: String
        var latitude: Double
        var longitude: Double
        var child: String
    }

    /// A birth date no other test gives: 19xx-0m-1d.
    static func randomBirthDate() -> String {
        "19\(Int.random(in: 31...99))-0\(Int.random(in: 1...9))-1\(Int.random(in: 0...9))"
    }

    /// A birth time of the form 0h:mm.
    static func randomBirthTime() -> String {
        "0\(Int.random(in: 1...9)):\(Int.random(in: 10...59))"
    }

    /// What the journey made.
    struct Used: Sendable {
        var profileID: String
        var reportText: String
        /// As the gateway gave it.
        var storyID: String
    }

    /// A profile and its chart, a purchase of five credits and a career report (which spends
    /// one; waited for until its text is there), and a three-page story for the child,
    /// illustrated and read (the first reading earns an achievement). Every job must succeed.
    static func useEveryFeature(_ client: Client, user: String, token: String, as person: Person) async throws -> Used {
        let created = try await client.finished(
            try await client.call(
                "POST",
                "/v1/profiles",
                token: token,
                body: [
                    "profile": [
                        "name": .string(person.name), "birthDate": .string(person.birthDate),
                        "birthTime": .string(person.birthTime), "timezone": "Europe/Kyiv",
                        "latitude": .number(person.latitude), "longitude": .number(person.longitude),
                        "locationName": .string(person.place),
                    ]
                ]
            ),
            token: token
        )
        let profile = try #require(created["result"]?["profileId"]?.stringValue)
        let pack = try BillingLedgerIntegrationTests.signedPurchase(
            "com.astrosvitla.report.credit.pack5",
            user: UserID(user)
        )
        _ = try await client.finished(
            try await client.call(
                "POST",
                "/v1/purchases",
                token: token,
                body: ["signedTransaction": .string(pack.jws)]
            ),
            token: token
        )
        _ = try await client.finished(
            try await client.call(
                "POST",
                "/v1/reports",
                token: token,
                body: ["profileId": .string(profile), "area": "career", "language": "en"]
            ),
            token: token
        )
        var reportText = ""
        try await RuntimeTestEnvironment.eventually("the report is written", timeout: .seconds(60)) {
            let list = try await client.call("GET", "/v1/reports?profileId=\(profile)", token: token)
            guard let id = list.json?["items"]?.arrayValue?.first?["id"]?.stringValue else { return false }
            reportText =
                try await client.call("GET", "/v1/reports/\(id)", token: token).json?["text"]?.stringValue ?? ""
            return !reportText.isEmpty
        }
        let story = try await client.call(
            "POST",
            "/v1/stories",
            token: token,
            body: [
                "childName": .string(person.child), "ageGroup": 1, "theme": "courage",
                "mainCharacter": "Felix the Fox", "language": "en", "pageCount": 3,
            ]
        )
        let storyID = try #require(story.json?["storyId"]?.stringValue)
        _ = try await client.finished(story, token: token)
        _ = try await client.finished(
            try await client.call("POST", "/v1/stories/\(storyID)/illustrations", token: token),
            token: token
        )
        _ = try await client.finished(
            try await client.call("POST", "/v1/stories/\(storyID)/reads", token: token),
            token: token
        )
        return Used(profileID: profile, reportText: reportText, storyID: storyID)
    }
}
