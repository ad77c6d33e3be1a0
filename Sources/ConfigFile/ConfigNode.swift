import Foundation
public import TraceCore
import TraceLog
import Yams

/// A node of a YAML (or JSON) config file, with the place it was written.
///
/// Config readers walk these nodes by hand instead of decoding through `Codable`, so that every
/// error points at the line and column of the value that is wrong.
public struct ConfigNode: Sendable, Hashable {
    /// What a node holds. Mappings keep their keys in file order.
    public enum Content: Sendable, Hashable {
        /// A scalar; `isPlain` is false when it was quoted or a block scalar, so it is a string
        /// whatever it looks like.
        case scalar(String, isPlain: Bool)
        case mapping([Pair])
        case sequence([ConfigNode])
    }

    /// One key and its value.
    public struct Pair: Sendable, Hashable {
        public var key: String
        public var keyLocation: SourceLocation
        public var value: ConfigNode
    }

    public var content: Content
    public var location: SourceLocation

    public init(content: Content, location: SourceLocation) {
        self.content = content
        self.location = location
    }

    /// Parses `text` (the contents of `path`) as a single YAML document. JSON is YAML, so JSON
    /// files read the same way. An empty document is an empty mapping.
    public static func parse(_ text: String, path: String) throws(ConfigError) -> ConfigNode {
        // Anchors are refused (below), but only once Yams has built the tree, and Yams hashes a
        // mapping's keys as it builds it, recursively: a key that is an alias of a chain of
        // 200,000 anchored lists, each holding the one before, overflows the stack first. So
        // many anchors are refused before Yams reads the text; a deep chain needs one per level.
        if let line = Self.anchorPastLimit(in: text) {
            throw ConfigError(
                .invalidValue,
                "the file holds more than \(Self.maximumAnchors) YAML anchors (&name); anchors and aliases are not supported here",
                at: SourceLocation(path: path, line: line, column: 1), hint: "write the values out")
        }
        let root: Node?
        let parser: Parser
        do {
            // No tag resolution: values are read as the text written (`ConfigNode.Content`), and
            // Yams's default resolver compiles seven regular expressions on first use, the
            // largest part of reading a small case file.
            parser = try Parser(yaml: text, resolver: .basic)
            root = try parser.singleRoot()
        } catch let error as YamlError {
            throw syntaxError(error, path: path, text: text)
        } catch {
            throw ConfigError(.syntax, "the file is not valid YAML: \(error)", at: SourceLocation(path: path))
        }
        guard let root else {
            return ConfigNode(content: .mapping([]), location: SourceLocation(path: path, line: 1, column: 1))
        }
        // Nodes hold their anchors weakly and the parser holds them: it must live while the
        // tree is converted, or an aliased node would no longer say it is one.
        return try withExtendedLifetime(parser) { () throws(ConfigError) in try ConfigNode(root, path: path, depth: 0) }
    }

    /// Reads and parses the file at `path`.
    public static func load(path: String) throws(ConfigError) -> ConfigNode {
        try loadWithBytes(path: path).node
    }

    /// `load`, for readers that report every error of a file (`ConfigErrors`): a file that
    /// cannot be read or parsed is their one error.
    public static func loadReportingAll(path: String) throws(ConfigErrors) -> ConfigNode {
        do {
            return try load(path: path)
        } catch {
            throw ConfigErrors([error])
        }
    }

