/// A regular expression that matches in time linear in the text: the patterns in case files,
/// input schemas and policy rules come from files other people write, and a backtracking
/// matcher can take hours on 30 characters (`^(a+)+$`).
///
/// It compiles the pattern to a Thompson NFA and runs all its states in step over the text's
/// Unicode scalars: at most `instructions × scalars` steps, whatever the pattern. It supports
/// what such patterns use — literals, `.`, classes (`[a-z]`, `[^…]`, `\d \w \s` and their
/// negations), groups (`(…)`, `(?:…)`, `(?<name>…)`), alternation, `* + ? {n} {n,} {n,m}` (a
/// trailing `?` is accepted: laziness does not change whether a text matches), and the anchors
/// `^ $ \A \z \b \B` — and rejects with a clear error what needs backtracking (back-references,
/// lookaround) or would make the program large (more than 10,000 instructions).
///
/// `matches(_:)` searches: it is true when the pattern matches anywhere in the text, as JSON
/// Schema's `pattern` does; anchor with `^…$` to match the whole text.
public struct LinearRegex: Sendable, Hashable, CustomStringConvertible {
    public let pattern: String
    private let program: [Instruction]
    /// The program begins with `^` (or `\A`): an attempt can start only at the text's start.
    private let isAnchored: Bool
    /// The scalars an anchored program reads first, one after another with no choice among
    /// them (`^X-` in `^X-[0-9]+$`): a text that does not begin with them cannot match, which
    /// is found without running the program.
    private let anchoredPrefix: [Unicode.Scalar]

    /// The largest program a pattern may compile to.
    public static let maximumInstructions = 10_000
    /// The deepest groups may nest: the parser and the compiler recurse once per level, and a
    /// pattern comes from outside (an MCP server's tool schema), so its nesting is bounded
    /// before it can exhaust a thread's stack.
    public static let maximumNesting = 100

    /// Why a pattern is refused, and where in it (1-based position in Unicode scalars).
    public struct SyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var position: Int

