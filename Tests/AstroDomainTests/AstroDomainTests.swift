import Foundation
import Testing

@testable import AstroDomain

@Suite struct TypedIDTests {
    @Test func parsesAnyCaseAndPrintsLowercase() throws {
        let id = try #require(JobID("9B2F0C4E-1D2A-4C3B-8E5F-6A7B8C9D0E1F"))
        #expect(id.description == "9b2f0c4e-1d2a-4c3b-8e5f-6a7b8c9d0e1f")
        #expect(JobID("not-a-uuid") == nil)
    }

    @Test func codableAsString() throws {
        let id = UserID.random()
        let data = try JSONEncoder().encode(["userId": id])
        #expect(String(decoding: data, as: UTF8.self) == "{\"userId\":\"\(id.description)\"}")
        let back = try JSONDecoder().decode([String: UserID].self, from: data)
        #expect(back["userId"] == id)
    }

    @Test func aNewProfilesIDIsTheSameForItsJobEveryTime() {
        let job = JobID.random()
        #expect(ProfileID.created(by: job) == ProfileID.created(by: job))
        #expect(ProfileID.created(by: job) != ProfileID.created(by: JobID.random()))
        #expect(ProfileID.created(by: job).uuid != job.uuid)
    }

    @Test func rejectsNonUUIDWithAClearMessage() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([String: JobID].self, from: Data("{\"jobId\":\"42\"}".utf8))
        }
    }
}

@Suite struct JobTypeTests {
    @Test func contractJobTypesAndFailedEvents() {
        #expect(JobType.all.count == 19)
        #expect(JobType.chartSynastry.failedEvent == "chart.failed")
        #expect(JobType.chartRender.failedEvent == "chart.failed")
        #expect(JobType.billingRecoverNotifications.failedEvent == "billing.recover-notifications.failed")
        #expect(JobType.userDelete.failedEvent == "user.delete.failed")
        #expect(JobType.storyIllustrate.failedEvent == "story.failed")
        #expect(JobType.chartCalculate.failedEvent == "chart.failed")
        #expect(JobType.reportRequest.failedEvent == "report.failed")
        #expect(JobType.reportGenerate.failedEvent == "report.failed")
        #expect(JobType.billingVerifyPurchase.failedEvent == "billing.verify-purchase.failed")
        #expect(JobType(rawValue: "sample.work").failedEvent == "sample.work.failed")
    }

    /// The constants are the wire's names: a renamed constant must not rename an event.
    @Test func eventTypesKeepTheirWireNames() {
        #expect(
            EventType.all.map(\.rawValue) == [
                "chart.calculated", "chart.failed",
                "billing.credits-issued", "billing.purchase-rejected", "billing.verify-purchase.failed",
                "billing.credit-consumed", "report.completed", "report.failed",
                "billing.credit-refunded", "billing.refund-credit.failed",
                "billing.notification-recorded", "billing.credits-revoked", "billing.credits-restored",
                "billing.consumption-requested", "billing.store-notification.failed",
                "story.generated", "story.illustrated", "story.read-recorded", "achievement.earned", "story.failed",
                "billing.consumption-answered", "billing.send-consumption.failed",
                "billing.notifications-recovered", "billing.recover-notifications.failed",
                "user.deleted", "user.delete.failed", "story.erase-illustrations.failed",
                "user.exported", "user.export.failed", "user.export-pack.failed",
                "chart.computed",
                "chart.calculate.cancelled", "billing.verify-purchase.cancelled", "report.request.cancelled",
                "report.generate.cancelled", "billing.refund-credit.cancelled", "billing.store-notification.cancelled",
                "story.generate.cancelled", "story.illustrate.cancelled", "story.read.cancelled",
                "billing.send-consumption.cancelled", "billing.recover-notifications.cancelled",
                "user.delete.cancelled", "story.erase-illustrations.cancelled",
                "user.export.cancelled", "user.export-pack.cancelled",
                "chart.synastry.cancelled", "chart.transits.cancelled", "chart.return.cancelled",
                "chart.render.cancelled",
            ]
        )
        #expect(Set(EventType.all).count == EventType.all.count)
    }

    /// Every failure a contract job can publish is one of the contract's event types.
    @Test func everyFailedEventIsAContractEvent() {
        for type in JobType.all { #expect(EventType.all.contains(type.failedEvent), "\(type)") }
        #expect(JobType.billingRefundCredit.failedEvent == .billingRefundCreditFailed)
        #expect(JobType.billingStoreNotification.failedEvent == .billingStoreNotificationFailed)
        #expect(JobType.billingSendConsumption.failedEvent == .billingSendConsumptionFailed)
    }

    @Test func terminalStatuses() {
        #expect(JobStatus.allCases.filter(\.isTerminal) == [.succeeded, .failed, .dead, .cancelled])
        #expect(BrokerNames.deadLetterQueue(of: "chart.calculate") == "chart.calculate.dead")
    }
}

