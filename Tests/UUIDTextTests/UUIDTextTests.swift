import Foundation
import Testing
import UUIDText

/// The hand-written UUID text must agree with Foundation's, which it replaces on hot paths.
struct UUIDTextTests {
    @Test func writesWhatFoundationWritesInLowerCase() {
        for _ in 0..<20_000 {
            let id = UUID()
            #expect(id.lowercasedText == id.uuidString.lowercased())
        }
        let fixed = UUID(
            uuid: (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0xA0, 0xB0, 0xC0, 0xD0, 0xE0, 0xFF)
        )
        #expect(fixed.lowercasedText == "00010203-0405-0607-0809-a0b0c0d0e0ff")
    }

    @Test func readsWhatFoundationReadsInEitherCase() {
        for _ in 0..<20_000 {
            let id = UUID()
            #expect(UUID(text: id.uuidString) == id)
            #expect(UUID(text: id.uuidString.lowercased()) == id)
            #expect(UUID(text: Substring(id.uuidString)) == id)
        }
        let mixed = "6F9619FF-8b86-D011-b42d-00C04fc964ff"
        #expect(UUID(text: mixed) == UUID(uuidString: mixed))
    }

    @Test(arguments: [
        "", "6f9619ff-8b86-d011-b42d-00c04fc964f", "6f9619ff-8b86-d011-b42d-00c04fc964fff",
        "{6f9619ff-8b86-d011-b42d-00c04fc964ff}", "6f9619ff8b86-d011-b42d-00c04fc964ff0",
        "6f9619ff-8b86-d011-b42d_00c04fc964ff", "6g9619ff-8b86-d011-b42d-00c04fc964ff",
        "6f9619ff-8b86-d011-b42d-00c04fc964f ", " 6f9619ff-8b86-d011-b42d-00c04fc964f",
        "6f9619ff-8b86-d011-b42d-00c04fc964é", "6f9619ff-8b8-6d011-b42d-00c04fc964ff",
    ])
    func refusesAnythingButTheCanonicalForm(text: String) {
        // Stricter than Foundation, whose sscanf takes " 6f9619ff-…-00c04fc964f" (a leading
        // space, a one-digit last byte) for …9640f; PostgreSQL would refuse it, and so do we.
        #expect(UUID(text: text) == nil)
    }
}
