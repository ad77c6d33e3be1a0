import Foundation
import TestSupport
import Testing
import TraceCore

@testable import TraceLog

@Suite("Redaction: key patterns and the secrets handed to child processes")
struct RedactorTests {
    /// Planted keys of each always-on kind, with the rule that must name them. Made up, in each
    /// issuer's documented shape.
    static let keys: [(secret: String, rule: String)] = [
        ("sk-proj-Ab12Cd34Ef56Gh78Ij90Kl", "api-key"),
        ("sk-ant-api03-Zy98Xw76Vu54Ts32Rq10", "api-key"),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dcPlanted", "stripe-key"),
        ("sk_test_51HqLyjWDarjtT1zdp7dcQ0", "stripe-key"),
        ("rk_live_51HqLyjWDarjtT1zdp7dcQ0xy", "stripe-key"),
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "stripe-key"),
        ("AIzaSyD-Planted_GoogleKey0123456789abcd", "google-api-key"),
        (
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "jwt"
        ),
        ("AKIAIOSFODNN7EXAMPLE", "aws-key-id"),
        ("ASIAY34FZKBOKMUTVV7A", "aws-key-id"),
        ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "github-token"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD", "github-token"),
        ("glpat-xYz12AbCdEfGhIjKlMnO", "gitlab-token"),
        ("xoxb-123456789012-abcdefABCDEF", "slack-token"),
    ]

    @Test("every always-on key kind is replaced, in plain text and in an encoded event, wherever it stands", arguments: keys)
    func keyPatterns(secret: String, rule: String) throws {
        let redactor = Redactor(environment: [:])
        for text in [secret, "key: \(secret) end", "(\(secret))", "line one\n\(secret)\tmore", "\"\(secret)\""] {
            let shown = redactor.redactText(text)
            #expect(!shown.contains(secret), "\(text)")
            #expect(shown.contains("[redacted:\(rule):"), "\(shown)")
        }
        // In a log line the text is JSON: a secret after a line break stands after `\n`.
        let line = String(decoding: JSONWriter.encode(["output": .string("first\n\(secret)\nlast")]), as: UTF8.self)
        #expect(redactor.mayRedact(Array(line.utf8)))
        let written = try #require(redactor.redact(line))
        #expect(!written.contains(secret), "\(written)")
        #expect(written.contains("first\\n[redacted:\(rule):"), "\(written)")
        #expect(try JSONParser.parse(Array(written.utf8))["output"]?.stringValue?.hasSuffix("\nlast") == true)
        // JSON text kept in a string (a stored request, a large output stored as content): the
        // line break before the key is `\\n` in the line, at one depth more.
        let inner = String(decoding: JSONWriter.encode(["text": .string("config:\n\(secret)\nend")]), as: UTF8.self)
        let stored = String(decoding: JSONWriter.encode(["body": .string(inner)]), as: UTF8.self)
        #expect(stored.contains("\\\\n\(secret)"), "\(stored)")
        let storedWritten = try #require(redactor.redact(stored), "\(stored)")
        #expect(!storedWritten.contains(secret), "\(storedWritten)")
        #expect(try JSONParser.parse(Array(storedWritten.utf8))["body"]?.stringValue.map { try JSONParser.parse(Array($0.utf8)) } != nil)
    }

    @Test("ordinary text that merely contains a key's prefix is left alone")
    func ordinaryText() {
        let redactor = Redactor(environment: [:])
        let ordinary = [
            "ask-the-customer-for-their-order-number", "disk-usage-report-generated-nightly", "risk_test_results_for_this_quarter",
            "sk_live_", "sk_live_short", "AIza is a prefix", "AIzaTooShort", "eyJ starts base64 JSON", "eyJhbGciOiJIUzI1NiJ9 alone",
            "version 1.2.3 and eyJabc.def.ghi", "AKIA1234", "MASKIAIOSFODNN7EXAMPLE", "the xoxb- prefix", "Bearer", "sk-short",
            "task_live_data_collection_for_today",
        ]
        for text in ordinary {
            #expect(redactor.redactText(text) == text, "\(text)")
        }
        // After a slash a token can start: a key in a URL is still a key.
        #expect(redactor.redactText("https://example.com/keys/sk-0123456789abcdefABCD").contains("/keys/[redacted:api-key:"))
    }

    @Test(
        "names that look secret",
        arguments: [
            ("API_KEY", true), ("OPENAI_API_KEY", true), ("STRIPE_KEY", true), ("GITHUB_TOKEN", true), ("githubtoken", true),
            ("DB_PASSWORD", true), ("CLIENT_SECRET", true), ("AWS_SECRET_ACCESS_KEY", true), ("MY_APIKEY_VALUE", true),
            ("SMTP_PASSWD", true), ("GPG_PASSPHRASE", true), ("GOOGLE_APPLICATION_CREDENTIALS", true), ("SSH_KEYS", true),
            ("PATH", false), ("HOME", false), ("LANG", false), ("PWD", false), ("KEY_PREFIX", false), ("SORT_ORDER", false),
            ("MONKEY_BUSINESS", false), ("TOKENIZER_MODEL", false), ("REGION", false),
        ])
    func secretNames(name: String, looksSecret: Bool) {
        #expect(Redactor.looksSecret(name) == looksSecret)
    }

    @Test(
        "credentials written as text are replaced: an authorization header in any case, NAME=VALUE and NAME: VALUE settings and API-key headers (the name kept), a URL's password (the rest kept)"
    )
    func credentialsInText() throws {
        let redactor = Redactor(environment: [:])
        let cases: [(text: String, secret: String, kept: String, rule: String)] = [
            ("authorization: bearer lowbearerSECRET123456", "lowbearerSECRET123456", "", "authorization"),
            ("Authorization: Basic YWRtaW46QkFTSUNTRUNSRVQ5OQ==", "YWRtaW46QkFTSUNTRUNSRVQ5OQ", "", "authorization"),
            ("AUTHORIZATION: token ghsecretvalue0011", "ghsecretvalue0011", "", "authorization"),
            ("Server=db;User Id=sa;Password=COLSECRETpw123;", "COLSECRETpw123", "Password=", "setting"),
            ("GET /v1?api_key=COLSECRETquery55&page=2", "COLSECRETquery55", "api_key=", "setting"),
            ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG", "secret_access_key=", "setting"),
            ("export DB_PASSWORD=hunter2hunter2", "hunter2hunter2", "DB_PASSWORD=", "setting"),
            ("Driver={x};Pwd=odbcSecret9;", "odbcSecret9", "Pwd=", "setting"),
            ("postgres://admin:PGSECRETpw77x@db.internal:5432/app", "PGSECRETpw77x", "postgres://admin:", "url-password"),
            ("see https://user:COLSECRETuserinfo@host/ now", "COLSECRETuserinfo", "https://user:", "url-password"),
            ("redis://:REDISsecret42@cache:6379/0", "REDISsecret42", "redis://:", "url-password"),
            ("export PGPASSWORD=pgSecret777", "pgSecret777", "PGPASSWORD=", "setting"),
            ("HF_TOKEN=hf_abcdefghijklmnop MYSQL_PWD=mysqlSecret1", "hf_abcdefghijklmnop", "HF_TOKEN=", "setting"),
            ("GET /feed?token=feedTOKEN123&page=2", "feedTOKEN123", "token=", "setting"),
            ("connect(password=hunter2hunter2)", "hunter2hunter2", "connect(password=", "setting"),
            // A config file's and a YAML file's settings, a header dump's API key.
            ("[db]\npassword = iniSECRET77\n", "iniSECRET77", "password = ", "setting"),
            ("database:\n  password: yamlSECRET99\n  user: app", "yamlSECRET99", "password: ", "setting"),
            ("client_secret: oauthSECRET4242", "oauthSECRET4242", "client_secret: ", "setting"),
            ("HTTP/1.1 200\nx-api-key: hdrSECRETkey123456\n", "hdrSECRETkey123456", "x-api-key: ", "setting"),
            ("X-API-Key:hdrSECRETkey654321", "hdrSECRETkey654321", "X-API-Key:", "setting"),
            ("[db]\npassword = \"tomlSECRET55\"\n", "tomlSECRET55", "password = \"", "setting"),
            ("db:\n  password: 'yamlQUOTED77'", "yamlQUOTED77", "password: '", "setting"),
            ("[db]\npassword    = alignedSECRET9\n", "alignedSECRET9", "password    = ", "setting"),
            ("db:\n\tpassword:\ttabSECRET123", "tabSECRET123", "password:\t", "setting"),
        ]
        for (text, secret, kept, rule) in cases {
            let shown = redactor.redactText(text)
            #expect(!shown.contains(secret), "\(text) → \(shown)")
            #expect(shown.contains(kept + "[redacted:\(rule):"), "\(text) → \(shown)")
            // As a log line writes it: JSON text, the secret inside a string.
            let line = String(decoding: JSONWriter.encode(["output": .string("first\n\(text)\nlast")]), as: UTF8.self)
            #expect(redactor.mayRedact(Array(line.utf8)), "\(line)")
            let written = try #require(redactor.redact(line), "\(line)")
            #expect(!written.contains(secret), "\(written)")
            #expect(try JSONParser.parse(Array(written.utf8))["output"]?.stringValue?.hasSuffix("\nlast") == true)
        }
        // The same secret gives the same placeholder, and a redacted value is not redacted again.
        let twice = redactor.redactText("password=samesecret1 and password=samesecret1")
        let placeholders = twice.components(separatedBy: "password=").dropFirst().map { $0.prefix { $0 != "]" } }
        #expect(placeholders.count == 2 && placeholders[0] == placeholders[1], "\(twice)")
        #expect(redactor.redactText(twice) == twice)
        // The value ends where code goes on: the parenthesis stays.
        #expect(redactor.redactText("connect(password=hunter2hunter2)").hasSuffix(")"))
        #expect(redactor.redactText("MYSQL_PWD=mysqlSecret1").hasPrefix("MYSQL_PWD=[redacted:setting:"))
        // Text that only looks like it: no credentials, nothing replaced.
        for text in [
            "PWD=/home/user/project", "the password= field is empty", "password=abc", "https://example.com:8080/path",
            "ssh://git@github.com/x.git", "mailto:someone@example.com", "Authorization: Bearer", "a basic understanding of it",
            "the bearer of bad news", "see http://host/a:b@c", "http://localhost:8080,admin@example.com", "[docs](http://host:80)@bob",
            "MAX_TOKENS=4096", "token: 4096 of them were used", "secret: the plan is simple", "password =abc",
            "password: abc",
            // Prose and code that name a credential without giving one.
            "Wrong password: please try again", "func login(user: String, password: String)", "token = tokens[i]",
            "pwd = os.getcwd()", "secret = os.environ['APP_SECRET']", "    let password: String",
        ] {
            #expect(redactor.redactText(text) == text, "\(text) → \(redactor.redactText(text))")
        }
        // A header object's `authorization` member, whatever its scheme.
        let headers = String(decoding: JSONWriter.encode(["headers": ["authorization": "basic dXNlcjpwYXNz"]]), as: UTF8.self)
        #expect(try #require(redactor.redact(headers)).contains("[redacted:member:authorization:"))
    }

    @Test("a command line's values of options named like secrets are found, in every spelling; other options and short values are not")
    func argumentSecrets() {
        let arguments = [
            "sh", "-c", "echo $0", "--password", "hunter4secretXYZ", "--api-key=sk-long-enough-1", "-token", "tok-abcdefgh",
            "DB_PASSWORD=pw-assigned-123", "--verbose", "--output", "report-file.json", "--secret", "short", "--token", "--next",
            "--sort-key", "name-of-column",
            // Options whose value is no secret, though their names hold a secret word.
            "--password-stdin", "registry.example.com", "--no-password", "server-script.py", "--secret-name", "my-service-name",
            "--token-endpoint", "https://auth.example.com/token",
            // A shell script: its words, the value without its quotes or the rest of the script.
            "TOKEN=abc12345 ./run --api-key 'quoted-key-9876' --client-secret=\"cs-quoted-5432\"",
        ]
        #expect(
            Redactor.secrets(inArguments: arguments) == [
                "hunter4secretXYZ", "sk-long-enough-1", "tok-abcdefgh", "pw-assigned-123", "name-of-column", "abc12345",
                "quoted-key-9876", "cs-quoted-5432",
            ])
    }

    @Test("a value handed to a child is redacted when its name is declared or looks secret, and a short guessed one is not")
    func childEnvironments() throws {
        let tool = ["PATH": "/usr/bin:/bin", "TOOL_SETTING": "tool-setting-7f3a", "SERVICE_TOKEN": "svc-token-5521a9", "SORT_KEY": "name"]
        let server = ["SERVER_SETTING": "server-setting-2d8e", "REGION": "eu-west-1-zone-a"]
        let redactor = Redactor(
            environmentNames: ["TOOL_SETTING", "SERVER_SETTING"], childEnvironments: [tool, server], environment: [:])
        let text = "tool-setting-7f3a svc-token-5521a9 server-setting-2d8e name eu-west-1-zone-a /usr/bin:/bin"
        #expect(
            redactor.redactText(text)
                == "\(redactor.placeholder("tool-setting-7f3a", rule: "env:TOOL_SETTING")) "
                + "\(redactor.placeholder("svc-token-5521a9", rule: "env:SERVICE_TOKEN")) "
                + "\(redactor.placeholder("server-setting-2d8e", rule: "env:SERVER_SETTING")) name eu-west-1-zone-a /usr/bin:/bin")
        let line = String(decoding: JSONWriter.encode(["output": .string(text)]), as: UTF8.self)
        #expect(redactor.mayRedact(Array(line.utf8)))
        let written = try #require(redactor.redact(line))
        for secret in ["tool-setting-7f3a", "svc-token-5521a9", "server-setting-2d8e"] { #expect(!written.contains(secret)) }
        #expect(written.contains(" name eu-west-1-zone-a "))
    }

    @Test(
        "a declared member's value is redacted at any depth of JSON text kept in a string, with or without spaces around the colon"
    )
    func membersAtAnyDepth() throws {
        let redactor = Redactor(memberNames: ["password"], environment: [:])
        // An OpenAI reply kept whole (`raw`): its tool call's arguments are JSON text in a string
        // in a string, written by Python's json.dumps (a space after each colon).
        let arguments = #"{"user": "ana", "password": "hunter2-secret"}"#
        let reply: JSONValue = [
            "choices": [["message": ["tool_calls": [["function": ["name": "login", "arguments": .string(arguments)]]]]]]
        ]
        let event: JSONValue = [
            "raw": .string(JSONWriter.encodeString(reply)),
            // A tool's output printed with spaces, its value holding an escaped quote and ending in a backslash.
            "output": .string(#"{"password" :  "p\"q\\"}"#),
            "data": ["password": "plain-secret", "user": "ana"],
            "note": "the password field is \"password\"",
        ]
        let line = String(decoding: JSONWriter.encode(event), as: UTF8.self)
        #expect(redactor.mayRedact(Array(line.utf8)))
        let written = try #require(redactor.redact(line))
        for secret in ["hunter2-secret", "plain-secret", #"p\\\"q"#] { #expect(!written.contains(secret), "\(written)") }
        let parsed = try JSONParser.parse(Array(written.utf8))
        #expect(parsed["data"]?["password"]?.stringValue?.hasPrefix("[redacted:member:password:") == true)
        #expect(parsed["data"]?["user"] == "ana")
        #expect(parsed["note"] == "the password field is \"password\"")
        let output = try JSONParser.parse(Array(try #require(parsed["output"]?.stringValue).utf8))
        #expect(output["password"]?.stringValue?.hasPrefix("[redacted:member:password:") == true, "\(output)")
        let raw = try JSONParser.parse(Array(try #require(parsed["raw"]?.stringValue).utf8))
        let message = raw["choices"]?.arrayValue?.first?["message"]
        let function = message?["tool_calls"]?.arrayValue?.first?["function"]
        let call = try #require(function?["arguments"]?.stringValue)
        let redactedArguments = try JSONParser.parse(Array(call.utf8))
        #expect(redactedArguments["password"]?.stringValue?.hasPrefix("[redacted:member:password:") == true, "\(call)")
        #expect(redactedArguments["user"] == "ana")
        // A line without the member is left alone.
        #expect(redactor.redact(#"{"note":"no secret here"}"#) == nil)
    }

    @Test("a secret spelt with escapes it does not need (`\\u0073k-…`, `\\/`) is found at every depth; a line without one keeps its bytes")
    func needlessEscapes() throws {
        let redactor = Redactor(
            environmentNames: ["SERVICE_TOKEN"], memberNames: ["password"], environment: ["SERVICE_TOKEN": "svc/token-5521a9"])
        // A server's raw line as another program may write it: the first letter of a key and of
        // the member's name, and the slash of a declared value, escaped.
        let raw =
            #"{"jsonrpc":"2.0","params":{"key":"\u0073k-proj-0123456789abcdefABCDEF","\u0070assword":"hunter2-secret","t":"svc\/token-5521a9"}}"#
        for (depth, line) in [
            (0, raw),
            // The same line kept as a string (a stored raw line), and that line kept again.
            (1, String(decoding: JSONWriter.encode(["line": .string(raw)]), as: UTF8.self)),
            (2, String(decoding: JSONWriter.encode(["body": .string(JSONWriter.encodeString(["line": .string(raw)]))]), as: UTF8.self)),
        ] {
            #expect(redactor.mayRedact(Array(line.utf8)), "depth \(depth)")
            let written = try #require(redactor.redact(line), "depth \(depth): \(line)")
            for secret in ["k-proj-0123456789abcdef", "hunter2-secret", "token-5521a9"] {
                #expect(!written.contains(secret), "depth \(depth): \(written)")
            }
            // Every depth still parses, and holds the placeholders where the secrets were.
            var text = written
            for _ in 0..<depth {
                let value = try JSONParser.parse(Array(text.utf8))
                text = try #require(value["line"]?.stringValue ?? value["body"]?.stringValue)
            }
            let params = try JSONParser.parse(Array(text.utf8))["params"]
            #expect(params?["key"]?.stringValue?.hasPrefix("[redacted:api-key:") == true, "depth \(depth): \(text)")
            #expect(params?["password"]?.stringValue?.hasPrefix("[redacted:member:password:") == true, "depth \(depth): \(text)")
            #expect(params?["t"]?.stringValue?.hasPrefix("[redacted:env:SERVICE_TOKEN:") == true, "depth \(depth): \(text)")
        }
        // Escapes that hide nothing are left as they were written.
        let harmless = #"{"note":"\u0041 path a\/b \u001b[0m"}"#
        #expect(redactor.redact(harmless) == nil)
        // A control character's escape is what the writer itself writes: not worth a second look.
        #expect(!redactor.mayRedact(Array(#"{"note":"\u001b[0m done"}"#.utf8)))
        // Two backslashes are an escape one depth down (JSON text in a string); three are an
        // escaped backslash and the escape, at the line's own depth.
        #expect(Redactor.undoingNeedlessEscapes(in: #"a\\u0073b"#) == "asb")
        #expect(Redactor.undoingNeedlessEscapes(in: #"a\\\u0073b"#) == #"a\\sb"#)
        #expect(Redactor.undoingNeedlessEscapes(in: #"a\\\\u0073b"#) == "asb")  // two depths down
    }

    @Test("a credential under a well-known member name is redacted without being declared; a declared name adds to them")
    func defaultMembers() throws {
        let redactor = Redactor(memberNames: ["pin"], environment: [:])
        #expect(redactor.memberNames.prefix(Redactor.defaultMemberNames.count) == Redactor.defaultMemberNames[...])
        let line = String(
            decoding: JSONWriter.encode([
                "body": [
                    "api_key": "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "x-api-key": "x-9f8e7d6c5b4a", "access_token": "ya29.a0Af-token",
                    "pin": "4921", "model": "gpt-test",
                ]
            ]), as: UTF8.self)
        #expect(redactor.mayRedact(Array(line.utf8)))
        let written = try #require(redactor.redact(line))
        for secret in ["9f8e7d6c5b4a39281706f5e4d3c2b1a0", "x-9f8e7d6c5b4a", "ya29.a0Af-token", "4921"] {
            #expect(!written.contains(secret), "\(written)")
        }
        #expect(try JSONParser.parse(Array(written.utf8))["body"]?["model"] == "gpt-test")
        #expect(Redactor.standard.redact(#"{"password":"hunter2-secret"}"#)?.contains("[redacted:member:password:") == true)
    }

    @Test("a known secret echoed in base64 (standard or URL-safe, at any place in the encoded text, in a Basic credential) is replaced too")
    func encodedSecrets() throws {
        let key = "sk-live-7Hq2Zr9Wm4Xc1Vb8Nt6Lp3Ks"
        let redactor = Redactor(environmentNames: ["SERVICE_KEY"], environment: ["SERVICE_KEY": key])
        // The key after 0, 1 and 2 bytes of other text: each place in a 3-byte group; then a
        // Basic credential of user:key, and the URL-safe alphabet (a key whose encoding has + or /).
        for prefix in ["", "a", "ab", "user:", "curl -u admin:"] {
            let encoded = Data((prefix + key + " trailing").utf8).base64EncodedString()
            let text = "the tool printed \(encoded) and stopped"
            let written = redactor.redactText(text)
            #expect(written.contains("[redacted:env:SERVICE_KEY:base64:"), "\(prefix): \(written)")
            // No run of the key's own characters is left: only those it shares with the text around it.
            for form in Redactor.encodedForms(of: key) { #expect(!written.contains(form.prefix(8)), "\(form): \(written)") }
            // In an encoded event, too, and the fast test sees it.
            let line = String(decoding: JSONWriter.encode(["output": .string(text)]), as: UTF8.self)
            #expect(redactor.mayRedact(Array(line.utf8)))
            let redacted = try #require(redactor.redact(line))
            #expect(!redacted.contains(String(encoded.dropFirst(4).prefix(20))), "\(redacted)")
        }
        let urlSafeKey = "k>>>?key-with-bits-that-encode-to-slashes???"
        let urlSafe = Redactor(environmentNames: ["K"], environment: ["K": urlSafeKey])
        let standard = Data(urlSafeKey.utf8).base64EncodedString()
        #expect(standard.contains("+") || standard.contains("/"))
        let safe = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        for text in [standard, safe] { #expect(urlSafe.redactText(text).contains("[redacted:env:K:base64:"), "\(text)") }
        // Text that holds no encoding of the key keeps its bytes, and a short secret has no forms.
        #expect(
            redactor.redactText("an ordinary reply, with base64 of something else: aGVsbG8gd29ybGQ=")
                == "an ordinary reply, with base64 of something else: aGVsbG8gd29ybGQ=")
        #expect(Redactor.encodedForms(of: "short").isEmpty)
        // Learned while writing (a recorded request's header values), the same.
        let learned = Redactor(environment: [:]).adding([key], rule: "header:authorization")
        #expect(learned.redactText(Data(("x" + key).utf8).base64EncodedString()).contains("[redacted:header:authorization:base64:"))
    }

    @Test(
        "a known secret in base64 that line breaks cut (base64's 76 columns, PEM's 64, CRLF, escaped at any depth) is replaced across them")
    func wrappedEncodedSecrets() throws {
        let key = "sk-live-7Hq2Zr9Wm4Xc1Vb8Nt6Lp3Ks"
        let long = String(repeating: "Lq9Zx2Wv8Rt6Yp4Nm1Kd7", count: 6)
        let redactor = Redactor(environmentNames: ["SERVICE_KEY", "LONG_KEY"], environment: ["SERVICE_KEY": key, "LONG_KEY": long])
        /// `text` as `base64` writes it: wrapped every `width` characters with `separator`.
        func wrapped(_ text: String, width: Int, separator: String = "\n") -> String {
            let encoded = Array(Data(text.utf8).base64EncodedString())
            return stride(from: 0, to: encoded.count, by: width).map { String(encoded[$0..<min($0 + width, encoded.count)]) }
                .joined(separator: separator)
        }
        // `base64 .env`: the key's encoding cut by the first line's end (checked: no form stands whole).
        let dotEnv = "DATABASE_URL=postgres://localhost/app\nOPENAI_API_KEY=\(key)\nDEBUG=1\n"
        // PEM's 64 columns cut it when it begins sooner.
        let shortEnv = "A=1\nOPENAI_API_KEY=\(key)\n"
        for (file, width, separator) in [(dotEnv, 76, "\n"), (shortEnv, 64, "\r\n"), (dotEnv, 76, "\r\n")] {
            let output = "$ base64 .env\n" + wrapped(file, width: width, separator: separator) + "\n$ "
            #expect(Redactor.encodedForms(of: key).allSatisfy { !output.contains($0) }, "the test's key stands whole at \(width)")
            let written = redactor.redactText(output)
            #expect(written.contains("[redacted:env:SERVICE_KEY:base64:"), "\(width): \(written)")
            #expect(written.hasPrefix("$ base64 .env\n") && written.hasSuffix("\n$ "), "\(written)")
            // In an encoded event (the breaks are `\n` escapes), and a reply kept whole inside it (`\\n`).
            let inner = String(decoding: JSONWriter.encode(["stdout": .string(output)]), as: UTF8.self)
            let line = String(decoding: JSONWriter.encode(["output": .string(output), "raw": .string(inner)]), as: UTF8.self)
            #expect(redactor.mayRedact(Array(line.utf8)), "the fast test sees it")
            let redacted = try #require(redactor.redact(line))
            let parsed = try JSONParser.parse(Array(redacted.utf8))
            for text in [
                parsed["output"]?.stringValue, try JSONParser.parse(Array((parsed["raw"]?.stringValue ?? "").utf8))["stdout"]?.stringValue,
            ] {
                let text = try #require(text)
                #expect(text.contains("[redacted:env:SERVICE_KEY:base64:"), "\(width): \(text)")
                // Decoded again, what is left holds no run of the key.
                let left = text.replacingOccurrences(of: "\r", with: "").split(separator: "\n").filter { !$0.contains("$") }
                    .joined()
                #expect(
                    !left.contains("7Hq2Zr9")
                        && !String(decoding: Data(base64Encoded: String(left.prefix(20))) ?? Data(), as: UTF8.self).contains(key))
            }
        }
        // A secret longer than a line: cut twice.
        let longOutput = wrapped("LONG_KEY=" + long + "\n", width: 64)
        #expect(longOutput.split(separator: "\n").count >= 3)
        #expect(redactor.redactText(longOutput).contains("[redacted:env:LONG_KEY:base64:"), "\(redactor.redactText(longOutput))")
        // Wrapped base64 of something else keeps its bytes.
        let other = wrapped(String(repeating: "nothing secret here, only words. ", count: 5), width: 76)
        #expect(redactor.redactText(other) == other)
    }

    @Test("the slow path's byte searches find a needle wherever it stands, as a search of the text's bytes one by one does")
    func byteSearches() {
        /// Whether `needle`'s bytes stand in `text`'s, tried at every place.
        func reference(_ needle: String, _ text: String) -> Bool {
            let (needle, text) = (Array(needle.utf8), Array(text.utf8))
            guard needle.count <= text.count else { return needle.isEmpty }
            return (0...text.count - needle.count).contains { text[$0..<$0 + needle.count].elementsEqual(needle) }
        }
        // Every needle and text of up to 5 characters over a small alphabet (a repeated prefix, an
        // escape, a character of two bytes), so that hits at the start, at the end, overlapping
        // and cut off by the text's end all come up.
        let alphabet = ["a", "b", "\\", "é"]
        func words(upTo length: Int) -> [String] {
            var words = [""]
            var last = [""]
            for _ in 0..<length {
                last = last.flatMap { word in alphabet.map { word + $0 } }
                words += last
            }
            return words
        }
        let needles = words(upTo: 3)
        var mismatches: [String] = []
        for text in words(upTo: 5) {
            for needle in needles where Redactor.holds(needle, in: text) != reference(needle, text) {
                mismatches.append("\(needle) in \(text)")
            }
        }
        #expect(mismatches.isEmpty, "holds disagrees: \(mismatches.prefix(10))")
        // And wherever Foundation's search finds a needle (the slow path's search before): in
        // another, canonically equivalent spelling too.
        let spellings = [
            ("caf\u{E9}-pass-1", "a cafe\u{301}-pass-1 b"), ("cafe\u{301}-pass-1", "caf\u{E9}-pass-1"),
            ("GITHUB_TOKEN", "GITHUB_TO\u{212A}EN"),
            ("sk-live", "\u{3000}sk-live"), ("pass", "no such word \u{E9}"),
        ]
        for (needle, text) in spellings where text.contains(needle) {
            #expect(Redactor.holds(needle, in: text), "\(needle) in \(text)")
        }
        #expect(
            spellings.filter { $0.1.contains($0.0) }.count >= 2,
            "Foundation finds no equivalent spelling here: the check above checks nothing")
        let redactor = Redactor(environmentNames: ["CAFE_PASS"], environment: ["CAFE_PASS": "caf\u{E9}-pass-1"])
        #expect(!redactor.redactText("it said cafe\u{301}-pass-1.").contains("pass-1"))
        // The patterns' literals, as the slow path looks for them before running a pattern.
        let texts = ["password = hunter22", "  Password: x", "xoxb-123", "nothing here", "PGPASSWORD=abc", "", "é-----BEGIN"]
        for pattern in Redactor.patterns {
            for text in texts {
                #expect(
                    Redactor.holdsAny(of: pattern.literalNeedles, in: text) == pattern.literals.contains { reference($0, text) },
                    "\(pattern.rule) in \(text)")
            }
        }
    }

    @Test(
        "what a redactor made per run works out once per process gives what working it out each time gave: names that look secret, needles")
    func madeOncePerProcess() {
        // `looksSecret` read as Foundation's upper-casing and splitting read it (the code before
        // the byte path), over names made of one to three of these pieces.
        func reference(_ name: String) -> Bool {
            let parts = name.uppercased().split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." })
            if let last = parts.last, last == "KEY" || last == "KEYS" { return true }
            return parts.contains { part in Redactor.secretWords.contains { part.hasSuffix($0) } }
        }
        let pieces = [
            "", "_", "-", ".", "__", "KEY", "key", "Keys", "KEYSS", "TOKEN", "token", "tokens", "GITHUB", "API", "SECRET", "secrets", "X",
            "NO", "PASS", "WORD", "APIKEY", "passwd", "passphrase", "CREDENTIAL", "ey", "K", "\u{212A}EY", "\u{E9}",
        ]
        var disagreements: [String] = []
        var secret = 0
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let name = a + b + c
                    if Redactor.looksSecret(name) != reference(name) { disagreements.append(name) }
                    if reference(name) { secret += 1 }
                }
            }
        }
        #expect(disagreements.isEmpty, "looksSecret disagrees on \(disagreements.prefix(10))")
        #expect(secret > 1000 && secret < pieces.count * pieces.count * pieces.count)

        // The needles: the standing ones grouped once, then a run's joined to them, are the
        // groups of all of them grouped together (each needle once, under its rarest byte).
        func flattened(_ groups: [Redactor.NeedleGroup]) -> [String] {
            groups.flatMap { group in group.needles.map { "\(group.anchor) \($0.at) \(String(decoding: $0.bytes, as: UTF8.self))" } }
                .sorted()
        }
        let standing = Redactor.patterns.flatMap { $0.literals.map { Array($0.utf8) } } + Redactor.needlessEscapeMarks
        let ofARun = ["sk-proj-abc", "password\"", "password\\", "hunter2-secret", "sk-proj-abc", "xoxb-", "-----BEGIN"].map {
            Array($0.utf8)
        }
        let joined = Redactor.grouped(ofARun, joining: Redactor.standingNeedles)
        #expect(flattened(joined) == flattened(Redactor.grouped(ofARun + standing)))
        #expect(Set(flattened(joined)).count == flattened(joined).count, "a needle twice")
        #expect(Set(joined.map(\.anchor)).count == joined.count, "an anchor in two groups")
        #expect(flattened(Redactor.standingNeedles) == flattened(Redactor.grouped(standing)))
    }

    @Test("a secret that holds another is replaced whole, whatever order the names come in")
    func overlappingSecrets() {
        let redactor = Redactor(
            environmentNames: ["SHORT", "LONG"], environment: ["SHORT": "abcd1234", "LONG": "abcd1234-and-more"])
        #expect(redactor.redactText("abcd1234-and-more") == redactor.placeholder("abcd1234-and-more", rule: "env:LONG"))
    }
}
