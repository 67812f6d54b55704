import Testing

@testable import AMQP

@Suite("AMQPConfiguration URL parsing")
struct AMQPConfigurationTests {
    @Test("a full amqp:// URL")
    func fullURL() throws {
        let config = try AMQPConfiguration(url: "amqp://astro:secret@rabbit.local:5673/prod")
        #expect(config.host == "rabbit.local")
        #expect(config.port == 5673)
        #expect(config.user == "astro")
        #expect(config.password == "secret")
        #expect(config.virtualHost == "prod")
        #expect(config.tls == nil)
    }

    @Test("defaults when parts are missing")
    func defaults() throws {
        let config = try AMQPConfiguration(url: "amqp://")
        #expect(config.host == "127.0.0.1")
        #expect(config.port == 5672)
        #expect(config.user == "guest")
        #expect(config.password == "guest")
        #expect(config.virtualHost == "/")
        #expect(config.heartbeat == .seconds(30))
    }

    @Test("amqps:// means TLS on port 5671 by default")
    func amqpsDefaultPort() throws {
        let config = try AMQPConfiguration(url: "amqps://u:p@broker.example.com")
        #expect(config.port == 5671)
        #expect(config.tls == AMQPConfiguration.TLS())
        #expect(config.tls?.verifyPeer == true)
        #expect(config.tls?.verifyHostname == true)
        let explicit = try AMQPConfiguration(url: "AMQPS://u:p@broker.example.com:6000/")
        #expect(explicit.port == 6000)
        #expect(explicit.tls != nil)
    }

    @Test(
        "vhost decoding",
        arguments: [
            ("amqp://h", "/"),
            ("amqp://h/", "/"),
            ("amqp://h/%2F", "/"),
            ("amqp://h/%2f", "/"),
            ("amqp://h/prod", "prod"),
            ("amqp://h/%2Fstaging", "/staging"),
            ("amqp://h/a%20b", "a b"),
        ]
    )
    func vhost(url: String, expected: String) throws {
        #expect(try AMQPConfiguration(url: url).virtualHost == expected)
    }

    @Test("percent-encoded user and password")
    func percentEncodedCredentials() throws {
        let config = try AMQPConfiguration(url: "amqp://us%40er:p%40ss%3Aw%2Frd%25@h:5672/%2F")
        #expect(config.user == "us@er")
        #expect(config.password == "p@ss:w/rd%")
        #expect(config.virtualHost == "/")
    }

    @Test("a password containing '@' unencoded still splits at the last '@'")
    func lastAtSign() throws {
        let config = try AMQPConfiguration(url: "amqp://u:a@b@host")
        #expect(config.password == "a@b")
        #expect(config.host == "host")
    }

    @Test("IPv6 host")
    func ipv6() throws {
        let config = try AMQPConfiguration(url: "amqp://u:p@[::1]:5673/")
        #expect(config.host == "::1")
        #expect(config.port == 5673)
    }

    @Test("query items")
    func queryItems() throws {
        let config = try AMQPConfiguration(
            url: "amqps://u:p@h/%2F?heartbeat=5&connection_timeout=2500&cacertfile=/etc/ca.pem"
                + "&certfile=/etc/c.pem&keyfile=/etc/k.pem&verify=verify_none&name=chart-worker%201"
        )
        #expect(config.heartbeat == .seconds(5))
        #expect(config.connectTimeout == .milliseconds(2500))
        #expect(config.tls?.caCertificatePath == "/etc/ca.pem")
        #expect(config.tls?.clientCertificatePath == "/etc/c.pem")
        #expect(config.tls?.clientKeyPath == "/etc/k.pem")
        #expect(config.tls?.verifyPeer == false)
        #expect(config.tls?.verifyHostname == false)
        #expect(config.connectionName == "chart-worker 1")
    }

    @Test("heartbeat=0 disables heartbeats")
    func heartbeatZero() throws {
        #expect(try AMQPConfiguration(url: "amqp://h?heartbeat=0").heartbeat == .zero)
    }

