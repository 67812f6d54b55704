import Billing
import Testing

/// `BILLING_RECOVER_ON_START`: on by default, only with an App Store Server API key, and a
/// value that is neither true nor false stops the worker at start-up.
@Suite struct NotificationRecoveryStartUpTests {
    static let configured = ["APPSTORE_API_KEY_ID": "KEY1", "BILLING_ENVIRONMENT": "Sandbox"]

    @Test func onByDefaultWithAKey() throws {
        #expect(try NotificationRecoveryStartUp.setup(Self.configured) != nil)
        #expect(
            try NotificationRecoveryStartUp.setup(Self.configured.merging(["BILLING_RECOVER_ON_START": "yes"]) { $1 })
                != nil
        )
    }

    @Test func offWhenSaidOrWithoutAKey() throws {
        #expect(
            try NotificationRecoveryStartUp.setup(Self.configured.merging(["BILLING_RECOVER_ON_START": "false"]) { $1 })
                == nil
        )
        #expect(try NotificationRecoveryStartUp.setup(["BILLING_ENVIRONMENT": "Sandbox"]) == nil)
        #expect(
            try NotificationRecoveryStartUp.setup(["APPSTORE_API_KEY_ID": "  ", "BILLING_ENVIRONMENT": "Sandbox"])
                == nil
        )
    }

    @Test func anUnreadableValueIsAConfigurationError() {
        #expect(throws: (any Error).self) {
            try NotificationRecoveryStartUp.setup(Self.configured.merging(["BILLING_RECOVER_ON_START": "maybe"]) { $1 })
        }
    }
}
