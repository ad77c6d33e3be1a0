import Crypto
public import Foundation
public import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Keeps secrets out of logs: before an event is written, every secret in its line is replaced
/// by a stable, keyed placeholder — `[redacted:<rule>:<8 hex>]`, the same for the same secret
/// throughout (so replay, diff and evals still compare runs) and naming the rule that fired, so
/// the log records that redaction happened and why. The writer applies it to every event, so
/// it covers tool output and stderr, arguments, model replies, answers and errors alike.
///
/// Rules: the values of declared environment variables, in the caller's environment and in
/// what the runtime hands to the processes it starts (`childEnvironments`), with every value
/// handed to a child under a name that looks secret (`looksSecret`); the values of declared
/// member names (`api_key`, `password`, …) wherever they appear in event data; and common key
/// patterns (`patterns`), always on.
public struct Redactor: Sendable, Hashable {
    /// Secrets known by value, with the rule that names them, as they were given.
    private var declared: [(rule: String, secret: String)]
    /// What is replaced by value: `declared` and their base64 forms (`encodedForms`), the
    /// longest first (a secret that holds another is replaced whole).
    private var values: [(rule: String, secret: String)]
    /// The base64 forms among `values`: looked for again across line breaks
    /// (`redactingWrappedForms`).
    private var encoded: [(rule: String, secret: String)]
    /// Member names whose string values are secret wherever they appear: `defaultMemberNames`
    /// and those the caller declared.
    public var memberNames: [String]
    private let key: [UInt8]
    /// Byte strings at least one of which a line with a secret contains: the writer's fast test,
    /// so the hot path only scans bytes.
    /// They are grouped by first byte, so a line is searched once per distinct first byte.
    private var needles: [NeedleGroup]

    public static func == (a: Redactor, b: Redactor) -> Bool {
        a.memberNames == b.memberNames && a.values.map(\.secret) == b.values.map(\.secret) && a.key == b.key
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(memberNames)
        hasher.combine(values.count)
    }

    /// A redactor for the values of `environmentNames` (read from `environment` now) and the
    /// string values of `memberNames`. The placeholder's key is `AGENT_EVAL_REDACTION_KEY` when
    /// set, else a fixed one: secrets worth redacting are long and random, so 32 bits of a keyed
    /// hash identify one without revealing it.
    ///
    /// `childEnvironments` are the environments the runtime hands to the processes it starts
    /// (command tools, MCP servers): a value there is secret when its name is one of
    /// `environmentNames`, or looks secret (`looksSecret`) and the value is at least
    /// `minimumGuessedLength` characters long (a short value under a name such as `SORT_KEY` is
    /// a word, not a key, and redacting it would rewrite ordinary text).
    public init(
        environmentNames: [String] = [], memberNames: [String] = [], childEnvironments: [[String: String]] = [],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        var values: [(rule: String, secret: String)] = environmentNames.compactMap { name in
            environment[name].flatMap { $0.count >= Self.minimumDeclaredLength ? ("env:\(name)", $0) : nil }
        }
        for child in childEnvironments {
            // Sorted: which of two overlapping secrets is replaced first must not vary by run.
            for (name, value) in child.sorted(by: { $0.key < $1.key }) where !values.contains(where: { $0.secret == value }) {
                let isDeclared = environmentNames.contains(name) && value.count >= Self.minimumDeclaredLength
                let isGuessed = Self.looksSecret(name) && value.count >= Self.minimumGuessedLength
                if isDeclared || isGuessed { values.append(("env:\(name)", value)) }
            }
        }
        declared = values
        encoded = Self.encodedValues(values)
        self.values = Self.replacedByValue(values, encoded: encoded)
        self.memberNames = Self.defaultMemberNames + memberNames.filter { !Self.defaultMemberNames.contains($0) }
        key = Array((environment["AGENT_EVAL_REDACTION_KEY"] ?? "agent-eval-redaction-v1").utf8)
        needles = Self.needles(values: self.values, encoded: encoded, memberNames: self.memberNames)
    }

    /// The redaction every log writer applies unless told otherwise (`LogWriter.Options`): the
    /// key patterns (`patterns`), and the value of every variable of this process's
    /// environment whose name looks secret (`looksSecret`, values of `minimumGuessedLength` or
    /// more). `exec`, `run` and `record` add what they know besides (an agent file's
    /// `redact_env` and `redact_members`, the recorded command's environment); `mcp-proxy`,
    /// `collect`, `import` and every other writer redact at least this. docs/agent-files.md,
    /// "Every writer of a log redacts the same way".
    public static let standard = Redactor(childEnvironments: [ProcessInfo.processInfo.environment])

    /// Needles that share the byte searched for (`anchor`): each needle whole, and where in it
    /// the anchor stands.
    struct NeedleGroup: Sendable {
        var anchor: UInt8
        var needles: [(bytes: [UInt8], at: Int)]
    }

