import AstroDomain
import Foundation
import Testing

@testable import Billing

@Suite struct ProductCatalogTests {
    @Test func defaultsAreTheSeedsProducts() throws {
        let catalog = ProductCatalog.defaults
        #expect(catalog.products.count == 8)
        let general = try #require(catalog.product(id: "com.astrosvitla.astroinsight.report.general"))
        #expect(general.priceUSD == Decimal(string: "9.99"))
        #expect(general.area == .general && general.credits == 1 && general.kind == .nonConsumable)
        for (area, price) in [("finances", "6.99"), ("career", "6.99"), ("relationships", "5.99"), ("health", "5.99")] {
            let product = try #require(catalog.product(id: "com.astrosvitla.astroinsight.report.\(area)"))
            #expect(product.area?.rawValue == area)
            #expect(product.priceUSD == Decimal(string: price))
        }
        let single = try #require(catalog.product(id: "com.astrosvitla.report.credit.single"))
        #expect(single.area == nil && single.credits == 1 && single.priceUSD == Decimal(string: "4.99"))
        #expect(catalog.product(id: "com.astrosvitla.report.credit.pack5")?.credits == 5)
        #expect(catalog.product(id: "com.astrosvitla.report.credit.pack10")?.credits == 10)
        #expect(catalog.product(id: "com.astrosvitla.astroinsight.subscription.monthly") == nil)
    }

    @Test func theShippedFileEqualsTheDefaults() throws {
        let file = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/billing-catalog.json")
        #expect(try ProductCatalog.load(from: file.path) == ProductCatalog.defaults)
    }

    @Test func writtenJSONReadsBackTheSame() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try ProductCatalog.defaults.jsonData().write(to: URL(fileURLWithPath: path))
        #expect(try ProductCatalog.load(from: path) == ProductCatalog.defaults)
    }

    @Test(arguments: [
        (#"{"products": []}"#, "no products"),
        (
            #"{"products": [{"productId": "a.b", "priceUsd": "1.00", "credits": 1, "kind": "consumable"}, {"productId": "a.b", "priceUsd": "2.00", "credits": 1, "kind": "consumable"}]}"#,
            "listed twice"
        ),
        (
            #"{"products": [{"productId": "a.b", "priceUsd": "1.00", "credits": 0, "kind": "consumable"}]}"#,
            "credits must be 1…100"
        ),
        (
            #"{"products": [{"productId": "a.b", "priceUsd": "6.990", "credits": 1, "kind": "consumable"}]}"#,
            "expected a price"
        ),
        (#"{"products": [{"productId": "a.b", "priceUsd": 6.99, "credits": 1, "kind": "consumable"}]}"#, "priceUsd"),
        (
            #"{"products": [{"productId": "a b", "priceUsd": "1.00", "credits": 1, "kind": "consumable"}]}"#,
            "not a valid App Store product id"
        ),
        (#"{"products": [{"productId": "a.b", "priceUsd": "1.00", "credits": 1, "kind": "gift"}]}"#, "kind"),
        (
            #"{"products": [{"productId": "a.b", "priceUsd": "1.00", "credits": 1, "kind": "consumable", "area": "love"}]}"#,
            "area"
        ),
        (#"{"products": [{"priceUsd": "1.00", "credits": 1, "kind": "consumable"}]}"#, "missing \"productId\""),
        ("not json", "catalog file"),
    ])
    func invalidFilesAreRefusedWithTheRule(text: String, expected: String) throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID()).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try ProductCatalog.load(from: path)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.message.contains(expected), "\(error.message)")
            #expect(error.message.contains(path))
        }
    }

    @Test func aMissingFileNamesIt() {
        #expect(throws: CatalogError.self) { try ProductCatalog.load(from: "/nonexistent/catalog.json") }
    }
}

@Suite struct BillingValueTests {
    @Test func derivedJobIDsAreStableAndDistinct() {
        let parent = JobID.random()
        let first = JobID.derived(from: parent, purpose: "report.generate")
        #expect(first == JobID.derived(from: parent, purpose: "report.generate"))
        #expect(first != JobID.derived(from: parent, purpose: "other"))
        #expect(first != JobID.derived(from: JobID.random(), purpose: "report.generate"))
        #expect(first != parent)
        let ids = Set((0..<10_000).map { _ in JobID.derived(from: .random(), purpose: "x") })
        #expect(ids.count == 10_000)
    }

    @Test func requestBodiesUseTheContractsNames() throws {
        let request = ReportRequest(
            jobID: .random(),
            userID: .random(),
            profileID: .random(),
            area: .career,
            language: .uk
        )
        let object = try JSONDecoder().decode(JSONValue.self, from: JSONCoding.encoder.encode(request))
        #expect(object["jobId"]?.stringValue == request.jobID.description)
        #expect(object["profileId"]?.stringValue == request.profileID.description)
        #expect(object["area"]?.stringValue == "career" && object["language"]?.stringValue == "uk")
        let bad = Data(
            #"{"jobId":"\#(UUID())","userId":"\#(UUID())","profileId":"\#(UUID())","area":"love","language":"en"}"#.utf8
        )
        #expect(throws: DecodingError.self) { try JSONCoding.decoder.decode(ReportRequest.self, from: bad) }
    }
}

@Suite struct ProductQuantityTests {
    @Test func quantitiesHaveALimitPerProduct() throws {
        let catalog = ProductCatalog.defaults
        #expect(catalog.product(id: "com.astrosvitla.report.credit.pack5")?.maxQuantity == 10)
        #expect(catalog.product(id: "com.astrosvitla.astroinsight.report.career")?.maxQuantity == 1)
        #expect(throws: CatalogError.self) {
            try ProductCatalog(products: [
                Product(productID: "a.b", priceUSD: 1, credits: 1, area: .career, kind: .nonConsumable, maxQuantity: 2)
            ])
        }
        #expect(throws: CatalogError.self) {
            try ProductCatalog(products: [
                Product(productID: "a.b", priceUSD: 1, credits: 1, area: nil, kind: .consumable, maxQuantity: 101)
            ])
        }
        let file =
            #"{"products":[{"productId":"a.b","priceUsd":"1.00","credits":2,"kind":"consumable","maxQuantity":3}]}"#
        let decoded = try JSONDecoder().decode(ProductCatalog.File.self, from: Data(file.utf8))
        #expect(decoded.products.first?.maxQuantity == 3)
    }
}