    /// Reads and parses the file at `path`, and gives its bytes too (for a digest of the file
    /// that is exactly the text parsed).
    public static func loadWithBytes(path: String) throws(ConfigError) -> (node: ConfigNode, bytes: [UInt8]) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw ConfigError(
                .unreadable, "cannot read \(path): \(FileProblem.reading(path) ?? Self.reason(error))", at: SourceLocation(path: path),
                hint: "check the path: on the command line it is relative to the current directory, in a file to that file's folder")
        }
        guard data.count <= maximumFileBytes else {
            throw ConfigError(
                .invalidValue, "the file is \(data.count) bytes; config files are limited to \(maximumFileBytes) bytes",
                at: SourceLocation(path: path))
        }
        let bytes = Array(data)
        // A byte-order mark is no part of the text (as Foundation's UTF-8 decoding leaves it out).
        let hasMark = bytes.starts(with: [0xEF, 0xBB, 0xBF])
        guard let text = String(validating: hasMark ? bytes.dropFirst(3) : bytes[...], as: UTF8.self) else {
            let offset = min(Self.firstInvalidUTF8(bytes), bytes.count - 1)
            throw ConfigError(
                .syntax,
                "the file is not UTF-8 text: byte \(offset) (0x\(String(bytes[offset], radix: 16, uppercase: true))) begins no UTF-8 character",
                at: SourceLocation(path: path, byteOffset: offset, in: bytes),
                hint: "save the file as UTF-8 (an editor's encoding setting, or iconv -f latin1 -t utf-8)")
        }
        return (try parse(text, path: path), bytes)
    }

    /// The offset of the first byte of `bytes` that is not part of a well-formed UTF-8 character
    /// (`bytes.count` when there is none).
    static func firstInvalidUTF8(_ bytes: [UInt8]) -> Int {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded): offset += encoded.count
            case .emptyInput, .error: return min(offset, bytes.count)
            }
        }
    }

    private static func reason(_ error: any Error) -> String {
        let nsError = error as NSError
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if nsError.domain == NSCocoaErrorDomain, nsError.code == NSFileReadNoSuchFileError {
            return "no such file"
        }
        return nsError.localizedDescription
    }

    /// The limits on what a config file may hold, so that reading one is bounded work.
    public static let maximumFileBytes = 16 << 20
    public static let maximumDepth = 128
    /// The most `&name` tokens the text may hold before it is parsed (`parse`).
    public static let maximumAnchors = 256

    /// The line of the text's `&name` token past `maximumAnchors`, or nil: a `&` at the start of
    /// a token (after white space, a line's start, `[`, `{` or `,`) followed by a name's first
    /// character. Text in quotes or block scalars may count too: more than the limit there is
    /// prose no config file holds.
    static func anchorPastLimit(in text: String) -> Int? {
        var count = 0
        var line = 1
        var previous: UInt8 = 0x0A
        var isAmpersand = false
        for byte in text.utf8 {
            if isAmpersand {
                isAmpersand = false
                let startsName =
                    byte > 0x20 && byte != UInt8(ascii: ",") && byte != UInt8(ascii: "[") && byte != UInt8(ascii: "]")
                    && byte != UInt8(ascii: "{") && byte != UInt8(ascii: "}")
                if startsName {
                    count += 1
                    if count > maximumAnchors { return line }
                }
            }
            if byte == UInt8(ascii: "&") {
                switch previous {
                case 0x20, 0x09, 0x0A, 0x0D, UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ","): isAmpersand = true
                default: break
                }
            }
            if byte == 0x0A { line += 1 }
            previous = byte
        }
        return nil
    }

    private init(_ node: Node, path: String, depth: Int) throws(ConfigError) {
        let location = SourceLocation(path: path, line: node.mark?.line ?? 0, column: node.mark?.column ?? 0)
        guard depth <= Self.maximumDepth else {
            throw ConfigError(.invalidValue, "the file nests deeper than \(Self.maximumDepth) levels", at: location)
        }
        // Anchors and aliases are refused before anything is built: an alias shares the node
        // it names, and expanding a few nested aliases would build billions of nodes.
        if node.anchor != nil {
            throw ConfigError(
                .invalidValue, "YAML anchors and aliases (&name, *name) are not supported here; write the value out", at: location)
        }
        switch node {
        case .scalar(let scalar):
            self.init(content: .scalar(scalar.string, isPlain: scalar.style == .plain || scalar.style == .any), location: location)
        case .sequence(let sequence):
            var items: [ConfigNode] = []
            for item in sequence { items.append(try ConfigNode(item, path: path, depth: depth + 1)) }
            self.init(content: .sequence(items), location: location)
        case .mapping(let mapping):
            var pairs: [Pair] = []
            var seen: [String: SourceLocation] = [:]
            for (keyNode, valueNode) in mapping {
                let key = try ConfigNode(keyNode, path: path, depth: depth + 1)
                guard case .scalar(let name, _) = key.content else {
                    throw ConfigError(.invalidValue, "a mapping key must be a plain name, not a \(key.kindName)", at: key.location)
                }
                if let first = seen[name] {
                    throw ConfigError(
                        .duplicateKey, "the key \"\(name)\" appears twice in this mapping (first at line \(first.line))",
                        at: key.location, hint: "remove one of them")
                }
                seen[name] = key.location
                pairs.append(Pair(key: name, keyLocation: key.location, value: try ConfigNode(valueNode, path: path, depth: depth + 1)))
            }
            self.init(content: .mapping(pairs), location: location)
        case .alias:
            throw ConfigError(.invalidValue, "YAML aliases are not supported here; write the value out", at: location)
        }
    }

    private static func syntaxError(_ error: YamlError, path: String, text: String) -> ConfigError {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return ConfigError(
                .syntax, "the file is not valid YAML: \(problem)", at: SourceLocation(path: path, line: mark.line, column: mark.column))
        case .duplicatedKeysInMapping(let duplicates, let context):
            let key = duplicates.first ?? ""
            if let (first, second) = repeatedKey(key, in: text, from: context.mark.line) {
                return ConfigError(
                    .duplicateKey, "the key \"\(key)\" appears twice in this mapping (first at line \(first.line))",
                    at: SourceLocation(path: path, line: second.line, column: second.column), hint: "remove one of them")
            }
            return ConfigError(
                .duplicateKey, "the key \"\(duplicates.joined(separator: "\", \""))\" appears twice in one mapping",
                at: SourceLocation(path: path, line: context.mark.line, column: context.mark.column), hint: "remove one of them")
        case .reader(let problem, _, _, _):
            return ConfigError(.syntax, "the file cannot be read as YAML: \(problem)", at: SourceLocation(path: path))
        default:
            return ConfigError(.syntax, "the file is not valid YAML: \(error)", at: SourceLocation(path: path))
        }
    }

    /// Where `key` is written twice at the same indentation, from line `start` on (Yams names
    /// only the mapping; people need the line of the repeat).
    private static func repeatedKey(_ key: String, in text: String, from start: Int) -> (
        first: (line: Int, column: Int), second: (line: Int, column: Int)
    )? {
        var seen: [Int: Int] = [:]
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() where index + 1 >= start {
            var rest = Substring(line)
            var column = 1
            while let first = rest.first, first == " " || first == "-" {
                rest = rest.dropFirst()
                column += 1
            }
            guard rest.hasPrefix(key), rest.dropFirst(key.count).drop(while: { $0 == " " }).first == ":" else { continue }
            if let firstLine = seen[column] { return ((firstLine, column), (index + 1, column)) }
            seen[column] = index + 1
        }
        return nil
    }

    /// "a mapping", "a list", "a string", "a number"… for messages.
    public var kindName: String {
        switch content {
        case .mapping: return "mapping"
        case .sequence: return "list"
        case .scalar(let text, let isPlain):
            guard isPlain else { return "string" }
            switch Self.resolvePlain(text) {
            case .null: return "null"
            case .bool: return "boolean"
            case .int, .double: return "number"
            default: return "string"
            }
        }
    }

    /// A plain scalar as YAML 1.2's core schema resolves it.
    static func resolvePlain(_ text: String) -> JSONValue {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        default: break
        }
        if let value = Int(text) { return .int(value) }
        if text.first.map({ $0.isNumber || $0 == "-" || $0 == "+" || $0 == "." }) == true, let value = Double(text),
            value.isFinite
        {
            return .double(value)
        }
        return .string(text)
    }

    /// The node as a JSON value: plain scalars resolve to null, booleans and numbers; quoted
    /// scalars stay strings.
    public var json: JSONValue {
        switch content {
        case .scalar(let text, let isPlain): return isPlain ? Self.resolvePlain(text) : .string(text)
        case .sequence(let items): return .array(items.map(\.json))
        case .mapping(let pairs):
            var object = JSONObject()
            for pair in pairs { object[pair.key] = pair.value.json }
            return .object(object)
        }
    }
}