    /// How often `byte` stands in an encoded event, roughly (English text, JSON punctuation,
    /// ids): the anchor of a needle is its rarest byte, so the search stops at few places. A
    /// needle is found whichever byte anchors it; this only decides how fast.
    static func commonness(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "e"), UInt8(ascii: "\""), UInt8(ascii: " "): return 120
        case UInt8(ascii: "t"), UInt8(ascii: "a"), UInt8(ascii: "o"), UInt8(ascii: "i"), UInt8(ascii: "n"): return 75
        case UInt8(ascii: "s"), UInt8(ascii: "h"), UInt8(ascii: "r"), UInt8(ascii: ":"), UInt8(ascii: ","): return 60
        case UInt8(ascii: "d"), UInt8(ascii: "l"), UInt8(ascii: "c"), UInt8(ascii: "u"), UInt8(ascii: "_"): return 35
        case UInt8(ascii: "m"), UInt8(ascii: "w"), UInt8(ascii: "f"), UInt8(ascii: "g"), UInt8(ascii: "y"), UInt8(ascii: "p"): return 20
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "b"): return 15
        case UInt8(ascii: "v"), UInt8(ascii: "k"): return 8
        case UInt8(ascii: "x"), UInt8(ascii: "j"), UInt8(ascii: "q"), UInt8(ascii: "z"): return 2
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return 3
        default: return 5
        }
    }

    /// The needles of `values`, `memberNames` and the patterns, grouped by their anchor byte.
    private static func needles(
        values: [(rule: String, secret: String)], encoded: [(rule: String, secret: String)], memberNames: [String]
    ) -> [NeedleGroup] {
        let all =
            values.map { Array(JSONWriter.encodeString(.string($0.secret)).dropFirst().dropLast().utf8) }
            // Pieces of a base64 form, one of which stands whole where line breaks cut the form.
            + encoded.flatMap { wrappedPieces(of: Array($0.secret.utf8)) }
            // A member's name, then the quote that ends it (`"name"`) or the backslashes before
            // that quote at any depth of JSON text inside a string (`\"name\"`, `\\\"name\\\"`).
            + memberNames.flatMap { name in
                Self.isPlainName(name)
                    ? [Array("\(name)\"".utf8), Array("\(name)\\".utf8)] : [Array("\(JSONWriter.encodeString(.string(name))):".utf8)]
            }
        return grouped(all, joining: standingNeedles)
    }

    /// The needles every redactor has, grouped once per process (a redactor is made per run,
    /// and these are most of its some 300): the patterns' literals, and a character written as
    /// an escape it does not need (`\u0073k-…`, `\/`), as another program may write JSON (the
    /// line is read again with such escapes undone).
    static let standingNeedles = grouped(patterns.flatMap { $0.literals.map { Array($0.utf8) } } + needlessEscapeMarks)

    /// `needles` grouped by their anchor byte (each needle's rarest, `commonness`), for
    /// `holdsAny(of:in:)`, added to the groups of `base` (grouped the same way): groups in the
    /// order their anchors first come, `base`'s first, needles in theirs, each needle once.
    static func grouped(_ needles: [[UInt8]], joining base: [NeedleGroup] = []) -> [NeedleGroup] {
        var groups = base
        var groupOfAnchor = [Int?](repeating: nil, count: 256)
        for (index, group) in groups.enumerated() { groupOfAnchor[Int(group.anchor)] = index }
        for needle in needles where !needle.isEmpty {
            // The rarest byte, the first of equals.
            var at = 0
            for index in needle.indices where commonness(needle[index]) < commonness(needle[at]) { at = index }
            let anchor = needle[at]
            if let index = groupOfAnchor[Int(anchor)] {
                // A needle seen before has the same anchor: it is looked for in that group alone.
                if !groups[index].needles.contains(where: { $0.bytes == needle }) { groups[index].needles.append((needle, at)) }
            } else {
                groupOfAnchor[Int(anchor)] = groups.count
                groups.append(NeedleGroup(anchor: anchor, needles: [(needle, at)]))
            }
        }
        return groups
    }

    /// This redactor, also replacing `secrets` (each at least `minimumDeclaredLength`
    /// characters; shorter ones are words) under `rule`: secrets learned while a log is written,
    /// such as the header values of a recorded request (`LogWriter.redact(also:rule:)`).
    public func adding(_ secrets: [String], rule: String) -> Redactor {
        var copy = self
        var changed = false
        for secret in secrets where secret.count >= Self.minimumDeclaredLength && !copy.declared.contains(where: { $0.secret == secret }) {
            copy.declared.append((rule, secret))
            changed = true
        }
        guard changed else { return self }
        copy.encoded = Self.encodedValues(copy.declared)
        copy.values = Self.replacedByValue(copy.declared, encoded: copy.encoded)
        copy.needles = Self.needles(values: copy.values, encoded: copy.encoded, memberNames: copy.memberNames)
        return copy
    }

    /// The secrets replaced by value: each of `declared`, and their base64 forms (`encoded`, from
    /// `encodedValues`); the longest first, so that a secret that holds another is replaced
    /// whole, and of equal lengths in the order given.
    static func replacedByValue(
        _ declared: [(rule: String, secret: String)], encoded: [(rule: String, secret: String)]
    ) -> [(rule: String, secret: String)] {
        var all = declared
        for form in encoded where !all.contains(where: { $0.secret == form.secret }) { all.append(form) }
        return all.enumerated().sorted { a, b in
            a.element.secret.count != b.element.secret.count ? a.element.secret.count > b.element.secret.count : a.offset < b.offset
        }.map(\.element)
    }

    /// The base64 forms of each of `declared` (`encodedForms`), under `<rule>:base64`.
    static func encodedValues(_ declared: [(rule: String, secret: String)]) -> [(rule: String, secret: String)] {
        var forms: [(rule: String, secret: String)] = []
        for (rule, secret) in declared {
            for form in encodedForms(of: secret) where !forms.contains(where: { $0.secret == form }) {
                forms.append(("\(rule):base64", form))
            }
        }
        return forms
    }

    /// The shortest width of a line that wrapped base64 is found across (`base64` and MIME
    /// write 76 characters a line, PEM 64).
    static let minimumWrapWidth = 64

    /// Pieces of a base64 form one of which stands whole in any text that holds the form cut by
    /// line breaks at least `minimumWrapWidth` characters apart: its first and its last half (one
    /// break leaves one of them whole), and for a form longer than a line, every run of half a
    /// line at a multiple of half a line (a whole line inside the form holds one).
    static func wrappedPieces(of form: [UInt8]) -> [[UInt8]] {
        let half = (form.count + 1) / 2
        var pieces = [Array(form.prefix(half)), Array(form.suffix(half))]
        if form.count > minimumWrapWidth {
            let step = minimumWrapWidth / 2
            for start in stride(from: 0, through: form.count - step, by: step) { pieces.append(Array(form[start..<start + step])) }
        }
        return pieces
    }

    /// `text` with every base64 form of a known secret that line breaks cut (`base64` wraps its
    /// output so) replaced by its placeholder, breaks and all; nil when there is none. A break is
    /// a newline, a carriage return and newline, or either written as an escape at any depth of
    /// JSON text (`\n`, `\\n`), between two base64 characters. The forms that stand whole were
    /// replaced already.
    func redactingWrappedForms(in text: String) -> String? {
        // No line break, as a byte or an escape: nothing is wrapped. (Byte for byte: neither has
        // another spelling for Foundation's search to find.)
        guard !encoded.isEmpty, Self.holdsBytes(of: "\n", in: text) || Self.holdsBytes(of: #"\n"#, in: text) else { return nil }
        let bytes = Array(text.utf8)
        func isBase64(_ byte: UInt8) -> Bool {
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
        /// Where the character `byte` that begins at `position` ends, written as the byte or as an
        /// escape at any depth (backslashes, then `letter`); nil when it is not there.
        func end(of byte: UInt8, _ letter: UInt8, at position: Int) -> Int? {
            guard position < bytes.count else { return nil }
            if bytes[position] == byte { return position + 1 }
            var end = position
            while end < bytes.count, bytes[end] == UInt8(ascii: "\\") { end += 1 }
            guard end > position, end < bytes.count, bytes[end] == letter else { return nil }
            return end + 1
        }
        /// The length of the break (a newline, or a carriage return and newline) at `index`, or nil.
        func breakLength(at index: Int) -> Int? {
            if let newline = end(of: 0x0A, UInt8(ascii: "n"), at: index) { return newline - index }
            guard let carriage = end(of: 0x0D, UInt8(ascii: "r"), at: index), let newline = end(of: 0x0A, UInt8(ascii: "n"), at: carriage)
            else { return nil }
            return newline - index
        }
        // The text without the breaks between base64 characters, and where each byte came from.
        var joined: [UInt8] = []
        var origin: [Int] = []
        var index = 0
        var joinedAny = false
        while index < bytes.count {
            if let last = joined.last, isBase64(last), let length = breakLength(at: index), index + length < bytes.count,
                isBase64(bytes[index + length])
            {
                index += length
                joinedAny = true
                continue
            }
            joined.append(bytes[index])
            origin.append(index)
            index += 1
        }
        guard joinedAny else { return nil }
        var replacements: [(range: Range<Int>, with: String)] = []
        for (rule, form) in encoded {
            let needle = Array(form.utf8)
            var from = 0
            while from + needle.count <= joined.count {
                guard let at = Self.firstIndex(of: needle, in: joined, from: from) else { break }
                let range = origin[at]..<origin[at + needle.count - 1] + 1
                // Cut by a break (a whole one was replaced already), and not inside one replaced.
                if range.count != needle.count, !replacements.contains(where: { $0.range.overlaps(range) }) {
                    replacements.append((range, placeholder(form, rule: rule)))
                }
                from = at + needle.count
            }
        }
        guard !replacements.isEmpty else { return nil }
        var result = bytes
        for replacement in replacements.sorted(by: { $0.range.lowerBound > $1.range.lowerBound }) {
            result.replaceSubrange(replacement.range, with: Array(replacement.with.utf8))
        }
        return String(decoding: result, as: UTF8.self)
    }

    /// The shortest secret whose base64 forms are replaced too.
    static let minimumEncodedLength = 8

    /// What `secret` looks like inside base64 text (standard and URL-safe): a tool or a model
    /// that echoes a key encoded, or an `Authorization: Basic` value of `user:key`, holds it
    /// still. The secret may begin at any of the three places of a 3-byte group, so there are
    /// three forms of each alphabet; each is the run of characters the secret's bytes alone
    /// decide, without the one or two at either end that the bytes around it share.
    static func encodedForms(of secret: String) -> [String] {
        let bytes = Array(secret.utf8)
        guard bytes.count >= minimumEncodedLength else { return [] }
        var forms: [String] = []
        for before in 0..<3 {
            let encoded = Array(Base64.encode([UInt8](repeating: 0, count: before) + bytes).utf8)
            // Character i holds bits 6i ..< 6i + 6 of the bytes: the secret's alone from the
            // first that starts at or after its first bit to the last that ends by its last.
            let first = (8 * before + 5) / 6
            let end = 8 * (before + bytes.count) / 6
            guard end - first >= minimumEncodedLength else { continue }
            let standard = String(decoding: encoded[first..<end], as: UTF8.self)
            let urlSafe = String(standard.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
            for form in [standard, urlSafe] where !forms.contains(form) { forms.append(form) }
        }
        return forms
    }

    /// Member names whose string values every redactor replaces, declared or not: names that
    /// hold a credential in any API's JSON (a key an agent sends in a request body, a token a
    /// tool's output carries).
    public static let defaultMemberNames = [
        "api_key", "apiKey", "api-key", "x-api-key", "password", "passwd", "client_secret", "access_token", "refresh_token",
        "secret_key", "private_key", "authorization", "Authorization",
    ]

    /// The shortest value of a declared variable that is redacted: shorter ones would replace
    /// ordinary words.
    public static let minimumDeclaredLength = 4

    /// The shortest value handed to a child under a name that only looks secret that is redacted.
    public static let minimumGuessedLength = 8

    /// Words that make a variable's name look secret: a value handed to a child under such a
    /// name is redacted without being declared. The name is split at `_`, `-` and `.`, case
    /// aside; a part that is one of `secretWords` or ends in one (`GITHUBTOKEN`), or a last part
    /// `KEY` or `KEYS` (`STRIPE_KEY`, `OPENAI_API_KEY`; not `KEY_PREFIX`), makes it secret.
    public static let secretWords = [
        "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "APIKEY",
    ]

    /// The values a command line gives its options named for a secret (`isSecretOption`):
    /// `--password VALUE`, `--api-key=VALUE`, `-token VALUE`, and `NAME=VALUE` (an assignment
    /// `env` or a shell takes, the name looking secret), each at least `minimumGuessedLength`
    /// characters. An argument with spaces (a shell script, `sh -c '…'`) is read word by word, and
    /// quotes around a value are left out. For the commands the runtime starts (tools, MCP
    /// servers, a recorded command), whose programs may echo their own command line.
    public static func secrets(inArguments arguments: [String]) -> [String] {
        let words = arguments.flatMap { $0.split(whereSeparator: \.isWhitespace).map(String.init) }
        func unquoted(_ value: Substring) -> String {
            var value = value
            while let first = value.first, first == "\"" || first == "'", value.last == first, value.count >= 2 {
                value = value.dropFirst().dropLast()
            }
            return String(value).trimmingCharacters(in: CharacterSet(charactersIn: "\"';"))
        }
        var found: [String] = []
        for (index, word) in words.enumerated() {
            let option = word.drop { $0 == "-" }
            if let equals = option.firstIndex(of: "="), equals > option.startIndex {
                let name = String(option[..<equals])
                let value = unquoted(option[option.index(after: equals)...])
                let isSecret = word.hasPrefix("-") ? isSecretOption(name) : looksSecret(name)
                if isSecret, value.count >= minimumGuessedLength { found.append(value) }
            } else if word.hasPrefix("-"), isSecretOption(String(option)), index + 1 < words.count {
                let value = unquoted(words[index + 1][...])
                if !words[index + 1].hasPrefix("-"), value.count >= minimumGuessedLength { found.append(value) }
            }
        }
        return found
    }

    /// Whether an option's name (without its dashes) names the secret it takes: its last part is
    /// a secret word (`password`, `api-key`, `token`, `client-secret`); not `password-stdin`,
    /// `no-password`, `secret-name` or `token-endpoint`, whose values are no secret.
    static func isSecretOption(_ name: String) -> Bool {
        let parts = name.uppercased().split(whereSeparator: { $0 == "-" || $0 == "_" || $0 == "." })
        guard let last = parts.last, parts.first != "NO" else { return false }
        return secretWords.contains(String(last)) || last == "KEY" || last == "KEYS"
            || (parts.count >= 2 && parts[parts.count - 2] == "API" && last == "KEY")
    }

    /// Whether `name` (an environment variable's) looks like it holds a secret: `API_KEY`,
    /// `GITHUB_TOKEN`, `DB_PASSWORD`, `CLIENT_SECRET`; not `PATH`, `SORT_ORDER`, `KEY_PREFIX`.
    public static func looksSecret(_ name: String) -> Bool {
        // A name of ASCII alone (every environment variable's, nearly) is read as bytes: a
        // redactor is made per run, and asks this of each variable of each child's environment.
        if let answer = name.utf8.withContiguousStorageIfAvailable(looksSecret(ascii:)), let answer { return answer }
        let parts = name.uppercased().split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == "." })
        if let last = parts.last, last == "KEY" || last == "KEYS" { return true }
        return parts.contains { part in
            secretWords.contains { word in
                // A suffix compared as bytes (a `Substring`'s generic `hasSuffix` walked both
                // reversed); a name that is not all ASCII as characters, as before (the Kelvin sign
                // is a `K`).
                part.utf8.allSatisfy { $0 < 0x80 }
                    ? part.utf8.count >= word.utf8.count && part.utf8.suffix(word.utf8.count).elementsEqual(word.utf8)
                    : part.hasSuffix(word)
            }
        }
    }

    /// `looksSecret` of a name's bytes, when they are all ASCII (nil otherwise): the same parts,
    /// upper-cased byte by byte.
    static func looksSecret(ascii name: UnsafeBufferPointer<UInt8>) -> Bool? {
        guard name.allSatisfy({ $0 < 0x80 }) else { return nil }
        func upper(_ byte: UInt8) -> UInt8 { byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 0x20 : byte }
        // Whether the part `start..<end` ends in `word` (upper-case ASCII), case aside.
        func part(_ start: Int, _ end: Int, endsWith word: [UInt8]) -> Bool {
            guard end - start >= word.count else { return false }
            for offset in 0..<word.count where upper(name[end - word.count + offset]) != word[offset] { return false }
            return true
        }
        var start = 0
        var last: (start: Int, end: Int)?
        var isSecret = false
        for end in 0...name.count
        where end == name.count || name[end] == UInt8(ascii: "_") || name[end] == UInt8(ascii: "-") || name[end] == UInt8(ascii: ".") {
            if end > start {
                last = (start, end)
                if !isSecret { isSecret = secretWordBytes.contains { part(start, end, endsWith: $0) } }
            }
            start = end + 1
        }
        guard let last else { return false }
        let lastIsKey = keyWordBytes.contains { last.end - last.start == $0.count && part(last.start, last.end, endsWith: $0) }
        return lastIsKey || isSecret
    }

    /// `secretWords` as bytes, and the last parts that make a name secret alone (`KEY`, `KEYS`).
    static let secretWordBytes = secretWords.map { Array($0.utf8) }
    static let keyWordBytes = [Array("KEY".utf8), Array("KEYS".utf8)]

    /// Whether `line` may hold a secret (it holds one of the needles): a byte search — libc's
    /// `memchr` once per distinct anchor (each needle's rarest byte, `commonness`), then each
    /// needle anchored there compared in place around the hit — no text. Anchored on their
    /// first bytes (`s`, `e`, `k`, common in any text), the needles stopped the search at
    /// every few bytes and cost the writer about 16% of its events/s (docs/performance.md).
    func mayRedact(_ line: [UInt8]) -> Bool {
        line.withUnsafeBytes { mayRedact(in: $0) }
    }

    /// `mayRedact` over bytes held elsewhere (a stored content's text, without a copy).
    func mayRedact(in haystack: UnsafeRawBufferPointer) -> Bool {
        Self.holdsAny(of: needles, in: haystack) || !Self.urlPasswordRanges(in: haystack).isEmpty
    }

    /// Whether `haystack` holds one of the needles of `groups` (`grouped`): `memchr` for each
    /// group's anchor, then each needle anchored there compared in place around the hit.
    static func holdsAny(of groups: [NeedleGroup], in haystack: UnsafeRawBufferPointer) -> Bool {
        guard let base = haystack.baseAddress else { return false }
        let count = haystack.count
        for group in groups {
            var start = 0
            while start < count, let hit = memchr(base + start, Int32(group.anchor), count - start) {
                let offset = base.distance(to: UnsafeRawPointer(hit))
                for (needle, at) in group.needles where offset >= at && offset - at + needle.count <= count {
                    let from = offset - at
                    var index = 0
                    while index < needle.count, haystack[from + index] == needle[index] { index += 1 }
                    if index == needle.count { return true }
                }
                start = offset + 1
            }
        }
        return false
    }

    /// `holdsAny(of:in:)` over a string's UTF-8.
    static func holdsAny(of groups: [NeedleGroup], in text: String) -> Bool {
        var text = text
        return text.withUTF8 { holdsAny(of: groups, in: UnsafeRawBufferPointer($0)) }
    }

    /// Whether `needle` stands in `text`: byte for byte (`memchr` and `memcmp` over their UTF-8),
    /// or, where either is not all ASCII, as Foundation's search finds it (canonically equivalent
    /// text: no secret it found is missed). The slow path's searches go through this, not
    /// Foundation's `String.contains` alone, which on Linux runs `CFStringFind` over UTF-16
    /// copies: once per pattern literal on every line the quick test let through, that was about
    /// 4 ms a request recorded by the gateway.
    static func holds(_ needle: String, in text: String) -> Bool {
        if holdsBytes(of: needle, in: text) { return true }
        // Not there byte for byte, where either is not all ASCII: the needle may stand in another,
        // canonically equivalent spelling (`é` as `e` and a combining accent, the Kelvin sign for
        // `K`), which Foundation's search finds, as the slow path always did.
        let isASCII = needle.utf8.allSatisfy { $0 < 0x80 } && text.utf8.allSatisfy { $0 < 0x80 }
        return !isASCII && text.contains(needle)
    }

    /// Whether `needle`'s UTF-8 stands in `text`'s, byte for byte: `memchr` for its first byte,
    /// `memcmp` for the rest.
    static func holdsBytes(of needle: String, in text: String) -> Bool {
        var (needle, text) = (needle, text)
        return needle.withUTF8 { needle in
            text.withUTF8 { text in
                guard let needleBase = needle.baseAddress, !needle.isEmpty else { return true }
                guard let textBase = text.baseAddress, text.count >= needle.count else { return false }
                // Each place the needle's first byte stands, as far as the needle still fits.
                let last = text.count - needle.count
                var start = 0
                while start <= last, let hit = memchr(textBase + start, Int32(needle[0]), last - start + 1) {
                    if memcmp(hit, needleBase, needle.count) == 0 { return true }
                    start = textBase.distance(to: hit.assumingMemoryBound(to: UInt8.self)) + 1
                }
                return false
            }
        }
    }

    /// Where the passwords of URLs with credentials (`scheme://user:password@host`) stand in
    /// `bytes`: after `://`, a user name (maybe empty), a `:`, and up to an `@` nothing that ends
    /// a URL's authority (`/ ? #`, white space, a quote, a backslash — an escape in an encoded
    /// line — brackets, a comma or `< >`). A byte search (`memchr` for each `/`), run on every line the writer writes.
    static func urlPasswordRanges(in bytes: UnsafeRawBufferPointer) -> [Range<Int>] {
        guard let base = bytes.baseAddress else { return [] }
        var ranges: [Range<Int>] = []
        var start = 0
        while start < bytes.count, let hit = memchr(base + start, Int32(UInt8(ascii: "/")), bytes.count - start) {
            let slash = base.distance(to: UnsafeRawPointer(hit))
            start = slash + 1
            guard slash >= 2, slash + 1 < bytes.count, bytes[slash - 1] == UInt8(ascii: ":"), bytes[slash + 1] == UInt8(ascii: "/"),
                Self.isSchemeByte(bytes[slash - 2])
            else { continue }
            let authority = slash + 2
            let limit = min(bytes.count, authority + 512)
            var index = authority
            var colon: Int?
            while index < limit {
                let byte = bytes[index]
                if byte == UInt8(ascii: "@") { break }
                if byte <= 0x20 || Self.endsAuthority(byte) {
                    index = limit
                    break
                }
                if byte == UInt8(ascii: ":") && colon == nil { colon = index }
                index += 1
            }
            // The user may be empty (`redis://:password@host`); the password may not.
            guard index < limit, let colon, index > colon + 1 else { continue }
            ranges.append(colon + 1..<index)
            start = index + 1
        }
        return ranges
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func endsAuthority(_ byte: UInt8) -> Bool {
        switch byte {
        // Brackets and commas too: `[docs](http://host:80)@bob`, `http://a:8080,admin@b` are text
        // around a URL, not credentials (a password with them is percent-encoded in a URL).
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "\\"),
            UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "["), UInt8(ascii: "]"),
            UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: ","), 0x7F:
            return true
        default: return false
        }
    }

    /// `text` with the password of every URL with credentials replaced (`urlPasswordRanges`).
    static func redactingURLPasswords(in text: String, _ placeholder: (String) -> String) -> String {
        var text = text
        let ranges = text.withUTF8 { urlPasswordRanges(in: UnsafeRawBufferPointer($0)) }
        guard !ranges.isEmpty else { return text }
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        var copied = 0
        for range in ranges {
            let password = String(decoding: bytes[range], as: UTF8.self)
            guard !password.hasPrefix("[redacted:") else { continue }
            result += bytes[copied..<range.lowerBound]
            result += Array(placeholder(password).utf8)
            copied = range.upperBound
        }
        result += bytes[copied...]
        return String(decoding: result, as: UTF8.self)
    }

    /// What a secret known to be one by where it stands (an attribute named `api_key`, a header)
    /// is written as: the placeholder of `rule`, the same for the same secret throughout.
    public func redactedValue(_ secret: String, rule: String) -> String {
        secret.hasPrefix("[redacted:") ? secret : placeholder(secret, rule: rule)
    }

    /// Whether `value` holds a placeholder a redactor wrote (`[redacted:rule:hex]`, or a
    /// message's `[redacted]`) in any string, key or value: then it is not what was said, only
    /// what the log keeps of it.
    public static func holdsPlaceholder(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): return text.contains("[redacted:") || text.contains("[redacted]")
        case .array(let elements): return elements.contains(where: holdsPlaceholder)
        case .object(let object):
            return object.members.contains { holdsPlaceholder(.string($0.key)) || holdsPlaceholder($0.value) }
        default: return false
        }
    }

    /// The placeholder for `secret` found by `rule`.
    func placeholder(_ secret: String, rule: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Array(secret.utf8), using: SymmetricKey(data: key))
        return "[redacted:\(rule):\(Data(code).prefix(4).map { String(format: "%02x", $0) }.joined())]"
    }

    /// The always-on patterns, each with the literals one of which a match must contain (a
    /// cheap test that spares the matcher almost every line). A match counts only where a token
    /// can start — not right after a letter or digit, so `task-description-…` is not an `sk-`
    /// key — and an escape in an encoded line (`\n`) counts as the separator it stands for.
    ///
    /// A pattern with `keepsThrough` replaces only what follows the first of those characters in
    /// the match (`password=` is kept, the value after it replaced), so the log still says which
    /// setting held a secret. A pattern that `startsLine` counts only at the start of a line.
    struct Pattern: Sendable {
        var rule: String
        var literals: [String]
        var regex: LinearRegex
        var keepsThrough: Set<Character>
        var startsLine: Bool
        /// `literals` as the byte search takes them (`holdsAny(of:in:)`).
        let literalNeedles: [NeedleGroup]

        init(rule: String, literals: [String], regex: LinearRegex, keepsThrough: Set<Character> = [], startsLine: Bool = false) {
            self.rule = rule
            self.literals = literals
            self.regex = regex
            self.keepsThrough = keepsThrough
            self.startsLine = startsLine
            literalNeedles = Redactor.grouped(literals.map { Array($0.utf8) })
        }
    }

    static let patterns: [Pattern] =
        [
            // OpenAI (`sk-`, `sk-proj-`) and Anthropic (`sk-ant-`) API keys.
            ("api-key", ["sk-"], #"sk-[A-Za-z0-9_\-]{16,}"#),
            // Stripe secret and restricted keys (`sk_live_`, `rk_test_`, …) and webhook signing secrets.
            ("stripe-key", ["k_live_", "k_test_"], "[rs]k_(live|test)_[A-Za-z0-9]{16,}"),
            ("stripe-key", ["whsec_"], "whsec_[A-Za-z0-9+/=]{24,}"),
            // Google API keys: `AIza` and 35 more characters.
            ("google-api-key", ["AIza"], #"AIza[A-Za-z0-9_\-]{35}"#),
            // JSON Web Tokens: three base64url parts, the first a JSON header (`{"` is `eyJ`).
            ("jwt", ["eyJ"], #"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]{16,}"#),
            ("aws-key-id", ["AKIA", "ASIA"], "(AKIA|ASIA)[0-9A-Z]{16}"),
            (
                "github-token", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
                "gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
            ),
            ("gitlab-token", ["glpat-"], #"glpat-[A-Za-z0-9_\-]{20,}"#),
            ("slack-token", ["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"], #"xox[abprs]-[A-Za-z0-9\-]{10,}"#),
            ("bearer-token", ["Bearer "], #"Bearer [A-Za-z0-9._~+/\-]{12,}=*"#),
            // An HTTP authorization header written as text (a tool's output, a curl command, a
            // header dump), whatever the case of its scheme: `authorization: bearer …`, `Basic …`.
            (
                "authorization", ["uthorization:", "UTHORIZATION:"],
                #"[Aa](uthorization|UTHORIZATION): *([Bb]earer|BEARER|[Bb]asic|BASIC|[Tt]oken|TOKEN) [A-Za-z0-9._~+/\-]{8,}=*"#
            ),
            ("private-key", ["-----BEGIN"], #"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\\ ]*-----END [A-Z ]*PRIVATE KEY-----"#),
        ].compactMap { rule, literals, pattern in (try? LinearRegex(pattern)).map { Pattern(rule: rule, literals: literals, regex: $0) } }
        + Self.settingPatterns

    /// A secret given as `NAME=VALUE` in text — a connection string's `Password=…;`, a query's
    /// `api_key=…&`, an environment dump's `AWS_SECRET_ACCESS_KEY=…` — the name kept, the value
    /// (four characters or more, up to a space, quote, `;`, `&`, `,` or an escape) replaced.
    ///
    /// And a line that sets one — a config file's `password = …` (TOML's `password = "…"`), a
    /// YAML file's `password: …` (or `'…'`), a header dump's `x-api-key: …` — with white space
    /// around the `=` or after the `:` and the value maybe quoted: only at the start of a line
    /// (after its indentation), and only for names that hold nothing but a credential (not
    /// `token` or `secret`, which code and text say of other things: `token = tokens[i]`), so that
    /// prose (`Wrong password: please try again`) and code (`func f(password: String)`) keep
    /// their words.
    static let settingPatterns: [Pattern] = {
        let names = [
            "password", "passwd", "api_key", "apikey", "secret_access_key", "client_secret", "access_token", "refresh_token",
            "auth_token", "secret_key", "private_key", "token", "secret",
        ]
        // Each name as written in lower case, capitalized and in upper case (`Password=`,
        // `API_KEY=`; camel case, `apiKey`, is a member name, redacted as such), and an ODBC
        // string's `Pwd=` (not `PWD=`, the shell's working directory in an environment dump).
        func spelled(_ names: [String]) -> [String] {
            names.flatMap { name in [name, name.prefix(1).uppercased() + name.dropFirst(), name.uppercased()] }
        }
        let spellings = spelled(names) + ["pwd", "Pwd"]
        // Names a line sets: those that can only hold a credential, and the API-key headers
        // (`x-api-key: …`, `X-Api-Key: …`, `api-key: …`).
        let lineSpellings =
            spelled(names.filter { $0 != "token" && $0 != "secret" })
            + ["api-key", "Api-Key", "API-Key", "API-KEY", "x-api-key", "X-Api-Key", "X-API-Key", "X-API-KEY"]
        // The value: up to a space, a quote, a separator of settings or of a query, a bracket
        // (`connect(password=self.password)` keeps its parenthesis) or an escape.
        let value = #"[^\s;&"'\\,<>()\[\]{}][^\s;&"'\\,<>()\[\]{}]{3,}"#
        // An environment variable whose name ends in a secret word, in upper case:
        // `PGPASSWORD=`, `GITHUB_TOKEN=`, `AWS_SESSION_TOKEN=`, `MYSQL_PWD=`.
        let variables = "[A-Z][A-Z0-9_]*(PASSWORD|PASSWD|TOKEN|SECRET|_PWD|_KEY|APIKEY)"
        // White space in a line: spaces and tabs, and a tab escaped in an encoded line (`\t`).
        let space = "([ \t]|\\\\t)*"
        return [
            (try? LinearRegex("(\(spellings.joined(separator: "|")))=" + value)).map {
                Pattern(rule: "setting", literals: spellings.map { $0 + "=" }, regex: $0, keepsThrough: ["="])
            },
            // White space around `=` or after `:` (`space`), and the value maybe quoted, the quote
            // written as it stands in text or escaped in an encoded line (`\"`).
            (try? LinearRegex("(\(lineSpellings.joined(separator: "|")))\(space)[=:]\(space)(\\\\?[\"'])?" + value)).map {
                // The name and what may follow it: white space (an escaped tab's backslash), `=` or `:`.
                Pattern(
                    rule: "setting", literals: lineSpellings.flatMap { name in ["=", ":", " ", "\t", "\\"].map { name + $0 } }, regex: $0,
                    keepsThrough: ["=", ":"], startsLine: true)
            },
            (try? LinearRegex(variables + "=" + value)).map {
                Pattern(
                    rule: "setting", literals: ["PASSWORD=", "PASSWD=", "TOKEN=", "SECRET=", "_PWD=", "_KEY=", "APIKEY="], regex: $0,
                    keepsThrough: ["="])
            },
        ].compactMap { $0 }
    }()

    /// Plain text (not an encoded event) with every secret value and key pattern replaced: for
    /// what is shown as it happens, such as a model's streamed text. A secret split across two
    /// pieces of text is not seen; the log, written from whole events, still redacts it.
    public func redactText(_ text: String) -> String {
        var result = text
        for (rule, secret) in values where !secret.isEmpty && Self.holds(secret, in: result) {
            result = result.replacingOccurrences(of: secret, with: placeholder(secret, rule: rule))
        }
        if let unwrapped = redactingWrappedForms(in: result) { result = unwrapped }
        replacePatterns(in: &result)
        return Self.redactingURLPasswords(in: result) { placeholder($0, rule: "url-password") }
    }

    /// Replaces what the always-on patterns find in `text`, where a token can start.
    private func replacePatterns(in text: inout String) {
        for pattern in Self.patterns where Self.holdsAny(of: pattern.literalNeedles, in: text) {
            let (rule, regex, keepsThrough) = (pattern.rule, pattern.regex, pattern.keepsThrough)
            let scalars = text.unicodeScalars
            var result = String.UnicodeScalarView()
            var rest = scalars[...]
            while true {
                let piece = String(Substring(rest))
                guard let range = regex.firstRange(in: piece) else { break }
                // The match's place in `rest`, counted in Unicode scalars as the matcher counts.
                let start = rest.index(
                    rest.startIndex, offsetBy: piece.unicodeScalars.distance(from: piece.startIndex, to: range.lowerBound))
                let end = rest.index(start, offsetBy: piece.unicodeScalars.distance(from: range.lowerBound, to: range.upperBound))
                result.append(contentsOf: rest[..<start])
                if Self.continuesWord(before: start, in: scalars) || pattern.startsLine && !Self.startsLine(at: start, in: scalars) {
                    // Inside a longer word (or within a line, for a pattern of a line's start):
                    // not a token; look again one character on.
                    result.append(rest[start])
                    rest = rest[rest.index(after: start)...]
                } else {
                    var secretStart = start
                    if let mark = rest[start..<end].firstIndex(where: { keepsThrough.contains(Character($0)) }) {
                        secretStart = rest.index(after: mark)
                        // The white space and the quote after `=` or `:` are kept too: only the
                        // value is the secret.
                        while secretStart < end {
                            let scalar = rest[secretStart]
                            let next = rest.index(after: secretStart)
                            if " \t\"'".unicodeScalars.contains(scalar) {
                                secretStart = next
                            } else if scalar == "\\", next < end, "t\"'\\".unicodeScalars.contains(rest[next]) {
                                // An escaped tab or quote of an encoded line: both its characters.
                                secretStart = rest.index(after: next)
                            } else {
                                break
                            }
                        }
                        result.append(contentsOf: rest[start..<secretStart])
                    }
                    let secret = String(Substring(rest[secretStart..<end]))
                    result.append(contentsOf: (secret.hasPrefix("[redacted:") ? secret : placeholder(secret, rule: rule)).unicodeScalars)
                    rest = rest[end...]
                }
            }
            result.append(contentsOf: rest)
            text = String(result)
        }
    }

    /// Whether `index` starts a line, past its indentation (spaces, tabs, escaped tabs): the
    /// text's start, a line break, a line break escaped in an encoded line (`\n`, `\\n`: JSON
    /// text kept in a string), or a quote that opens a string (an output that is one line).
    static func startsLine(at index: String.UnicodeScalarView.Index, in scalars: String.UnicodeScalarView) -> Bool {
        var cursor = index
        while cursor > scalars.startIndex {
            let before = scalars.index(before: cursor)
            let scalar = scalars[before]
            if scalar == " " || scalar == "\t" {
                cursor = before
                continue
            }
            if scalar == "\n" || scalar == "\r" || scalar == "\"" { return true }
            // An escaped line break (its letter after a backslash) starts a line; an escaped tab
            // indents it.
            guard scalar == "n" || scalar == "r" || scalar == "t", before > scalars.startIndex else { return false }
            let backslash = scalars.index(before: before)
            guard scalars[backslash] == "\\" else { return false }
            if scalar != "t" { return true }
            cursor = backslash
        }
        return true
    }

    /// Whether the scalar before `index` is an ASCII letter or digit that is not the letter of
    /// an escape (`\n`, `\t`, `\r`, `\b`, `\f`: a line break or tab in an encoded line, at any
    /// depth of escaping — `\\n` is a line break in JSON text kept in a string).
    static func continuesWord(before index: String.UnicodeScalarView.Index, in scalars: String.UnicodeScalarView) -> Bool {
        guard index > scalars.startIndex else { return false }
        let cursor = scalars.index(before: index)
        let previous = scalars[cursor]
        guard previous.isASCII, CharacterSet.alphanumerics.contains(previous) else { return false }
        // After a backslash the letter is an escape's: one backslash in an event's own text, two
        // (or four) in JSON text kept in a string, such as a stored model request. A literal
        // backslash before the letter reads the same: then a token after it is redacted too.
        guard cursor > scalars.startIndex else { return true }
        return !(scalars[scalars.index(before: cursor)] == "\\" && "ntrbf".unicodeScalars.contains(previous))
    }

    /// A stored content's bytes with every secret replaced as the writer replaces them in a line
    /// (values, member names, key patterns): each stretch of valid UTF-8 is redacted as text, and
    /// any other byte is kept as it is; nil when nothing was found. The writer redacts content
    /// this way before the content is hashed and encoded: bytes that are not UTF-8 are written as
    /// base64, which hid every secret in them from the line's redaction, and a hash of the bytes
    /// before redaction let anyone confirm a guess of the secret they held.
    public func redactContent(_ bytes: [UInt8]) -> [UInt8]? {
        guard mayRedact(bytes) else { return nil }
        return redactingContent(bytes)
    }

    /// `redactContent` of a content's text, when it may hold a secret: the text is searched in
    /// place, and copied only when it may (a stored request of megabytes, most often clean).
    public func redactContent(text: String) -> [UInt8]? {
        var text = text
        guard text.withUTF8({ mayRedact(in: UnsafeRawBufferPointer($0)) }) else { return nil }
        return redactingContent(Array(text.utf8))
    }

    /// `bytes` with every secret replaced, each stretch of valid UTF-8 redacted as text; nil when
    /// nothing was replaced.
    private func redactingContent(_ bytes: [UInt8]) -> [UInt8]? {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var isChanged = false
        var index = 0
        while index < bytes.count {
            let end = Self.validUTF8End(bytes, from: index)
            guard end > index else {
                result.append(bytes[index])
                index += 1
                continue
            }
            let text = String(decoding: bytes[index..<end], as: UTF8.self)
            if let redacted = redact(text) {
                result.append(contentsOf: redacted.utf8)
                isChanged = true
            } else {
                result.append(contentsOf: bytes[index..<end])
            }
            index = end
        }
        return isChanged ? result : nil
    }

    /// Where the stretch of valid UTF-8 that starts at `start` ends (`start` when the byte there
    /// begins no valid sequence): RFC 3629's table, no overlong forms, no surrogates.
    static func validUTF8End(_ bytes: [UInt8], from start: Int) -> Int {
        var index = start
        while index < bytes.count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            let second: ClosedRange<UInt8>
            switch lead {
            case 0xC2...0xDF: (length, second) = (2, 0x80...0xBF)
            case 0xE0: (length, second) = (3, 0xA0...0xBF)
            case 0xED: (length, second) = (3, 0x80...0x9F)
            case 0xE1...0xEF: (length, second) = (3, 0x80...0xBF)
            case 0xF0: (length, second) = (4, 0x90...0xBF)
            case 0xF1...0xF3: (length, second) = (4, 0x80...0xBF)
            case 0xF4: (length, second) = (4, 0x80...0x8F)
            default: return index
            }
            guard index + length <= bytes.count, second.contains(bytes[index + 1]),
                (2..<length).allSatisfy({ (0x80...0xBF).contains(bytes[index + $0]) })
            else { return index }
            index += length
        }
        return index
    }

    /// Encoded JSON (an event's line, a file beside the log) with every secret replaced, as the
    /// log writer replaces them.
    public func redactEncoded(_ text: String) -> String { redact(text) ?? text }

    /// `line` (one encoded event) with every secret replaced, or nil when it holds none.
    ///
    /// JSON another program wrote (a server's raw line, a stored request) may spell a character
    /// with an escape it does not need — `\u0073k-proj-…` is `sk-proj-…` to every reader, and
    /// `\/` is `/` — at any depth of JSON text kept in a string. A line that holds such escapes
    /// is read again with them undone (`undoingNeedlessEscapes`, the same value at every depth);
    /// when that finds a secret, that form is written, else the line keeps its bytes.
    func redact(_ line: String) -> String? {
        let redacted = redactWritten(line)
        guard let plain = Self.undoingNeedlessEscapes(in: redacted ?? line), let found = redactWritten(plain) else { return redacted }
        return found
    }

    /// What every `\u00XX` escape of a printable ASCII character other than `"` and `\`, and
    /// every `\/`, looks like in a line, at any depth: the writer's fast test looks for them.
    /// (`\u0020` to `\u007e`: a control character's escape, `\u001b`, is no mark.)
    static let needlessEscapeMarks = (2...7).map { Array(#"\u00\#($0)"#.utf8) } + [Array(#"\/"#.utf8)]

    /// `line` with every escape of a character that needs none at any depth (printable ASCII
    /// other than `"` and `\`, written `\u00XX` or `\/`) replaced by the character, at the depth
    /// it belongs to; nil when there is none. A run of `r` backslashes before the escape's letter
    /// is `r − 2^t` escaped backslashes of the depth `t` (the trailing zero bits of `r`) and the
    /// escape's own `2^t`: the run keeps the first part and the character replaces the rest, so
    /// the text at every depth holds the same value.
    static func undoingNeedlessEscapes(in line: String) -> String? {
        let bytes = Array(line.utf8)
        let backslash = UInt8(ascii: "\\")
        func hexValue(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var result: [UInt8] = []
        var copied = 0
        var index = 0
        while index < bytes.count {
            guard bytes[index] == backslash else {
                index += 1
                continue
            }
            let runStart = index
            while index < bytes.count, bytes[index] == backslash { index += 1 }
            let run = index - runStart
            guard index < bytes.count else { break }
            var character: UInt8?
            var escapeEnd = index + 1
            if bytes[index] == UInt8(ascii: "/") {
                character = UInt8(ascii: "/")
            } else if bytes[index] == UInt8(ascii: "u"), index + 4 < bytes.count, bytes[index + 1] == UInt8(ascii: "0"),
                bytes[index + 2] == UInt8(ascii: "0"),
                let high = hexValue(bytes[index + 3]), let low = hexValue(bytes[index + 4])
            {
                let value = high << 4 | low
                if (0x20...0x7E).contains(value), value != UInt8(ascii: "\""), value != backslash {
                    character = value
                    escapeEnd = index + 5
                }
            }
            guard let character else { continue }
            let kept = run - (1 << run.trailingZeroBitCount)
            result += bytes[copied..<runStart + kept]
            result.append(character)
            copied = escapeEnd
            index = escapeEnd
        }
        guard copied > 0 else { return nil }
        result += bytes[copied...]
        return String(decoding: result, as: UTF8.self)
    }

    /// `line` with every secret it spells out replaced, or nil when it holds none.
    private func redactWritten(_ line: String) -> String? {
        var text = line
        for (rule, secret) in values {
            // In the line the secret stands JSON-escaped, inside a string.
            let escaped = String(JSONWriter.encodeString(.string(secret)).dropFirst().dropLast())
            if Self.holds(escaped, in: text) { text = text.replacingOccurrences(of: escaped, with: placeholder(secret, rule: rule)) }
        }
        if let unwrapped = redactingWrappedForms(in: text) { text = unwrapped }
        for name in memberNames where !Self.isPlainName(name) || Self.holds(name, in: text) {
            text = redactMember(name, in: text)
        }
        replacePatterns(in: &text)
        text = Self.redactingURLPasswords(in: text) { placeholder($0, rule: "url-password") }
        return text == line ? nil : text
    }

    /// Whether a member name is written the same at every depth of escaping (no quote,
    /// backslash or control character): such a name is found at any depth.
    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The string values of members called `name`, wherever they stand: `"name":"value"` in the
    /// event, and the same inside JSON text kept in a string, at any depth — a model's raw reply
    /// (`\"name\":\"value\"`), the JSON text of a tool call's arguments inside it
    /// (`\\\"name\\\":\\\"value\\\"`) — with or without white space around the colon (text
    /// another program wrote: `{"password": "…"}`). Each value becomes the placeholder, which
    /// holds no quote or backslash and so reads the same at every depth.
    private func redactMember(_ name: String, in text: String) -> String {
        guard Self.isPlainName(name) else {
            return redactValues(after: JSONWriter.encodeString(.string(name)) + ":\"", endingAt: "\"", in: text, name: name)
        }
        let bytes = Array(text.utf8)
        let target = Array(name.utf8)
        let backslash = UInt8(ascii: "\\")
        let quote = UInt8(ascii: "\"")
        /// Whether `count` backslashes and a quote stand at `index`.
        func quoted(at index: Int, after count: Int) -> Bool {
            guard index + count < bytes.count, bytes[index + count] == quote else { return false }
            return (index..<index + count).allSatisfy { bytes[$0] == backslash }
        }
        /// Past white space at depth `depth`: spaces, and a line break or tab escaped for that depth.
        func skipSpace(_ index: inout Int, depth: Int) {
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: " ") {
                    index += 1
                    continue
                }
                let run = depth == 0 ? 0 : 1 << (depth - 1)
                guard run > 0, index + run < bytes.count, (index..<index + run).allSatisfy({ bytes[$0] == backslash }),
                    [UInt8(ascii: "n"), UInt8(ascii: "t"), UInt8(ascii: "r")].contains(bytes[index + run])
                else { return }
                index += run + 1
            }
        }
        var result: [UInt8] = []
        var copied = 0
        var search = 0
        while search + target.count <= bytes.count {
            guard let found = Self.firstIndex(of: target, in: bytes, from: search) else { break }
            search = found + 1
            // The quote before the name, after a run of 2^depth − 1 backslashes (and nothing that
            // escapes the run).
            guard found > 0, bytes[found - 1] == quote else { continue }
            var run = 0
            while found - 2 - run >= 0, bytes[found - 2 - run] == backslash { run += 1 }
            guard (run + 1) & run == 0, run < 64 else { continue }
            let depth = (run + 1).trailingZeroBitCount
            var index = found + target.count
            guard quoted(at: index, after: run) else { continue }
            index += run + 1
            skipSpace(&index, depth: depth)
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { continue }
            index += 1
            skipSpace(&index, depth: depth)
            guard quoted(at: index, after: run) else { continue }
            let start = index + run + 1
            // The value ends at a quote whose run of backslashes, modulo 2^(depth+1), is the
            // depth's own 2^depth − 1: longer runs are the value's escaped quotes and backslashes.
            var end = start
            var closing: Int?
            while end < bytes.count {
                if bytes[end] == quote {
                    var before = 0
                    while end - 1 - before >= start, bytes[end - 1 - before] == backslash { before += 1 }
                    if before % (2 << depth) == run {
                        closing = end - run
                        break
                    }
                }
                end += 1
            }
            guard let closing else { break }
            let value = String(decoding: bytes[start..<closing], as: UTF8.self)
            result += bytes[copied..<start]
            result += Array((value.hasPrefix("[redacted:") ? value : placeholder(value, rule: "member:\(name)")).utf8)
            copied = closing
            search = closing
        }
        guard copied > 0 else { return text }
        result += bytes[copied...]
        return String(decoding: result, as: UTF8.self)
    }

    /// The first place at or after `from` where `needle` stands in `bytes`.
    private static func firstIndex(of needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard let first = needle.first, needle.count <= bytes.count else { return nil }
        var index = from
        while index + needle.count <= bytes.count {
            if bytes[index] == first, bytes[index..<index + needle.count].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    /// Replaces what follows each `marker` up to the first unescaped `end`.
    private func redactValues(after marker: String, endingAt end: String, in text: String, name: String) -> String {
        guard Self.holds(marker, in: text) else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: marker) {
            result += rest[..<start.upperBound]
            rest = rest[start.upperBound...]
            var cursor = rest.startIndex
            while cursor < rest.endIndex, !rest[cursor...].hasPrefix(end) {
                // A backslash escapes what follows (in the plain form), so `\"` does not end it.
                if end == "\"", rest[cursor] == "\\" { cursor = rest.index(after: cursor) }
                if cursor < rest.endIndex { cursor = rest.index(after: cursor) }
            }
            let value = String(rest[..<cursor])
            result += value.hasPrefix("[redacted:") ? value : placeholder(value, rule: "member:\(name)")
            rest = rest[cursor...]
        }
        return result + rest
    }
}
