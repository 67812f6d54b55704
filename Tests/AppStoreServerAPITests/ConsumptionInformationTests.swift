import AppStoreServerFake
import Foundation
import Testing

@testable import AppStoreServerAPI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The ConsumptionRequest body (App Store Server API 1.19+) and Send Consumption Information
/// against the fake, which validates like Apple.
@Suite("Send Consumption Information", .timeLimit(.minutes(1)))
struct ConsumptionInformationTests {
    static func body(
        _ percentage: Int? = 60_000,
        _ delivery: ConsumptionRequestBody.DeliveryStatus = .delivered,
        _ preference: ConsumptionRequestBody.RefundPreference? = .grantProrated,
        sample: Bool = true
    ) throws -> ConsumptionRequestBody {
        try ConsumptionRequestBody(
            consumptionPercentage: percentage,
            deliveryStatus: delivery,
            refundPreference: preference,
            sampleContentProvided: sample
        )
    }

    @Test func theBodyIsAppleJSONWithConsentAndWithoutNulls() throws {
        let full = String(decoding: try Self.body().jsonData(), as: UTF8.self)
        #expect(
            full
                == #"{"consumptionPercentage":60000,"customerConsented":true,"deliveryStatus":"DELIVERED","#
                + #""refundPreference":"GRANT_PRORATED","sampleContentProvided":true}"#
        )
        let bare = String(decoding: try Self.body(nil, .undeliveredOther, nil, sample: false).jsonData(), as: UTF8.self)
        #expect(
            bare == #"{"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","sampleContentProvided":false}"#
        )
        let decoded = try JSONDecoder().decode(ConsumptionRequestBody.self, from: try Self.body().jsonData())
        #expect(decoded == (try Self.body()))
    }

    @Test func whatAppleRefusesCannotBeMade() throws {
        #expect(throws: ConsumptionRequestBodyError.self) { try Self.body(100_001, .delivered, .decline) }
        #expect(throws: ConsumptionRequestBodyError.self) { try Self.body(-1, .delivered, .decline) }
        #expect(throws: ConsumptionRequestBodyError.self) { try Self.body(10, .undeliveredServerOutage, .grantFull) }
        #expect(throws: ConsumptionRequestBodyError.self) { try Self.body(0, .delivered, .grantProrated) }
        #expect(throws: ConsumptionRequestBodyError.self) { try Self.body(nil, .delivered, .grantProrated) }
        _ = try Self.body(0, .undeliveredOther, .grantFull)
        _ = try Self.body(100_000, .delivered, .decline)
        // A stored body that says customerConsented false does not decode into a sendable one.
        let refused = Data(
            #"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#.utf8
        )
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(ConsumptionRequestBody.self, from: refused) }
    }

    @Test func aValidBodyIsAcceptedAndRecorded() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "2000000000000001")
        let receipt = try await fixture.client().sendConsumptionInformation(
            transactionID: "2000000000000001",
            body: try Self.body()
        )
        #expect(receipt == ConsumptionSendReceipt(httpStatus: 202, attempts: 1))
        let received = fixture.fake.consumptionRequests
        #expect(received.map(\.transactionID) == ["2000000000000001"])
        #expect(received.first?.body == String(decoding: try Self.body().jsonData(), as: UTF8.self))
    }

    @Test func anUnknownTransactionIs404AndNothingIsRecorded() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        let client = try fixture.client()
        let body = try Self.body()
        do {
            _ = try await client.sendConsumptionInformation(transactionID: "99", body: body)
            Issue.record("an unknown transaction was accepted")
        } catch {
            #expect(error.code == "transaction-not-found")
            #expect(error.httpStatus == 404 && error.errorCode == 4_040_010)
            #expect(!error.isTransient)
        }
        #expect(fixture.fake.consumptionRequests.isEmpty)
    }

    @Test func aRateLimitIsRetriedAfterRetryAfterThenSent() async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "5")
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 2))
        let virtual = VirtualTiming()
        let receipt = try await fixture.client(timing: virtual.timing)
            .sendConsumptionInformation(transactionID: "5", body: try Self.body())
        #expect(receipt.attempts == 2)
        #expect(virtual.sleeps == [.seconds(2)])
        #expect(fixture.fake.requestCount(path: AppStoreServerFake.consumptionPath(transactionID: "5")) == 2)
        #expect(fixture.fake.consumptionRequests.count == 1)
    }

    /// Apple's 400s, sent raw (a body this client would never make), each with Apple's code.
    @Test(arguments: [
        (#"{"customerConsented":false,"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#, 4_000_035),
        (#"{"deliveryStatus":"DELIVERED","sampleContentProvided":true}"#, 4_000_035),
        (#"{"customerConsented":true,"deliveryStatus":"LOST","sampleContentProvided":true}"#, 4_000_036),
        (#"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":"yes"}"#, 4_000_041),
        (
            #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"refundPreference":"MAYBE"}"#,
            4_000_044
        ),
        (
            #"{"customerConsented":true,"deliveryStatus":"DELIVERED","sampleContentProvided":true,"consumptionPercentage":100001}"#,
            4_000_000
        ),
        (
            #"{"customerConsented":true,"deliveryStatus":"UNDELIVERED_OTHER","sampleContentProvided":true,"consumptionPercentage":5}"#,
            4_000_000
        ),
    ])
    func theFakeRefusesLikeApple(body: String, code: Int) async throws {
        let fixture = try Fixture()
        defer { fixture.fake.stop() }
        fixture.fake.register(signedTransaction: Fixture.signedTransaction, forTransactionID: "6")
        let token = try BearerTokenProvider.sign(
            configuration: try fixture.configuration(),
            issuedAt: Int(Date().timeIntervalSince1970)
        )
        var request = URLRequest(
            url: fixture.fake.baseURL.appendingPathComponent(AppStoreServerFake.consumptionPath(transactionID: "6"))
        )
        request.httpMethod = "PUT"
        request.httpBody = Data(body.utf8)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 400)
        let apple = try JSONDecoder().decode([String: AnyCodableScalar].self, from: data)
        #expect(apple["errorCode"] == .number(Double(code)))
        #expect(fixture.fake.consumptionRequests.isEmpty)
    }
}

/// A JSON scalar, enough to read Apple's error body.
enum AnyCodableScalar: Decodable, Equatable {
    case number(Double)
    case string(String)
    init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        if let number = try? value.decode(Double.self) {
            self = .number(number)
        } else {
            self = .string(try value.decode(String.self))
        }
    }
}
