import Testing

@testable import Maintenance

/// `CHILD_DATA_RETENTION`: a bounded duration (30 … 3650 days), `off`, or the default 365 days.
@Suite struct ChildDataRetentionConfigurationTests {
    @Test func theDefaultIsAYear() throws {
        #expect(try RetentionConfiguration.fromEnvironment([:]).childDataRetention == .seconds(365 * 86_400))
        #expect(
            try RetentionConfiguration.fromEnvironment(["CHILD_DATA_RETENTION": ""]).childDataRetention
                == .seconds(365 * 86_400)
        )
    }

    @Test func offKeepsChildrensData() throws {
        #expect(try RetentionConfiguration.fromEnvironment(["CHILD_DATA_RETENTION": "off"]).childDataRetention == nil)
    }

    @Test func aDurationWithinTheBoundsIsTaken() throws {
        #expect(
            try RetentionConfiguration.fromEnvironment(["CHILD_DATA_RETENTION": "90d"]).childDataRetention
                == .seconds(90 * 86_400)
        )
        #expect(
            try RetentionConfiguration.fromEnvironment(["CHILD_DATA_RETENTION": "720h"]).childDataRetention
                == .seconds(30 * 86_400)
        )
    }

    @Test(arguments: ["29d", "3651d", "1h", "365", "OFF", "-30d", "1y", "9999999999d"])
    func anythingElseIsRefusedNamingTheVariable(_ text: String) {
        #expect {
            _ = try RetentionConfiguration.fromEnvironment(["CHILD_DATA_RETENTION": text])
        } throws: { error in
            (error as? RetentionConfigurationError)?.variable == "CHILD_DATA_RETENTION"
        }
    }

    @Test func validatedChecksTheBoundsToo() {
        var configuration = RetentionConfiguration.defaults
        configuration.childDataRetention = .seconds(86_400)
        #expect(throws: RetentionConfigurationError.self) { try configuration.validated() }
        configuration.childDataRetention = nil
        #expect(throws: Never.self) { try configuration.validated() }
    }
}
