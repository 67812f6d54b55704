import AstroDomain
import Foundation
import Testing

@testable import Gateway

/// A job recorded under an Idempotency-Key has an id derived from the user, the job type and
/// the key, so a retry makes the same job id even when the gateway's record of the first was lost.
@Suite("Idempotent job ids")
struct IdempotentJobIDTests {
    let user = UserID(UUID(uuidString: "8B0C4F5E-2F8A-4C47-9A55-0B8E3A6A1D11")!)
    let other = UserID(UUID(uuidString: "0D2F3C1B-7E9A-4B8C-8D6E-5F4A3B2C1D0E")!)

    @Test func theSameUserTypeAndKeyGiveTheSameID() {
        let first = GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-1")
        #expect(first == GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-1"))
    }

    @Test func anotherUserTypeOrKeyGivesAnotherID() {
        let base = GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-1")
        let variants = [
            GatewayStore.jobID(user: other, kind: .chartCalculate, idempotencyKey: "k-1"),
            GatewayStore.jobID(user: user, kind: .reportRequest, idempotencyKey: "k-1"),
            GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-2"),
            // The separators keep the parts apart: a key cannot borrow from the type.
            GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-1\u{0}"),
        ]
        #expect(Set(variants + [base]).count == variants.count + 1)
    }

    @Test func theIDIsAVersion8UUIDWithTheStandardVariant() {
        let id = GatewayStore.jobID(user: user, kind: .chartCalculate, idempotencyKey: "k-1")
        let text = id.description
        #expect(text == text.lowercased())
        let characters = Array(text)
        #expect(characters[14] == "8")
        #expect("89ab".contains(characters[19]))
    }
}
