import Testing

@testable import Postgres

@Suite struct ConfigurationTests {
    @Test func parsesAFullURL() throws {
        let configuration = try PostgresConfiguration(url: "postgres://astro:secret@db.example.com:6543/astro_db")
        #expect(configuration.host == "db.example.com")
        #expect(configuration.port == 6543)
        #expect(configuration.user == "astro")
        #expect(configuration.password == "secret")
        #expect(configuration.database == "astro_db")
        #expect(configuration.connectTimeout == .seconds(5))
        #expect(configuration.applicationName == "astrosvitla")
        #expect(configuration.sslMode == nil)
        #expect(configuration.options.isEmpty)
    }

    @Test func decodesPercentEncodedParts() throws {
        let configuration = try PostgresConfiguration(url: "postgres://us%40er:p%40ss%3Aw%2Fo%20rd%25@host/my%20db")
        #expect(configuration.user == "us@er")
        #expect(configuration.password == "p@ss:w/o rd%")
        #expect(configuration.database == "my db")
    }

    @Test func defaultsPortAndDatabase() throws {
        let configuration = try PostgresConfiguration(url: "postgresql://astro@localhost")
        #expect(configuration.port == 5432)
        #expect(configuration.database == "astro")
        #expect(configuration.password == nil)
    }

    @Test func acceptsBothSchemesAndIPv6() throws {
        let a = try PostgresConfiguration(url: "postgresql://u:p@[::1]:5433/d")
        #expect(a.host == "::1")
        #expect(a.port == 5433)
        let b = try PostgresConfiguration(url: "postgres://u:p@127.0.0.1:5433/d")
        #expect(b.host == "127.0.0.1")
    }

    @Test func readsQueryItems() throws {
        let configuration = try PostgresConfiguration(
            url: "postgres://u:p@h/d?sslmode=require&application_name=chart%20worker&connect_timeout=12"
        )
        #expect(configuration.sslMode == "require")
        #expect(configuration.applicationName == "chart worker")
        #expect(configuration.connectTimeout == .seconds(12))
    }

    @Test(arguments: [
        ("mysql://u:p@h/d", "scheme"),
        ("http://u@h/d", "scheme"),
        ("postgres://u:p@/d", "missing host"),
        ("postgres://u:p@:5432/d", "missing host"),
        ("postgres://h/d", "missing user"),
        ("postgres://:p@h/d", "missing user"),
        ("postgres://u:p@h:abc/d", "port"),
        ("postgres://u:p@h:0/d", "port"),
        ("postgres://u:p@h:70000/d", "port"),
        ("postgres://u:p@h:-1/d", "port"),
        ("postgres://u:p@h/d?sslmode=sometimes", "sslmode"),
        ("postgres://u:p@h/d?connect_timeout=soon", "connect_timeout"),
        ("postgres://u:p@h/d?search_path=x", "search_path"),
        ("postgres://u:p%zz@h/d", "password"),
    ])
    func rejectsBadURLs(url: String, mentions: String) {
        #expect {
            try PostgresConfiguration(url: url)
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .invalidConfiguration && error.message.contains(mentions)
                && !error.description.contains("p%zz")
        }
    }

    @Test func redactsThePassword() throws {
        let configuration = try PostgresConfiguration(
            url: "postgres://astro:top%20secret@db:6543/astro?sslmode=disable"
        )
        let redacted = configuration.redactedURL
        #expect(redacted == "postgres://astro:***@db:6543/astro?sslmode=disable")
        #expect(!redacted.contains("secret"))
        let roundTrip = try PostgresConfiguration(url: redacted.replacingOccurrences(of: "***", with: "x"))
        #expect(roundTrip.host == "db" && roundTrip.port == 6543 && roundTrip.database == "astro")
    }

    @Test func redactedURLWithoutPassword() {
        let configuration = PostgresConfiguration(host: "h", user: "a b", database: "d")
        #expect(configuration.redactedURL == "postgres://a%20b@h:5432/d")
    }

    @Test func buildsSessionOptionsWithEscapes() throws {
        var configuration = PostgresConfiguration(host: "h", user: "u", password: "p w", database: "d")
        configuration.options = ["search_path": "a, b", "statement_timeout": "30s", "TimeZone": "Europe/Kyiv"]
        let parameters = Dictionary(uniqueKeysWithValues: try PGConnHandle.connectionParameters(configuration))
        let options = try #require(parameters["options"])
        #expect(options.contains("-c client_encoding=UTF8"))
        #expect(options.contains("-c DateStyle=ISO"))
        #expect(options.contains("-c extra_float_digits=3"))
        #expect(options.contains("-c search_path=a,\\ b"))
        #expect(options.contains("-c statement_timeout=30s"))
        #expect(options.contains("-c TimeZone=Europe/Kyiv"))
        #expect(!options.contains("TimeZone=UTC"))
        #expect(parameters["password"] == "p w")
        #expect(parameters["dbname"] == "d")
    }

    @Test func rejectsBadOptionNames() {
        var configuration = PostgresConfiguration(host: "h", user: "u", database: "d")
        configuration.options = ["search_path -c x": "y"]
        #expect(throws: PostgresError.self) { try PGConnHandle.connectionParameters(configuration) }
    }
}

