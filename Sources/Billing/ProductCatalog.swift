import AstroDomain
import Foundation

/// One App Store product this service sells and the credits a purchase of it grants.
public struct Product: Sendable, Hashable, Codable {
    /// The App Store product identifier (`productId` in a signed transaction).
    public var productID: String
    /// The list price in US dollars, as a decimal string in the file (`"9.99"`).
    public var priceUSD: Decimal
    /// Credits granted per unit bought (a transaction's `quantity` multiplies it).
    public var credits: Int
    /// The area the credits are good for; `nil`: any area.
    public var area: ReportArea?
    /// `consumable` or `non-consumable`, as configured in App Store Connect.
    public var kind: Kind
    /// The most units one transaction may buy (a signed `quantity` above it is refused with
    /// `invalid-quantity`): 1 for a non-consumable, 10 for a consumable (StoreKit's own limit)
    /// unless the catalog says otherwise (`maxQuantity`, 1…100).
    public var maxQuantity: Int

    public enum Kind: String, Sendable, Hashable, Codable {
        case consumable
        case nonConsumable = "non-consumable"
    }

    public init(
        productID: String,
        priceUSD: Decimal,
        credits: Int,
        area: ReportArea?,
        kind: Kind,
        maxQuantity: Int? = nil
    ) {
        self.productID = productID
        self.priceUSD = priceUSD
        self.credits = credits
        self.area = area
        self.kind = kind
        self.maxQuantity = maxQuantity ?? Self.defaultMaxQuantity(kind)
    }

    /// StoreKit sells up to 10 units of a consumable in one purchase, a non-consumable once.
    public static func defaultMaxQuantity(_ kind: Kind) -> Int { kind == .consumable ? 10 : 1 }

    enum CodingKeys: String, CodingKey {
        case productID = "productId"
        case priceUSD = "priceUsd"
        case credits, area, kind, maxQuantity
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        productID = try container.decode(String.self, forKey: .productID)
        let price = try container.decode(String.self, forKey: .priceUSD)
        // A decimal string, never a binary floating-point number: 6.99 must stay 6.99.
        guard price.wholeMatch(of: /[0-9]{1,6}(\.[0-9]{1,2})?/) != nil, let value = Decimal(string: price) else {
            throw DecodingError.dataCorruptedError(
                forKey: .priceUSD,
                in: container,
                debugDescription: "expected a price such as \"4.99\", got \(InputQuote.short(price))"
            )
        }
        priceUSD = value
        credits = try container.decode(Int.self, forKey: .credits)
        area = try container.decodeIfPresent(ReportArea.self, forKey: .area)
        kind = try container.decode(Kind.self, forKey: .kind)
        maxQuantity = try container.decodeIfPresent(Int.self, forKey: .maxQuantity) ?? Self.defaultMaxQuantity(kind)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(productID, forKey: .productID)
        try container.encode("\(priceUSD)", forKey: .priceUSD)
        try container.encode(credits, forKey: .credits)
        try container.encodeIfPresent(area, forKey: .area)
        try container.encode(kind, forKey: .kind)
        if maxQuantity != Self.defaultMaxQuantity(kind) { try container.encode(maxQuantity, forKey: .maxQuantity) }
    }
}

/// The products the billing-worker grants credits for. Loaded from a JSON file
/// (`BILLING_CATALOG_FILE`) or the built-in defaults of the seed, and validated before the worker
/// starts, so a typo in a product id is a start-up error rather than a customer who paid and got
/// nothing.
public struct ProductCatalog: Sendable, Hashable {
    public private(set) var products: [Product]
    private var byID: [String: Product]

    /// Validates and indexes `products`.
    ///
    /// - Throws: `CatalogError` naming the product and the rule it breaks (empty or malformed
    ///   id, duplicate id, credits outside 1…100, negative price).
    public init(products: [Product]) throws(CatalogError) {
        guard !products.isEmpty else { throw CatalogError(message: "the catalog has no products") }
        var byID: [String: Product] = [:]
        for product in products {
            let id = product.productID
            guard id.wholeMatch(of: /[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?/) != nil else {
                throw CatalogError(message: "product id \(InputQuote.short(id)) is not a valid App Store product id")
            }
            guard byID[id] == nil else { throw CatalogError(message: "product \(id) is listed twice") }
            guard (1...100).contains(product.credits) else {
                throw CatalogError(message: "product \(id): credits must be 1…100, got \(product.credits)")
            }
            guard product.priceUSD >= 0 else {
                throw CatalogError(message: "product \(id): the price cannot be negative")
            }
            guard (1...100).contains(product.maxQuantity) else {
                throw CatalogError(message: "product \(id): maxQuantity must be 1…100, got \(product.maxQuantity)")
            }
            guard product.kind == .consumable || product.maxQuantity == 1 else {
                throw CatalogError(message: "product \(id): a non-consumable is bought once; maxQuantity must be 1")
            }
            byID[id] = product
        }
        self.products = products
        self.byID = byID
    }

    /// The product with this App Store id, if we sell it.
    public func product(id: String) -> Product? { byID[id] }

    /// The seed's products: one-area reports, a single any-area credit, and packs of 5 and 10.
    public static let defaults: ProductCatalog = {
        func area(_ name: String, _ price: String, _ area: ReportArea) -> Product {
            Product(
                productID: "com.astrosvitla.astroinsight.report.\(name)",
                priceUSD: Decimal(string: price)!,
                credits: 1,
                area: area,
                kind: .nonConsumable
            )
        }
        func credits(_ name: String, _ price: String, _ count: Int) -> Product {
            Product(
                productID: "com.astrosvitla.report.credit.\(name)",
                priceUSD: Decimal(string: price)!,
                credits: count,
                area: nil,
                kind: .consumable
            )
        }
        // The seed lists no prices for the packs; these keep a discount per credit over the single.
        let products = [
            area("general", "9.99", .general), area("finances", "6.99", .finances), area("career", "6.99", .career),
            area("relationships", "5.99", .relationships), area("health", "5.99", .health),
            credits("single", "4.99", 1), credits("pack5", "19.99", 5), credits("pack10", "34.99", 10),
        ]
        return try! ProductCatalog(products: products)
    }()

    /// The catalog's JSON file format: `{"products": [{"productId", "priceUsd", "credits", "area"?, "kind"}]}`.
    struct File: Codable {
        var products: [Product]
    }

    /// Reads and validates a catalog file.
    ///
    /// - Throws: `CatalogError` naming the file and what is wrong in it.
    public static func load(from path: String) throws(CatalogError) -> ProductCatalog {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CatalogError(message: "cannot read catalog file \(path): \(error.localizedDescription)")
        }
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: data)
        } catch let error as DecodingError {
            throw CatalogError(message: "catalog file \(path): \(Self.describe(error))")
        } catch {
            throw CatalogError(message: "catalog file \(path): \(error)")
        }
        do {
            return try ProductCatalog(products: file.products)
        } catch {
            throw CatalogError(message: "catalog file \(path): \(error.message)")
        }
    }

    /// The catalog as the JSON file format (sorted keys), e.g. to write a starting file.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(File(products: products))
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "missing \"\(key.stringValue)\" at \(path(context.codingPath))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let at = context.codingPath.isEmpty ? "" : " at \(path(context.codingPath))"
            return "\(context.debugDescription)\(at)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// A catalog that cannot be used; the message names the product or file and the rule.
public struct CatalogError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
