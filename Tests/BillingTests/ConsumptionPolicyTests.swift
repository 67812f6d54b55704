import AppStoreServerAPI
import Testing

@testable import Billing
@testable import WorkerRuntime

/// The answer to a CONSUMPTION_REQUEST from the ledger's facts, by each refund rule.
@Suite struct ConsumptionPolicyTests {
    static let unspent = ConsumptionFacts(granted: true, credits: 1, spent: 0, delivered: 0, returned: 0)
    static let deliveredOne = ConsumptionFacts(granted: true, credits: 1, spent: 1, delivered: 1, returned: 0)
    static let failedAndReturned = ConsumptionFacts(granted: true, credits: 1, spent: 0, delivered: 0, returned: 1)
    static let packThreeOfFive = ConsumptionFacts(granted: true, credits: 5, spent: 4, delivered: 3, returned: 0)
    static let neverRedeemed = ConsumptionFacts(granted: false, credits: 0, spent: 0, delivered: 0, returned: 0)

    @Test func byDeliveryGrantsWhatWasNeverDeliveredAndDeclinesWhatWas() {
        let policy = ConsumptionPolicy(refundRule: .byDelivery, sampleContentProvided: true)
        let unspent = policy.body(for: Self.unspent)
        #expect(unspent.deliveryStatus == .delivered && unspent.consumptionPercentage == 0)
        #expect(unspent.refundPreference == .grantFull)
        let delivered = policy.body(for: Self.deliveredOne)
        #expect(delivered.consumptionPercentage == 100_000 && delivered.refundPreference == .decline)
        let returned = policy.body(for: Self.failedAndReturned)
        #expect(returned.consumptionPercentage == 0 && returned.refundPreference == .grantFull)
        // A pack of 5 with 3 reports stored (a 4th spent, its report not written yet): 60 %.
        let pack = policy.body(for: Self.packThreeOfFive)
        #expect(pack.consumptionPercentage == 60_000 && pack.refundPreference == .grantProrated)
        let never = policy.body(for: Self.neverRedeemed)
        #expect(never.deliveryStatus == .undeliveredOther && never.consumptionPercentage == 0)
        #expect(never.refundPreference == .grantFull)
        #expect(never.customerConsented && never.sampleContentProvided)
    }

    @Test func declineIfDeliveredAndNone() {
        let decline = ConsumptionPolicy(refundRule: .declineIfDelivered, sampleContentProvided: false)
        #expect(decline.body(for: Self.packThreeOfFive).refundPreference == .decline)
        #expect(decline.body(for: Self.unspent).refundPreference == .grantFull)
        #expect(!decline.body(for: Self.unspent).sampleContentProvided)
        let none = ConsumptionPolicy(refundRule: .none)
        #expect(none.body(for: Self.deliveredOne).refundPreference == nil)
        #expect(none.body(for: Self.packThreeOfFive).consumptionPercentage == 60_000)
    }

    /// Facts out of step (more delivered than granted) still give a body Apple accepts.
    @Test func inconsistentFactsStayInRange() {
        let odd = ConsumptionFacts(granted: true, credits: 2, spent: 5, delivered: 9, returned: 0)
        #expect(ConsumptionPolicy.default.body(for: odd).consumptionPercentage == 100_000)
        let empty = ConsumptionFacts(granted: true, credits: 0, spent: 0, delivered: 0, returned: 0)
        #expect(ConsumptionPolicy.default.body(for: empty).deliveryStatus == .undeliveredOther)
    }

    @Test func theEnvironmentIsValidated() throws {
        #expect(try ConsumptionPolicy.fromEnvironment([:]) == .default)
        let set = try ConsumptionPolicy.fromEnvironment([
            "BILLING_CONSUMPTION_REFUND_PREFERENCE": "Decline-If-Delivered",
            "BILLING_CONSUMPTION_SAMPLE_CONTENT": "false",
        ])
        #expect(set == ConsumptionPolicy(refundRule: .declineIfDelivered, sampleContentProvided: false))
        #expect(
            try ConsumptionPolicy.fromEnvironment(["BILLING_CONSUMPTION_REFUND_PREFERENCE": "none"]).refundRule == .none
        )
        #expect(throws: ConfigurationError.self) {
            try ConsumptionPolicy.fromEnvironment(["BILLING_CONSUMPTION_REFUND_PREFERENCE": "grant-always"])
        }
        #expect(throws: ConfigurationError.self) {
            try ConsumptionPolicy.fromEnvironment(["BILLING_CONSUMPTION_SAMPLE_CONTENT": "maybe"])
        }
    }
}