    @Test(
        "bad URLs throw invalidConfiguration naming the problem",
        arguments: [
            ("http://h", "scheme"),
            ("rabbit.local:5672", "scheme"),
            ("amqp://h:0", "port"),
            ("amqp://h:65536", "port"),
            ("amqp://h:abc", "port"),
            ("amqp://h/a/b", "vhost"),
            ("amqp://h/%zz", "percent"),
            ("amqp://h?heartbeat=-1", "heartbeat"),
            ("amqp://h?connection_timeout=x", "connection_timeout"),
            ("amqp://h?cacertfile=/ca.pem", "amqps"),
            ("amqps://h?verify=maybe", "verify"),
            ("amqp://h?colour=blue", "colour"),
            ("amqp://[::1", "IPv6"),
        ]
    )
    func badURLs(url: String, mentions: String) {
        #expect {
            _ = try AMQPConfiguration(url: url)
        } throws: { error in
            guard let error = error as? AMQPError else { return false }
            return error.kind == .invalidConfiguration && error.message.contains(mentions)
        }
    }

    @Test("redactedURL hides the password")
    func redacted() throws {
        let config = try AMQPConfiguration(url: "amqp://astro:s3cr%40t@127.0.0.1:5673/%2F")
        #expect(config.redactedURL == "amqp://astro:***@127.0.0.1:5673/%2F")
        #expect(!config.redactedURL.contains("s3cr"))
        let tls = try AMQPConfiguration(url: "amqps://a:b@localhost/prod?heartbeat=10&cacertfile=/tmp/ca.pem")
        #expect(tls.redactedURL == "amqps://a:***@localhost:5671/prod?heartbeat=10&cacertfile=%2Ftmp%2Fca.pem")
        let reparsed = try AMQPConfiguration(url: tls.redactedURL)
        #expect(reparsed.tls?.caCertificatePath == "/tmp/ca.pem")
        #expect(reparsed.virtualHost == "prod")
    }

    @Test("errors never show the password")
    func errorDescription() {
        let error = AMQPError(kind: .connectionFailed, message: "cannot connect", replyCode: 320)
        #expect(error.description == "AMQPError.connectionFailed (320): cannot connect")
        #expect(error.isRetriable)
        #expect(!AMQPError(kind: .preconditionFailed, message: "").isRetriable)
        #expect(!AMQPError(kind: .staleDelivery, message: "").isRetriable)
    }
}

/// URL errors never quote a password, whatever it contains (issue 14).
@Suite struct AMQPURLSecretTests {
    @Test(arguments: [
        "Kx9/Qw7", "Vb2@Nm8:Lp3/Rs4", "Hj5?Gt6=1&Yu7", "Wz8#Ty2", "Aa1/Bb2?Cc3#Dd4@Ee5", "Pq1:Rs2:Tu3/Vw4", "Mn5://Op6",
    ])
    func errorsDoNotQuoteThePassword(_ secret: String) {
        for url in ["amqp://astro:\(secret)@rabbit:5672/%2F", "amqps://astro:\(secret)@rabbit/prod?heartbeat=10"] {
            do {
                let configuration = try AMQPConfiguration(url: url)
                #expect(!configuration.redactedURL.contains(secret))
            } catch {
                let fragments = secret.split(whereSeparator: { "/?#@:&=".contains($0) }).map(String.init)
                    .filter { $0.count >= 3 }
                for fragment in fragments {
                    #expect(!error.description.contains(fragment), "\(error.description) quotes \(fragment)")
                }
            }
        }
    }

    @Test func limitsAreCheckedNotTrapped() {
        #expect(throws: AMQPError.self) { try AMQPConfiguration(url: "amqp://h/?heartbeat=99999999999999999999") }
        #expect(throws: AMQPError.self) { try AMQPConfiguration(url: "amqp://h/?heartbeat=70000") }
        #expect(throws: AMQPError.self) { try AMQPConfiguration(url: "amqp://h/?connection_timeout=0") }
    }
}