@Suite struct EventTests {
    @Test func eventJSONHasTheContractKeys() throws {
        let jobID = JobID.random()
        let date = Date(timeIntervalSince1970: 1_795_000_000)
        let event = JobEvent(jobID: jobID, type: "chart.calculated", occurredAt: date, fields: ["chartId": "abc"])
        let object = try #require(try JSONSerialization.jsonObject(with: event.jsonData()) as? [String: Any])
        #expect(object["jobId"] as? String == jobID.description)
        #expect(object["type"] as? String == "chart.calculated")
        #expect(object["occurredAt"] as? String == "2026-11-18T11:06:40Z")
        #expect(object["chartId"] as? String == "abc")
        #expect(object["error"] == nil)
        #expect(object["userId"] == nil)
    }

    /// Every event a user should see names the user (the gateway routes live events by it).
    @Test func eventJSONCarriesTheUser() throws {
        let user = UserID.random()
        let event = JobEvent(
            jobID: .random(),
            userID: user,
            type: "chart.failed",
            error: JobError(code: "x", message: "y")
        )
        let object = try JSONDecoder().decode(JSONValue.self, from: event.jsonData())
        #expect(object["userId"]?.stringValue == user.description)
        guard case .object(let members) = object else {
            Issue.record("not an object")
            return
        }
        #expect(JobEvent.userID(in: members) == user)
        #expect(JobEvent.userID(in: ["userId": "not-a-uuid"]) == nil)
    }

    @Test func failedEventCarriesCodeAndMessage() throws {
        let event = JobEvent(
            jobID: .random(),
            type: "chart.failed",
            error: JobError(code: "invalid-payload", message: "missing field \"userId\"")
        )
        let object = try #require(try JSONSerialization.jsonObject(with: event.jsonData()) as? [String: Any])
        let error = try #require(object["error"] as? [String: String])
        #expect(error == ["code": "invalid-payload", "message": "missing field \"userId\""])
    }

    @Test func iso8601KeepsMillisecondsOnlyWhenPresent() throws {
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0.25)) == "1970-01-01T00:00:00.250Z")
        let parsed = try #require(ISO8601.date(from: "2026-11-22T10:00:00.500+02:00"))
        #expect(parsed.timeIntervalSince1970 == 1_795_334_400.5)
        #expect(ISO8601.date(from: "yesterday") == nil)
    }

    /// Fuzzing found that a decoded instant lost a millisecond on every encode (the formatter
    /// truncated .002, stored as .00199…): every millisecond of a second now survives decoding
    /// and encoding unchanged, before 1970 too.
    @Test func iso8601RoundTripsEveryMillisecond() throws {
        for base in ["2026-11-22T10:00:00", "1969-12-31T23:59:59"] {
            for millisecond in 1..<1000 {
                let digits = String(millisecond)
                let text = base + "." + String(repeating: "0", count: 3 - digits.count) + digits + "Z"
                let date = try #require(ISO8601.date(from: text))
                #expect(ISO8601.string(from: date) == text)
            }
        }
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0.0025)) == "1970-01-01T00:00:00.003Z")
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: 0.9999)) == "1970-01-01T00:00:01Z")
        #expect(ISO8601.string(from: Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
    }

    @Test func jsonValueRoundTrips() throws {
        let value: JSONValue = ["a": 1, "b": [true, nil, "x"], "c": 2.5]
        let data = try JSONCoding.encoder.encode(value)
        #expect(String(decoding: data, as: UTF8.self) == "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":2.5}")
        #expect(try JSONDecoder().decode(JSONValue.self, from: data) == value)
        #expect(value["a"] == .number(1))
        #expect(value["b"]?.stringValue == nil)
    }
}

