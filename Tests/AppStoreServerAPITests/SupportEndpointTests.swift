import AppStoreServerFake
import Foundation
import Testing

@testable import AppStoreServerAPI

/// The support and notification endpoints against the fake: Apple's paths, bodies, error codes
/// and pagination.
@Suite struct SupportEndpointTests {
    static let jws = Fixture.signedTransaction

    @Test func anOrderIsFoundOrReportedInvalidAndABadIdNeverLeaves() async throws {
        let fixture = try Fixture()
        let client = try fixture.client()
        fixture.fake.registerOrder("MK5TTTVWJH", signedTransactions: [Self.jws, Self.jws])
        let found = try await client.lookUpOrder(orderID: "MK5TTTVWJH")
        #expect(found.isValid && found.signedTransactions.count == 2)
        let unknown = try await client.lookUpOrder(orderID: "NOPE1234")
        #expect(!unknown.isValid && unknown.status == 1 && unknown.signedTransactions.isEmpty)
        let before = fixture.fake.requestCount
        for bad in ["", "MK5-TTT", String(repeating: "A", count: 65), "MK5/../x"] {
            await #expect(throws: AppStoreAPIError.self) { try await client.lookUpOrder(orderID: bad) }
        }
        #expect(fixture.fake.requestCount == before)
    }

    @Test func refundHistoryPagesWithItsRevisionAndRefusesUnknownIdsAndRevisions() async throws {
        let fixture = try Fixture()
        let client = try fixture.client()
        fixture.fake.setPageSize(2)
        fixture.fake.registerRefunds(Array(repeating: Self.jws, count: 5), forTransactionIDs: ["2000000000000001"])
        var revision: String?
        var pages = 0
        var total = 0
        repeat {
            let page = try await client.refundHistory(transactionID: "2000000000000001", revision: revision)
            pages += 1
            total += page.signedTransactions.count
            revision = page.hasMore ? page.revision : nil
        } while revision != nil
        #expect(pages == 3 && total == 5)
        let missing = await #expect(throws: AppStoreAPIError.self) {
            try await client.refundHistory(transactionID: "2000000000000999")
        }
        #expect(missing?.kind == .transactionNotFound && missing?.errorCode == 4_040_010)
        let badRevision = await #expect(throws: AppStoreAPIError.self) {
            try await client.refundHistory(transactionID: "2000000000000001", revision: "bm90LWEtcmV2aXNpb24=")
        }
        #expect(badRevision?.kind == .invalidRequest && badRevision?.errorCode == 4_000_005)
    }

    @Test func notificationHistoryPagesAndAppliesApplesDateRules() async throws {
        let fixture = try Fixture()
        let client = try fixture.client()
        fixture.fake.setPageSize(2)
        let now = Date()
        for index in 0..<5 {
            fixture.fake.addNotificationHistory(
                signedPayload: Self.jws,
                sentAt: now.addingTimeInterval(-Double(100 + index))
            )
        }
        // One outside the window.
        fixture.fake.addNotificationHistory(signedPayload: Self.jws, sentAt: now.addingTimeInterval(-7_200))
        let request = NotificationHistoryRequest(startDate: now.addingTimeInterval(-3_600), endDate: now)
        var token: String?
        var items = 0
        var pages = 0
        repeat {
            let page = try await client.notificationHistory(request, paginationToken: token)
            pages += 1
            items += page.notificationHistory.count
            token = page.hasMore ? page.paginationToken : nil
        } while token != nil
        #expect(pages == 3 && items == 5)
        let tokens = fixture.fake.notificationHistoryTokens
        // libcurl may send a request twice on a closed keep-alive connection: count distinct pages.
        #expect(tokens.first == .some(nil) && Set(tokens.compactMap { $0 }).count == 2, "\(tokens)")

        let backwards = await #expect(throws: AppStoreAPIError.self) {
            try await client.notificationHistory(NotificationHistoryRequest(startDate: now, endDate: now))
        }
        #expect(backwards?.kind == .invalidRequest && backwards?.errorCode == 4_000_013)
        let tooOld = await #expect(throws: AppStoreAPIError.self) {
            try await client.notificationHistory(
                NotificationHistoryRequest(startDate: now.addingTimeInterval(-181 * 86_400), endDate: now)
            )
        }
        #expect(tooOld?.errorCode == 4_000_012)
        let forged = await #expect(throws: AppStoreAPIError.self) {
            try await client.notificationHistory(request, paginationToken: "Zm9yZ2Vk")
        }
        #expect(forged?.kind == .invalidRequest && forged?.errorCode == 4_000_014 && forged?.isTransient == false)
    }

    @Test func aRateLimitIsRetriedAfterItsRetryAfter() async throws {
        let fixture = try Fixture()
        let timing = VirtualTiming()
        // A generous request timeout: on a loaded machine a timed-out first attempt would use up the
        // queued 429 and retry on the plain backoff instead.
        let client = try fixture.client(
            requestTimeout: .seconds(60),
            retryPolicy: RetryPolicy(maxAttempts: 3),
            timing: timing.timing
        )
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 2))
        let page = try await client.notificationHistory(
            NotificationHistoryRequest(startDate: Date().addingTimeInterval(-60), endDate: Date())
        )
        #expect(page.notificationHistory.isEmpty && !page.hasMore)
        #expect(timing.sleeps == [.seconds(2)])
        fixture.fake.enqueueFailure(.rateLimited(retryAfter: 1), count: 10)
        let limited = await #expect(throws: AppStoreAPIError.self) { try await client.requestTestNotification() }
        #expect(limited?.kind == .rateLimited && limited?.isTransient == true)
    }

    @Test func aTestNotificationNeedsAURLAndAnUnknownTokenIsNotFound() async throws {
        let fixture = try Fixture()
        let client = try fixture.client()
        let noURL = await #expect(throws: AppStoreAPIError.self) { try await client.requestTestNotification() }
        #expect(noURL?.kind == .notFound && noURL?.errorCode == 4_040_007)
        let unknown = await #expect(throws: AppStoreAPIError.self) {
            try await client.testNotificationStatus(token: "00000000-0000-0000-0000-000000000000_1")
        }
        #expect(unknown?.kind == .notFound && unknown?.errorCode == 4_040_008)
        await #expect(throws: AppStoreAPIError.self) { try await client.testNotificationStatus(token: "a b") }
    }
}