/// URL errors never quote a password, whatever it contains (issue 14).
@Suite struct URLSecretTests {
    static let secrets = [
        "Kx9/Qw7", "Vb2@Nm8:Lp3/Rs4", "Hj5?Gt6=1&Yu7", "Wz8#Ty2", "Aa1/Bb2?Cc3#Dd4@Ee5", "Pq1:Rs2:Tu3/Vw4",
    ]

    @Test(arguments: secrets)
    func errorsOfURLsWithRawSpecialCharactersInThePasswordDoNotQuoteIt(_ secret: String) {
        for url in [
            "postgres://astro:\(secret)@db.example.com:5432/astro",
            "postgres://astro:\(secret)@db.example.com/astro?sslmode=require",
        ] {
            do {
                let configuration = try PostgresConfiguration(url: url)
                // Parsed (the special characters happened to be harmless): then the redacted
                // form must not show it either.
                #expect(!configuration.redactedURL.contains(secret))
            } catch {
                for fragment in Self.fragments(of: secret) {
                    #expect(!error.description.contains(fragment), "\(error.description) quotes \(fragment)")
                }
            }
        }
    }

    /// The pieces of a secret a naive parser would quote (split at its special characters).
    static func fragments(of secret: String) -> [String] {
        secret.split(whereSeparator: { "/?#@:&=".contains($0) }).map(String.init).filter { $0.count >= 3 }
    }

    @Test func connectionParametersCarryTimeoutsAndKeepalives() throws {
        var configuration = try PostgresConfiguration(url: "postgres://u:p@h:5432/d")
        let parameters = Dictionary(
            try PGConnHandle.connectionParameters(configuration),
            uniquingKeysWith: { a, _ in a }
        )
        #expect(parameters["keepalives"] == "1")
        #expect(parameters["keepalives_idle"] == "10")
        #expect(parameters["keepalives_interval"] == "5")
        #expect(parameters["keepalives_count"] == "3")
        #expect(parameters["tcp_user_timeout"] == "20000")
        let options = try #require(parameters["options"])
        #expect(options.contains("-c statement_timeout=30000"))
        #expect(options.contains("-c lock_timeout=10000"))
        #expect(options.contains("-c idle_in_transaction_session_timeout=60000"))
        configuration.statementTimeout = nil
        configuration.keepalive = nil
        configuration.tcpUserTimeout = nil
        let bare = Dictionary(try PGConnHandle.connectionParameters(configuration), uniquingKeysWith: { a, _ in a })
        #expect(bare["keepalives"] == nil)
        #expect(bare["tcp_user_timeout"] == nil)
        #expect(!(bare["options"] ?? "").contains("statement_timeout"))
        #expect(configuration.effectiveResponseTimeout == nil)
    }
}