/// Text from jobs is bounded and free of control characters; errors quote it short (issue 14).
@Suite struct TextHardeningTests {
    @Test func quotesAreShortAndEscaped() {
        #expect(InputQuote.short("2026-13-01") == "\"2026-13-01\"")
        #expect(InputQuote.short("a\u{0}b\u{1B}[2J\"\\") == "\"a\\u{0}b\\u{1B}[2J\\\"\\\\\"")
        let long = InputQuote.short(String(repeating: "x", count: 200_000))
        #expect(long == "\"" + String(repeating: "x", count: 40) + "…\" (200000 characters)")
        #expect(InputQuote.escapedForTerminal("Mia\u{1B}]0;pwned\u{7}") == "Mia\\u{1B}]0;pwned\\u{7}")
        #expect(InputQuote.escapedForTerminal("Оленка \u{202E}abc") == "Оленка \\u{202E}abc")
    }

    @Test func textRulesCountScalarsAndRefuseControls() {
        #expect(TextRules.problem(in: "Mia", maximum: 50) == nil)
        #expect(TextRules.problem(in: "", maximum: 50) == .tooShort(minimum: 1))
        #expect(TextRules.problem(in: "", minimum: 0, maximum: 50) == nil)
        // 30 flags are 30 characters but 60 scalars, which is what the database counts.
        let flags = String(repeating: "🇺🇦", count: 30)
        #expect(flags.count == 30)
        #expect(TextRules.problem(in: flags, maximum: 50) == .tooLong(maximum: 50, length: 60))
        #expect(TextRules.problem(in: "a\u{0}b", maximum: 50) == .controlCharacter(position: 2, scalar: 0))
        #expect(TextRules.problem(in: "ab\u{202E}", maximum: 50) == .controlCharacter(position: 3, scalar: 0x202E))
        #expect(TextRules.problem(in: "x\u{85}", maximum: 50) == .controlCharacter(position: 2, scalar: 0x85))
        #expect(TextRules.problem(in: "line\nbreak", maximum: 50) != nil)
        #expect(TextRules.problem(in: "line\nbreak", maximum: 50, allowNewline: true) == nil)
        #expect(TextRules.problem(in: "Ольга-Марія О'Ніл 👩‍👩‍👧", maximum: 50) == nil)
    }

    @Test func birthDataRefusesControlCharactersAndLongPlaces() {
        func data(name: String = "Me", place: String = "Kyiv") -> BirthData {
            BirthData(
                name: name,
                birthDate: "1990-10-07",
                birthTime: "15:00",
                timezone: "Europe/Kyiv",
                latitude: 50.45,
                longitude: 30.52,
                locationName: place
            )
        }
        #expect(
            throws: ChartInputError(
                .invalidCharacters,
                field: "profile.name",
                message: "profile.name: contains a control character (U+0000) at character 3"
            )
        ) {
            try data(name: "Me\u{0}").validated()
        }
        #expect((try? data(name: String(repeating: "🇺🇦", count: 30)).validated()) == nil)
        do {
            _ = try data(place: "Kyiv\u{1B}[31m").validated()
            Issue.record("an escape in the place was accepted")
        } catch {
            #expect(error.code == .invalidCharacters)
            #expect(error.field == "profile.locationName")
        }
        do {
            _ = try data(place: String(repeating: "K", count: 201)).validated()
            Issue.record("a 201-character place was accepted")
        } catch {
            #expect(error.code == .invalidLocationName)
        }
        #expect((try? data(place: String(repeating: "K", count: 200)).validated()) != nil)
        #expect((try? data(place: "").validated()) != nil)
        do {
            _ = try BirthData.parseDate(String(repeating: "9", count: 100_000))
        } catch {
            #expect(error.message.count < 200, "the message quotes only a prefix")
        }
    }

    @Test func jobErrorsEscapeControlCharactersAndStayBounded() {
        let error = JobError(code: "invalid-payload", message: "area: \"x\u{0}\" is not one of …")
        #expect(!error.message.unicodeScalars.contains { $0.value == 0 })
        #expect(error.message.contains("\\u{0}"))
        let long = JobError(code: "c", message: String(repeating: "y", count: 10_000))
        #expect(long.message.count == JobError.maximumMessageLength + 1)
        #expect(JobError(code: "c", message: "two\nlines").message == "two\nlines")
    }
}
