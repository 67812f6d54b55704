import AstroDomain
import Testing

@testable import Billing

/// What the billing-worker's outcomes count, with bounded label values.
@Suite struct BillingMetricsTests {
    func grant(credits: Int, area: ReportArea?, alreadyRecorded: Bool) -> PurchaseGrant {
        PurchaseGrant(
            transactionID: "2000000000000001",
            userID: UserID.random(),
            productID: "p",
            credits: (0..<credits).map { _ in CreditID.random() },
            area: area,
            alreadyRecorded: alreadyRecorded,
            restoredFrom: nil
        )
    }

    @Test func aFirstRecordedPurchaseCountsItsCreditsAndARepeatCountsNothing() {
        let first = BillingMeasurements.verified(grant(credits: 5, area: nil, alreadyRecorded: false))
        #expect(first.map(\.metric) == [.purchasesVerified, .creditsIssued])
        #expect(first[1].labelValues == ["any"] && first[1].amount == 5)
        let career = BillingMeasurements.verified(grant(credits: 1, area: .career, alreadyRecorded: false))
        #expect(career[1].labelValues == ["career"])
        #expect(BillingMeasurements.verified(grant(credits: 5, area: nil, alreadyRecorded: true)).isEmpty)
        // A restore records the purchase but issues nothing.
        #expect(
            BillingMeasurements.verified(grant(credits: 0, area: nil, alreadyRecorded: false)).map(\.metric) == [
                .purchasesVerified
            ]
        )
    }

    @Test func rejectionReasonsComeFromAClosedSet() {
        #expect(BillingMeasurements.rejectionReason("unknown-product") == "unknown-product")
        #expect(BillingMeasurements.rejectionReason("invalid-signature") == "verification")
        #expect(BillingMeasurements.rejectionReason("bundle-id-mismatch") == "verification")
        #expect(BillingMeasurements.rejectionReason("transaction-not-found") == "appstore")
        #expect(BillingMeasurements.rejectionReason("anything a forger sends") == "other")
        for code in ["unknown-product", "invalid-signature", "transaction-not-found", "x"] {
            let label = BillingMeasurements.rejectionReason(code)
            #expect(MetricLabel.purchaseRejectionReasons.contains(label) || label == MetricLabel.other)
        }
    }

    @Test func notificationsCountRevokedAndRestoredCredits() {
        let credits = [CreditID.random(), CreditID.random()]
        let revoked = BillingMeasurements.notification(NotificationEffect(action: "revoked", credits: credits))
        #expect(revoked.map(\.metric) == [.creditsRevoked] && revoked[0].amount == 2)
        let restored = BillingMeasurements.notification(NotificationEffect(action: "restored", credits: credits))
        #expect(restored.map(\.metric) == [.creditsRestored])
        #expect(BillingMeasurements.notification(NotificationEffect(action: "recorded")).isEmpty)
        #expect(BillingMeasurements.notification(NotificationEffect(action: "revoked")).isEmpty)
    }

    @Test func aRefundCountsItsAreaAndARevocationWhenThePurchaseWasRefunded() {
        #expect(BillingMeasurements.refunded(area: .health, revoked: false).map(\.metric) == [.creditsRefunded])
        #expect(
            BillingMeasurements.refunded(area: .health, revoked: true).map(\.metric) == [
                .creditsRefunded, .creditsRevoked,
            ]
        )
        #expect(BillingMeasurements.consumed(area: .finances)[0].labelValues == ["finances"])
    }

    @Test func theAuditIntervalIsBounded() throws {
        #expect(try LedgerAuditProbe.fromEnvironment([:]).interval == .seconds(300))
        #expect(try LedgerAuditProbe.fromEnvironment(["LEDGER_AUDIT_INTERVAL_SECONDS": "60"]).interval == .seconds(60))
        for bad in ["0", "9", "86401", "5m", "-1"] {
            #expect(throws: (any Error).self) {
                try LedgerAuditProbe.fromEnvironment(["LEDGER_AUDIT_INTERVAL_SECONDS": bad])
            }
        }
    }
}