        public var description: String { "\(message) (at position \(position) of the pattern)" }
    }

    public init(_ pattern: String) throws(SyntaxError) {
        self.pattern = pattern
        var parser = Parser(scalars: Array(pattern.unicodeScalars))
        let tree = try parser.parseAll()
        var compiler = Compiler()
        try compiler.emit(tree)
        compiler.program.append(.match)
        program = compiler.program
        isAnchored = program.first == .start
        var prefix: [Unicode.Scalar] = []
        if isAnchored {
            for instruction in program.dropFirst() {
                guard case .scalar(let scalar) = instruction else { break }
                prefix.append(scalar)
            }
        }
        anchoredPrefix = prefix
    }

    public var description: String { pattern }

    /// Whether the pattern matches anywhere in `text`.
    public func matches(_ text: String) -> Bool {
        if !anchoredPrefix.isEmpty {
            var rest = text.unicodeScalars.makeIterator()
            for expected in anchoredPrefix where rest.next() != expected { return false }
        }
        let scalars = Array(text.unicodeScalars)
        var current = StateSet(capacity: program.count)
        var next = StateSet(capacity: program.count)
        var stack: [Int] = []
        for position in 0...scalars.count {
            // Unanchored search: a new attempt starts at every position — unless the pattern is
            // anchored at the start, whose one attempt ends when its last thread does.
            if position == 0 || !isAnchored {
                if add(0, at: position, in: scalars, to: &current, stack: &stack) { return true }
            } else if current.members.isEmpty {
                return false
            }
            guard position < scalars.count else { break }
            let scalar = scalars[position]
            next.clear()
            for pc in current.members {
                let advances: Bool
                switch program[pc] {
                case .scalar(let expected): advances = scalar == expected
                case .any: advances = true
                case .set(let set): advances = set.contains(scalar)
                default: advances = false
                }
                if advances, add(pc + 1, at: position + 1, in: scalars, to: &next, stack: &stack) { return true }
            }
            swap(&current, &next)
        }
        return false
    }

    /// The leftmost-longest match in `text`, or nil: the same linear-time simulation, with each
    /// thread remembering where it started.
    public func firstRange(in text: String) -> Range<String.Index>? {
        let indices = Array(text.unicodeScalars.indices) + [text.unicodeScalars.endIndex]
        let scalars = Array(text.unicodeScalars)
        var current: [(pc: Int, start: Int)] = []
        var best: (start: Int, end: Int)?
        for position in 0...scalars.count {
            // Threads that started later than a match found lose to it (leftmost wins).
            if best == nil { current.append((0, position)) }
            // Follow the moves that consume nothing; a thread per program counter, the earliest start kept.
            var seen = [Int: Int]()
            var stack = current.reversed().map { $0 }
            var ready: [(pc: Int, start: Int)] = []
            while let (pc, start) = stack.popLast() {
                if let known = seen[pc], known <= start { continue }
                seen[pc] = start
                switch program[pc] {
                case .match:
                    if let found = best, start > found.start || (start == found.start && position <= found.end) {
                    } else {
                        best = (start, position)
                    }
                case .jump(let target): stack.append((target, start))
                case .split(let first, let second):
                    stack.append((second, start))
                    stack.append((first, start))
                case .start: if position == 0 { stack.append((pc + 1, start)) }
                case .end: if position == scalars.count { stack.append((pc + 1, start)) }
                case .wordBoundary(let isBoundary):
                    let before = position > 0 && CharacterSet.word.contains(scalars[position - 1])
                    let after = position < scalars.count && CharacterSet.word.contains(scalars[position])
                    if (before != after) == isBoundary { stack.append((pc + 1, start)) }
                case .scalar, .any, .set: ready.append((pc, start))
                }
            }
            guard position < scalars.count else { break }
            let scalar = scalars[position]
            current = ready.compactMap { thread in
                if let best, thread.start > best.start { return nil }
                let advances: Bool
                switch program[thread.pc] {
                case .scalar(let expected): advances = scalar == expected
                case .any: advances = true
                case .set(let set): advances = set.contains(scalar)
                default: advances = false
                }
                return advances ? (thread.pc + 1, thread.start) : nil
            }
            if current.isEmpty, best != nil { break }
        }
        guard let best else { return nil }
        return indices[best.start]..<indices[best.end]
    }

    /// Adds `pc` and everything reachable from it without consuming a scalar; true when that
    /// reaches `match`. `stack` is the caller's, reused from call to call (empty on return).
    private func add(
        _ start: Int, at position: Int, in scalars: [Unicode.Scalar], to set: inout StateSet, stack: inout [Int]
    ) -> Bool {
        stack.removeAll(keepingCapacity: true)
        stack.append(start)
        while let pc = stack.popLast() {
            guard set.insert(pc) else { continue }
            switch program[pc] {
            case .match:
                stack.removeAll(keepingCapacity: true)
                return true
            case .jump(let target): stack.append(target)
            case .split(let first, let second):
                stack.append(second)
                stack.append(first)
            case .start: if position == 0 { stack.append(pc + 1) }
            case .end: if position == scalars.count { stack.append(pc + 1) }
            case .wordBoundary(let isBoundary):
                let before = position > 0 && CharacterSet.word.contains(scalars[position - 1])
                let after = position < scalars.count && CharacterSet.word.contains(scalars[position])
                if (before != after) == isBoundary { stack.append(pc + 1) }
            case .scalar, .any, .set: break
            }
        }
        return false
    }

    // MARK: Program

    enum Instruction: Sendable, Hashable {
        case scalar(Unicode.Scalar)
        case any
        case set(CharacterSet)
        case split(Int, Int)
        case jump(Int)
        case start
        case end
        case wordBoundary(Bool)
        case match
    }

    /// A set of scalars: ranges and named classes, maybe negated.
    struct CharacterSet: Sendable, Hashable {
        var ranges: [ClosedRange<UInt32>] = []
        var classes: [NamedClass] = []
        var isNegated = false

        enum NamedClass: Sendable, Hashable {
            case digit, word, space
            case notDigit, notWord, notSpace
        }

        static let word = CharacterSet(classes: [.word])

        func contains(_ scalar: Unicode.Scalar) -> Bool {
            let value = scalar.value
            let found =
                ranges.contains { $0.contains(value) }
                || classes.contains { named in
                    switch named {
                    case .digit: return (0x30...0x39).contains(value)
                    case .notDigit: return !(0x30...0x39).contains(value)
                    case .word: return Self.isWord(value)
                    case .notWord: return !Self.isWord(value)
                    case .space: return Self.isSpace(value)
                    case .notSpace: return !Self.isSpace(value)
                    }
                }
            return found != isNegated
        }

        static func isWord(_ value: UInt32) -> Bool {
            (0x30...0x39).contains(value) || (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) || value == 0x5F
        }

        static func isSpace(_ value: UInt32) -> Bool {
            value == 0x20 || (0x09...0x0D).contains(value) || value == 0xA0 || value == 0x2028 || value == 0x2029 || value == 0xFEFF
        }
    }

    /// Program counters, each at most once, in insertion order (a sparse set).
    struct StateSet {
        private(set) var members: [Int] = []
        private var seen: [Bool]

        init(capacity: Int) {
            seen = [Bool](repeating: false, count: capacity)
        }

        mutating func insert(_ pc: Int) -> Bool {
            if seen[pc] { return false }
            seen[pc] = true
            members.append(pc)
            return true
        }

        mutating func clear() {
            for pc in members { seen[pc] = false }
            members.removeAll(keepingCapacity: true)
        }
    }

    // MARK: Parsing

    indirect enum Node: Sendable {
        case empty
        case scalar(Unicode.Scalar)
        case any
        case set(CharacterSet)
        case start, end
        case wordBoundary(Bool)
        case concat([Node])
        case alternation([Node])
        case repeated(Node, min: Int, max: Int?)
    }

    struct Parser {
        let scalars: [Unicode.Scalar]
        var index = 0
        /// How many groups are open at the index.
        var depth = 0

        init(scalars: [Unicode.Scalar]) {
            self.scalars = scalars
        }

        func failure(_ message: String) -> SyntaxError { SyntaxError(message: message, position: index + 1) }

        var peek: Unicode.Scalar? { index < scalars.count ? scalars[index] : nil }

        mutating func parseAll() throws(SyntaxError) -> Node {
            let node = try parseAlternation()
            if index < scalars.count { throw failure("unbalanced \")\"") }
            return node
        }

        mutating func parseAlternation() throws(SyntaxError) -> Node {
            var branches = [try parseConcat()]
            while peek == "|" {
                index += 1
                branches.append(try parseConcat())
            }
            return branches.count == 1 ? branches[0] : .alternation(branches)
        }

        mutating func parseConcat() throws(SyntaxError) -> Node {
            var items: [Node] = []
            while let scalar = peek, scalar != "|", scalar != ")" {
                items.append(try parseRepeat())
            }
            return items.count == 1 ? items[0] : (items.isEmpty ? .empty : .concat(items))
        }

        mutating func parseRepeat() throws(SyntaxError) -> Node {
            let atomStart = index
            var node = try parseAtom()
            var isRepeated = false
            while let scalar = peek {
                let quantifierStart = index
                var bounds: (Int, Int?)
                switch scalar {
                case "*": bounds = (0, nil)
                case "+": bounds = (1, nil)
                case "?": bounds = (0, 1)
                case "{":
                    guard let counted = try parseCount() else { return node }
                    bounds = counted
                    index -= 1  // parseCount left the index after "}"; the shared step below moves past it
                default: return node
                }
                index += 1
                if case .start = node { throw SyntaxError(message: "nothing to repeat before \"\(scalar)\"", position: atomStart + 1) }
                // A quantifier on a quantifier (`a**`, `a{2}{3}`) is refused, as ECMA-262 (JSON
                // Schema's dialect) refuses it: stacked a million times it nested the tree a
                // million deep.
                if isRepeated {
                    throw SyntaxError(
                        message: "nothing to repeat before \"\(scalar)\": the atom before it is repeated already",
                        position: quantifierStart + 1)
                }
                isRepeated = true
                if peek == "?" {
                    index += 1  // lazy: the same texts match
                } else if peek == "+" {
                    throw failure("possessive quantifiers are not supported")
                }
                node = .repeated(node, min: bounds.0, max: bounds.1)
            }
            return node
        }

        /// `{n}`, `{n,}`, `{n,m}` at the index; nil (and the index unmoved) when the brace
        /// starts no count, as in `a{x`, where it is a literal.
        mutating func parseCount() throws(SyntaxError) -> (Int, Int?)? {
            let start = index
            index += 1
            func number() -> Int? {
                var value: Int?
                while let scalar = peek, let digit = Int(String(scalar)), scalar.isASCII {
                    value = (value ?? 0) * 10 + digit
                    if value ?? 0 > 1_000 { value = 1_001 }
                    index += 1
                }
                return value
            }
            guard let low = number() else {
                index = start
                return nil
            }
            var high: Int? = low
            if peek == "," {
                index += 1
                high = number()
            }
            guard peek == "}" else {
                index = start
                return nil
            }
            index += 1
            if low > 1_000 || (high ?? 0) > 1_000 { throw failure("a count above 1000 is not supported") }
            if let high, high < low { throw failure("the count's maximum \(high) is below its minimum \(low)") }
            return (low, high)
        }

        mutating func parseAtom() throws(SyntaxError) -> Node {
            guard let scalar = peek else { throw failure("the pattern ends too soon") }
            index += 1
            switch scalar {
            case "(":
                if peek == "?" {
                    index += 1
                    switch peek {
                    case ":": index += 1
                    case "<" where index + 1 < scalars.count && (scalars[index + 1] == "=" || scalars[index + 1] == "!"):
                        throw failure("lookbehind is not supported")
                    case "<", "P":
                        if peek == "P" { index += 1 }
                        guard peek == "<" else { throw failure("unknown group syntax") }
                        while let next = peek, next != ">" { index += 1 }
                        guard peek == ">" else { throw failure("an unterminated group name") }
                        index += 1
                    case "=", "!": throw failure("lookahead is not supported")
                    default: throw failure("unsupported group syntax \"(?\(peek.map { String($0) } ?? "")\"")
                    }
                }
                guard depth < LinearRegex.maximumNesting else {
                    throw SyntaxError(message: "groups nest deeper than \(LinearRegex.maximumNesting)", position: index)
                }
                depth += 1
                let inner = try parseAlternation()
                depth -= 1
                guard peek == ")" else { throw failure("a \"(\" is never closed") }
                index += 1
                return inner
            case ")": throw failure("unbalanced \")\"")
            case "[": return .set(try parseClass())
            case ".": return .any
            case "^": return .start
            case "$": return .end
            case "*", "+", "?": throw SyntaxError(message: "nothing to repeat before \"\(scalar)\"", position: index)
            case "\\": return try parseEscape(inClass: false).node
            default: return .scalar(scalar)
            }
        }

        /// An escape after `\`: a node outside a class; inside one, a set or a scalar.
        mutating func parseEscape(inClass: Bool) throws(SyntaxError) -> (node: Node, scalar: Unicode.Scalar?) {
            guard let scalar = peek else { throw failure("the pattern ends with \"\\\"") }
            index += 1
            func named(_ named: CharacterSet.NamedClass) -> (Node, Unicode.Scalar?) { (.set(CharacterSet(classes: [named])), nil) }
            switch scalar {
            case "d": return named(.digit)
            case "D": return named(.notDigit)
            case "w": return named(.word)
            case "W": return named(.notWord)
            case "s": return named(.space)
            case "S": return named(.notSpace)
            case "b" where !inClass: return (.wordBoundary(true), nil)
            case "B" where !inClass: return (.wordBoundary(false), nil)
            case "A" where !inClass: return (.start, nil)
            case "z" where !inClass, "Z" where !inClass: return (.end, nil)
            case "n": return (.scalar("\n"), "\n")
            case "t": return (.scalar("\t"), "\t")
            case "r": return (.scalar("\r"), "\r")
            case "f": return (.scalar("\u{0C}"), "\u{0C}")
            case "v": return (.scalar("\u{0B}"), "\u{0B}")
            case "1"..."9": throw failure("back-references are not supported")
            case "x", "u":
                let width = scalar == "x" ? 2 : 4
                guard index + width <= scalars.count,
                    let value = UInt32(String(String.UnicodeScalarView(scalars[index..<index + width])), radix: 16),
                    let decoded = Unicode.Scalar(value)
                else { throw failure("\\\(scalar) needs \(width) hex digits") }
                index += width
                return (.scalar(decoded), decoded)
            default:
                guard !scalar.properties.isAlphabetic || !scalar.isASCII else {
                    throw failure("unknown escape \"\\\(scalar)\"")
                }
                return (.scalar(scalar), scalar)
            }
        }

        mutating func parseClass() throws(SyntaxError) -> CharacterSet {
            var set = CharacterSet()
            if peek == "^" {
                set.isNegated = true
                index += 1
            }
            var isFirst = true
            while true {
                guard let scalar = peek else { throw failure("a \"[\" is never closed") }
                if scalar == "]" && !isFirst {
                    index += 1
                    return set
                }
                isFirst = false
                index += 1
                var low: Unicode.Scalar
                if scalar == "\\" {
                    let (node, literal) = try parseEscape(inClass: true)
                    guard let literal else {
                        if case .set(let inner) = node { set.classes += inner.classes }
                        continue
                    }
                    low = literal
                } else {
                    low = scalar
                }
                if peek == "-", index + 1 < scalars.count, scalars[index + 1] != "]" {
                    index += 1
                    guard var high = peek else { throw failure("a \"[\" is never closed") }
                    index += 1
                    if high == "\\" {
                        guard let literal = try parseEscape(inClass: true).scalar else { throw failure("a range cannot end in a class") }
                        high = literal
                    }
                    guard low.value <= high.value else { throw failure("the range \(low)-\(high) is backwards") }
                    set.ranges.append(low.value...high.value)
                } else {
                    set.ranges.append(low.value...low.value)
                }
            }
        }
    }

    // MARK: Compiling

    struct Compiler {
        var program: [Instruction] = []
        /// Nodes emitted so far, copies of repeated ones included: what bounds compiling a
        /// pattern whose repeats emit nothing (`((a{0}){1000}){1000}…`), which the program's size
        /// does not.
        var emitted = 0

        mutating func append(_ instruction: Instruction) throws(SyntaxError) {
            guard program.count < LinearRegex.maximumInstructions else {
                throw SyntaxError(message: "the pattern is too large (more than \(LinearRegex.maximumInstructions) steps)", position: 1)
            }
            program.append(instruction)
        }

        mutating func emit(_ node: Node) throws(SyntaxError) {
            emitted += 1
            guard emitted <= LinearRegex.maximumInstructions * 10 else {
                throw SyntaxError(
                    message: "the pattern is too large (its repeats expand past \(LinearRegex.maximumInstructions * 10) parts)", position: 1
                )
            }
            switch node {
            case .empty: break
            case .scalar(let scalar): try append(.scalar(scalar))
            case .any: try append(.any)
            case .set(let set): try append(.set(set))
            case .start: try append(.start)
            case .end: try append(.end)
            case .wordBoundary(let isBoundary): try append(.wordBoundary(isBoundary))
            case .concat(let items): for item in items { try emit(item) }
            case .alternation(let branches):
                var jumps: [Int] = []
                for (position, branch) in branches.enumerated() {
                    if position < branches.count - 1 {
                        let split = program.count
                        try append(.split(split + 1, 0))
                        try emit(branch)
                        jumps.append(program.count)
                        try append(.jump(0))
                        program[split] = .split(split + 1, program.count)
                    } else {
                        try emit(branch)
                    }
                }
                for jump in jumps { program[jump] = .jump(program.count) }
            case .repeated(let inner, let min, let max):
                for _ in 0..<min { try emit(inner) }
                if let max {
                    // Each optional copy may be skipped to the end.
                    var splits: [Int] = []
                    for _ in min..<max {
                        splits.append(program.count)
                        try append(.split(program.count + 1, 0))
                        try emit(inner)
                    }
                    for split in splits { program[split] = .split(split + 1, program.count) }
                } else {
                    let loop = program.count
                    try append(.split(loop + 1, 0))
                    try emit(inner)
                    try append(.jump(loop))
                    program[loop] = .split(loop + 1, program.count)
                }
            }
        }
    }
}
