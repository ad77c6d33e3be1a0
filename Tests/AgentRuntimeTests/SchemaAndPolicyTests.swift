import ConfigFile
import Foundation
import Testing
import TraceCore

@testable import AgentRuntime

@Suite("Tool input schemas")
struct SchemaTests {
    static let order: JSONValue = [
        "type": "object",
        "required": ["order_id", "items"],
        "additionalProperties": false,
        "properties": [
            "order_id": ["type": "string", "pattern": "^A-[0-9]+$"],
            "reason": ["enum": ["damaged", "late"]],
            "express": ["type": "boolean"],
            "address": [
                "type": "object", "required": ["country"], "maxProperties": 2,
                "properties": ["country": ["type": "string", "minLength": 2, "maxLength": 2], "zip": ["type": ["string", "null"]]],
                "additionalProperties": ["type": "string"],
            ],
            "items": [
                "type": "array", "minItems": 1, "maxItems": 3,
                "items": [
                    "type": "object", "required": ["sku", "qty"],
                    "properties": ["sku": ["type": "string"], "qty": ["type": "integer", "minimum": 1]],
                ],
            ],
            "amount": ["type": "number", "exclusiveMinimum": 0, "maximum": 500],
        ],
    ]

    static let valid: JSONValue = [
        "order_id": "A-1", "reason": "late", "express": true, "address": ["country": "DE", "zip": nil], "items": [["sku": "M1", "qty": 2]],
        "amount": 12.5,
    ]

    @Test("a conforming value passes")
    func conforms() throws {
        #expect(try JSONSchema(json: Self.order).violation(of: Self.valid) == nil)
        #expect(try JSONSchema(json: ["type": "integer"]).violation(of: .double(3.0)) == nil)
    }

    @Test(
        "a server's schema read with its unknown keywords ignored: patternProperties (or $ref, allOf…) beside additionalProperties false lets the members they allow through"
    )
    func unknownKeywordsDoNotRefuseWhatTheyAllow() throws {
        let schema = try JSONSchema(
            json: [
                "type": "object", "properties": ["id": ["type": "string"]], "patternProperties": ["^x-": ["type": "string"]],
                "additionalProperties": false,
            ], unknownKeywords: .ignore)
        #expect(schema.violation(of: ["id": "a", "x-trace": "t"], root: "structuredContent") == nil)
        #expect(schema.violation(of: ["id": 7], root: "structuredContent") != nil)
        // Without such a keyword, additionalProperties false still refuses an extra member.
        let closed = try JSONSchema(
            json: ["type": "object", "properties": ["id": ["type": "string"]], "additionalProperties": false], unknownKeywords: .ignore)
        #expect(closed.violation(of: ["id": "a", "x-trace": "t"], root: "structuredContent") != nil)
    }

    static func replacing(_ key: String, with value: JSONValue?) -> JSONValue {
        var object = valid.objectValue ?? JSONObject()
        object[key] = value
        return .object(object)
    }

    @Test(
        "each violation names the exact place and what is wrong",
        arguments: [
            (replacing("order_id", with: 7), "arguments.order_id must be a string, found an integer (7)"),
            (replacing("order_id", with: "B-1"), #"arguments.order_id must match the pattern ^A-[0-9]+$, found a string ("B-1")"#),
            (replacing("order_id", with: nil), #"arguments is missing the required field "order_id""#),
            (replacing("reason", with: "bored"), #"arguments.reason must be one of "damaged", "late", found a string ("bored")"#),
            (replacing("express", with: "yes"), #"arguments.express must be a boolean, found a string ("yes")"#),
            (replacing("address", with: ["zip": "1"]), #"arguments.address is missing the required field "country""#),
            (replacing("address", with: ["country": "DEU"]), "arguments.address.country must be at most 2 characters long, found 3"),
            (
                replacing("address", with: ["country": "DE", "zip": 1]),
                "arguments.address.zip must be a string or null, found an integer (1)"
            ),
            (replacing("items", with: []), "arguments.items must have at least 1 items, found 0"),
            (
                replacing("address", with: ["country": "DE", "zip": "1", "city": "Köln"]),
                "arguments.address must have at most 2 fields, found 3"
            ),
            (
                replacing("items", with: [["sku": "M1", "qty": 1], ["sku": 5, "qty": 1]]),
                "arguments.items[1].sku must be a string, found an integer (5)"
            ),
            (replacing("items", with: [["sku": "M1", "qty": 0]]), "arguments.items[0].qty must be at least 1, found an integer (0)"),
            (replacing("items", with: [["sku": "M1"]]), #"arguments.items[0] is missing the required field "qty""#),
            (replacing("amount", with: 0), "arguments.amount must be greater than 0, found an integer (0)"),
            (replacing("amount", with: 501.5), "arguments.amount must be at most 500, found a number (501.5)"),
            (
                replacing("coupon", with: "X"),
                #"arguments has an unexpected field "coupon" (allowed: "address", "amount", "express", "items", "order_id", "reason")"#
            ),
            ("not an object", "arguments must be an object, found a string (\"not an object\")"),
        ])
    func violations(_ value: JSONValue, _ message: String) throws {
        #expect(try JSONSchema(json: Self.order).violation(of: value) == message)
    }

    @Test(
        "a schema this runtime cannot check is rejected when it is read",
        arguments: [
            (
                ["type": "int"] as JSONValue,
                #"type names an unknown type "int" (known: string, integer, number, boolean, object, array, null)"#
            ),
            (["type": "object", "propertys": [:]], "propertys is not a supported schema keyword"),
            (["properties": ["a": ["minimum": "1"]]], "properties.a.minimum must be a number, found a string"),
            (
                ["pattern": "(unclosed"],
                #"pattern is not a regular expression this tool runs: a "(" is never closed (at position 10 of the pattern)"#
            ),
            (["required": ["b"], "properties": ["a": [:]]], #"required names "b", which is not among the properties"#),
        ] as [(JSONValue, String)])
    func badSchemas(_ schema: JSONValue, _ message: String) {
        #expect(throws: SchemaError.self) { try JSONSchema(json: schema) }
        do {
            _ = try JSONSchema(json: schema)
        } catch {
            #expect(error.sentence.hasPrefix(message))
        }
    }
}

@Suite("Policy rules")
struct PolicyTests {
    @Test("what is left of a log's limits never traps: a budget of Int.min (a hostile log read by audit) leaves Int.min, not an overflow")
    func limitsLeftSaturate() {
        var state = RunState()
        state.usage.inputTokens = 5
        state.counters.executedCalls = 2
        let query = PolicyQuery(
            call: ToolCall(id: "c", name: "refund_order", arguments: [:]), tool: Self.refund, actor: nil, route: nil, state: state,
            limits: RunLimits(maxToolCalls: Int.min, tokenBudget: Int.min))
        #expect(query.tokensLeft == Int.min && query.toolCallsLeft == Int.min)
        let fair = PolicyQuery(
            call: ToolCall(id: "c", name: "refund_order", arguments: [:]), tool: Self.refund, actor: nil, route: nil, state: state,
            limits: RunLimits(maxToolCalls: 6, tokenBudget: 100))
        #expect(fair.tokensLeft == 95 && fair.toolCallsLeft == 4)
    }

    @Test("a server's schema of anyOf nested 40 deep checks each form once: arguments that fail it are told so at once, not in 2^40 checks")
    func nestedAnyOf() throws {
        var schema: JSONValue = ["type": "string"]
        for _ in 0..<40 { schema = ["anyOf": [schema, ["type": "boolean"]]] }
        let checked = try JSONSchema(json: schema)
        #expect(checked.violation(of: .string("fine")) == nil)
        #expect(checked.violation(of: .bool(true)) == nil)
        let problem = try #require(checked.violation(of: .int(7)))
        #expect(problem == "arguments must be a string, found an integer (7) (and no other allowed form matches)")
    }

    static let refund = ToolSpec(name: "refund_order", description: "", inputSchema: ["type": "object"], sideEffect: .write)
    static let lookup = ToolSpec(name: "lookup_order", description: "", inputSchema: ["type": "object"], sideEffect: .read)
    static let delete = ToolSpec(name: "delete_customer", description: "", inputSchema: ["type": "object"], sideEffect: .write)

    static let policy: RulePolicy = {
        var large = PolicyRule(id: "large", verdict: .deny, reason: "too large")
        large.tools = [Glob("refund_*")]
        large.arguments = [ArgumentCondition(path: ["amount", "cents"], test: .atLeast(50_000))]
        var deletes = PolicyRule(id: "no-deletes", verdict: .deny, reason: "never")
        deletes.tools = [Glob("delete_*")]
        var reads = PolicyRule(id: "reads", verdict: .allow)
        reads.sideEffects = [.read]
        var needsApproval = PolicyRule(id: "approval", verdict: .approvalRequired)
        needsApproval.tools = [Glob("refund_order")]
        needsApproval.isApproved = false
        var agents = PolicyRule(id: "staff", verdict: .allow)
        agents.actors = [Glob("staff:*")]
        var lowBudget = PolicyRule(id: "low-budget", verdict: .deny, reason: "budget")
        lowBudget.toolCallsLeftBelow = 1
        return RulePolicy(
            name: "p", rules: [large, deletes, reads, lowBudget, agents, needsApproval],
            defaultDecision: PolicyDecision(.allow, reason: "fallthrough", rule: "default"))
    }()

    func verdict(
        _ tool: ToolSpec, _ arguments: JSONValue = [:], actor: String? = "customer:1", state: RunState = RunState(),
        limits: RunLimits = RunLimits()
    )
        -> PolicyDecision
    {
        Self.policy.decide(
            PolicyQuery(
                call: ToolCall(id: "c", name: tool.name, arguments: arguments), tool: tool, actor: actor, route: "chat", state: state,
                limits: limits))
    }

    @Test("the first matching rule wins; no match gives the default")
    func firstMatchWins() {
        #expect(verdict(Self.lookup).rule == "reads")
        #expect(verdict(Self.delete) == PolicyDecision(.deny, reason: "never", rule: "no-deletes"))
        #expect(verdict(Self.refund, ["amount": ["cents": 60_000]]).rule == "large")
        #expect(verdict(Self.refund, ["amount": ["cents": 100]]).rule == "approval")
        #expect(verdict(Self.refund, ["amount": ["cents": 100]], actor: "staff:maria").rule == "staff")
        #expect(verdict(Self.delete, actor: "staff:maria").rule == "no-deletes")
    }

    @Test("approvals already given and the remaining budget change the verdict")
    func approvalsAndBudget() {
        var state = RunState()
        func fold(_ payload: EventPayload) {
            let event = Event(runId: "r", sequence: state.eventCount, step: 1, timeUs: 0, previousHash: "", payload: payload)
            RunState.reduce(into: &state, event)
        }
        let approved = ToolCall(id: "call-1", name: "refund_order", arguments: [:])
        let used = ToolCall(id: "call-2", name: "lookup_order", arguments: [:])
        fold(.decisionMade(DecisionMade(raw: "r", outcome: .valid(.toolCalls([approved, used])))))
        fold(.verdictGiven(VerdictGiven(callId: "call-1", tool: "refund_order", verdict: .approvalRequired)))
        fold(.approvalRecorded(ApprovalRecorded(callId: "call-1", isGranted: true)))
        #expect(verdict(Self.refund, ["amount": ["cents": 100]], state: state).rule == "default")
        fold(.verdictGiven(VerdictGiven(callId: "call-2", tool: "lookup_order", verdict: .allow)))
        fold(.toolIntended(ToolIntended(callId: "call-2", tool: "lookup_order", arguments: [:], attempt: 1)))
        #expect(verdict(Self.refund, ["amount": ["cents": 100]], state: state, limits: RunLimits(maxToolCalls: 1)).rule == "low-budget")
    }

    @Test("tools that a static rule denies are not disclosed to the model")
    func disclosure() {
        #expect(Self.policy.discloses(Self.delete, actor: nil, route: nil).isDisclosed == false)
        #expect(Self.policy.discloses(Self.lookup, actor: nil, route: nil).isDisclosed)
        // The large-refund rule looks at arguments, so refunds stay visible.
        #expect(Self.policy.discloses(Self.refund, actor: nil, route: nil).isDisclosed)
    }

    @Test(
        "argument conditions",
        arguments: [
            (ArgumentCondition.Test.equals("EUR"), ["currency": "EUR"] as JSONValue, true),
            (.equals("EUR"), ["currency": "USD"], false),
            (.oneOf(["EUR", "USD"]), ["currency": "USD"], true),
            (.matches("^E"), ["currency": "EUR"], true),
            (.matches("^E"), ["currency": 5], false),
            (.atMost(10), ["currency": 10], true),
            (.atLeast(10), ["currency": 9.5], false),
            (.exists(true), ["other": 1], false),
            (.exists(false), ["other": 1], true),
            // Equality is by value at every depth: 1 equals 1.0, and a nested extra key is a difference.
            (.equals(["a": 1.0]), ["currency": ["a": 1]], true),
            (.equals(["a": 1]), ["currency": ["a": 1, "b": 2]], false),
            (.oneOf([5.0]), ["currency": 5], true),
        ] as [(ArgumentCondition.Test, JSONValue, Bool)])
    func conditions(_ test: ArgumentCondition.Test, _ arguments: JSONValue, _ holds: Bool) {
        #expect(ArgumentCondition(path: ["currency"], test: test).holds(in: arguments) == holds)
    }

    @Test("a string is read as a number as a server's lax reading makes one, the same way Foundation's trimming and replacing read it")
    func laxNumbers() {
        /// The reading as it was written with Foundation, which judging a call spent most of its time in.
        func foundationReading(_ text: String) -> Double? {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty, !trimmed.contains(where: { $0 == "x" || $0 == "X" || $0 == "p" || $0 == "P" }),
                !trimmed.hasPrefix("_"), !trimmed.hasSuffix("_"), !trimmed.contains("__"),
                let number = Double(trimmed.replacingOccurrences(of: "_", with: "")), number.isFinite
            else { return nil }
            return number
        }
        // Every text of up to four of these: digits, the signs and marks of a number, `_`, the
        // letters of hexadecimal, white space of several kinds (and a zero-width space and a
        // byte-order mark, which only Foundation may count as white space), a letter, a combining
        // accent.
        let alphabet = [
            "0", "7", "_", "+", "-", ".", "e", "x", "p", " ", "\u{00A0}", "\u{2028}", "\u{200B}", "\u{FEFF}", "\t", "a", "\u{0301}",
        ]
        var texts = [""]
        var last = [""]
        for _ in 0..<4 {
            last = last.flatMap { text in alphabet.map { text + $0 } }
            texts += last
        }
        texts += [" +050_000 ", "1e400", "1_0e1_0", "inf", "nan", "0x10", "\u{3000}42\u{3000}", "4\u{0301}2", "٤٢"]
        var differences: [String] = []
        for text in texts {
            let reading = ArgumentCondition.laxNumber(text)
            if reading != foundationReading(text) { differences.append("\(text.debugDescription): \(String(describing: reading))") }
            // What the quick test rules out, neither reading (JSON's nor the lax one) makes a number of.
            if !ArgumentCondition.mayBeNumber(text), reading != nil || (try? JSONParser.parse(Array(text.utf8)))?.doubleValue != nil {
                differences.append("\(text.debugDescription) ruled out")
            }
        }
        #expect(differences.isEmpty, "\(differences.count) texts read otherwise: \(differences.prefix(10))")
    }

    @Test(
        "an argument is judged as a server reads it: a number in a string is that number; what a condition cannot read is undecidable",
        arguments: [
            (ArgumentCondition.Test.atLeast(10001), ["amount": "50000"] as JSONValue, "holds"),
            (.atLeast(10001), ["amount": "500"], "fails"),
            (.atLeast(10001), ["amount": "fifty thousand"], "undecidable"),
            (.atLeast(10001), ["amount": ["value": 50000]], "undecidable"),
            (.atLeast(10001), ["other": 1], "undecidable"),
            (.atMost(100), ["amount": "1e9"], "fails"),
            (.equals(5), ["amount": "5"], "holds"),
            // Numbers as a server's lax reading makes them of a string: leading zeros, a sign,
            // `_` between digits, white space.
            (.equals(50000), ["amount": "050000"], "holds"),
            (.oneOf([50000]), ["amount": "+50000"], "holds"),
            (.equals(50000), ["amount": "50_000"], "holds"),
            (.equals(999123), ["amount": " 999123"], "holds"),
            (.atLeast(10001), ["amount": "+050_000"], "holds"),
            (.equals(50000), ["amount": "0x c350"], "fails"),
            (.atLeast(10001), ["amount": "nan"], "undecidable"),
            (.atMost(100), ["amount": "-inf"], "undecidable"),
            (.matches("^5[0-9]{4}$"), ["amount": "50000"], "holds"),
            (.matches("^5[0-9]{4}$"), ["amount": "+50000"], "undecidable"),
            // A string the pattern matches as it is stays that match (a zip code, an id with zeros).
            (.matches("^[0-9]{5}$"), ["amount": "02139"], "holds"),
            (.oneOf(["A-1", 7]), ["amount": "7"], "holds"),
            (.matches("^5"), ["amount": 50000], "holds"),
            (.matches("^5"), ["amount": [5]], "undecidable"),
            (.equals("EUR"), ["other": 1], "fails"),
            // A boolean as the server reads it: a word or 0/1 is that boolean; anything else
            // cannot be read as one, so a rule on `false` is not walked around with "nope".
            (.equals(false), ["amount": "false"], "holds"),
            (.equals(false), ["amount": "No"], "holds"),
            (.equals(false), ["amount": 0], "holds"),
            (.equals(true), ["amount": "1"], "holds"),
            (.equals(true), ["amount": "off"], "fails"),
            (.equals(false), ["amount": "nope"], "undecidable"),
            (.equals(false), ["amount": 2], "undecidable"),
            (.oneOf([true, "maybe"]), ["amount": "maybe"], "holds"),
            (.oneOf([true]), ["amount": ["x"]], "undecidable"),
            (.equals(false), ["other": "false"], "fails"),
        ] as [(ArgumentCondition.Test, JSONValue, String)])
    func coercion(_ test: ArgumentCondition.Test, _ arguments: JSONValue, _ expected: String) {
        let judged = ArgumentCondition(path: ["amount"], test: test).judge(arguments)
        switch judged {
        case .holds: #expect(expected == "holds")
        case .fails: #expect(expected == "fails")
        case .undecidable(let why): #expect(expected == "undecidable" && why.contains("argument amount"), "\(why)")
        }
    }

    @Test(
        "an object or a list given as its JSON text in a string is read as the server parses it: a rule on a path through it is not walked around",
        arguments: [
            (["changes", "role"], ArgumentCondition.Test.equals("admin"), ["changes": #"{"role": "admin"}"#] as JSONValue, "holds"),
            (["changes", "role"], .equals("admin"), ["changes": ["role": "admin"]], "holds"),
            (["changes", "role"], .oneOf(["admin", "owner"]), ["changes": #" {"role":"owner"}"#], "holds"),
            (["changes", "role"], .exists(true), ["changes": #"{"role": "admin"}"#], "holds"),
            (["recipients", "0"], .matches("@evil\\.com$"), ["recipients": #"["x@evil.com"]"#], "holds"),
            (["changes", "role"], .equals("admin"), ["changes": #"{"role": "user"}"#], "fails"),
            // Text that looks like JSON and is none the gate reads strictly — duplicate keys (the
            // last wins in Python's parser), NaN, a lone surrogate — may be read by the server
            // after all: what lies in it cannot be judged, never a plain "fails".
            (["changes", "role"], .equals("admin"), ["changes": #"{"role":"user","role":"admin"}"#], "undecidable"),
            (["changes", "role"], .oneOf(["admin", "root"]), ["changes": #"{"role":"admin","x":NaN}"#], "undecidable"),
            (["changes", "role"], .equals("admin"), ["changes": #"{"role":"admin","x":"\ud800"}"#], "undecidable"),
            (["changes", "role"], .exists(true), ["changes": "{role: admin"], "undecidable"),
            // Plain text is no object: no path runs through it.
            (["changes", "role"], .exists(true), ["changes": "make me admin"], "fails"),
            // At the end of the path too: a list given as text is a list, which a pattern cannot match.
            (["amount"], .matches("^5"), ["amount": "[5]"], "undecidable"),
        ] as [([String], ArgumentCondition.Test, JSONValue, String)])
    func jsonTextIsReadAsTheServerParsesIt(_ path: [String], _ test: ArgumentCondition.Test, _ arguments: JSONValue, _ expected: String) {
        switch ArgumentCondition(path: path, test: test).judge(arguments) {
        case .holds: #expect(expected == "holds")
        case .fails: #expect(expected == "fails")
        case .undecidable(let why): #expect(expected == "undecidable", "\(why)")
        }
    }

    @Test(
        "a URL elicitation passes the host list only when a browser opens the host the list allows: no userinfo, backslash, space or other scheme",
        arguments: [
            ("https://auth.example.com/login", true),
            ("HTTPS://Auth.Example.com/", true),
            ("https://eu.example.org/x", true),
            ("https://evil.com\\@auth.example.com/", false),
            ("https://user@auth.example.com/", false),
            ("https://auth.example.com\t.evil.com/", false),
            ("javascript://auth.example.com/%0aalert(1)", false),
            ("ftp://auth.example.com/", false),
            ("https://evil.com/", false),
        ])
    func urlElicitationHosts(_ url: String, _ allowed: Bool) {
        var policy = InputRequestPolicy()
        policy.urlHosts = [Glob("auth.example.com"), Glob("*.example.org")]
        let refusal = policy.refusal(method: "elicitation/create", params: ["mode": "url", "url": .string(url)])
        #expect((refusal == nil) == allowed, "\(url): \(String(describing: refusal))")
    }

    @Test("a restrictive rule whose argument condition cannot be judged applies, saying why; an allowing one does not")
    func undecidableFailsClosed() throws {
        var large = PolicyRule(id: "large-refunds", verdict: .approvalRequired, reason: "refunds over 100.00 need a person")
        large.tools = [Glob("refund_order")]
        large.arguments = [ArgumentCondition(path: ["amount"], test: .atLeast(10001))]
        var small = PolicyRule(id: "small-refunds", verdict: .allow)
        small.tools = [Glob("refund_order")]
        small.arguments = [ArgumentCondition(path: ["amount"], test: .atMost(10000))]
        let tool = ToolSpec(name: "refund_order", description: "", inputSchema: ["type": "object"], sideEffect: .write)
        func decide(_ policy: RulePolicy, _ arguments: JSONValue) -> PolicyDecision {
            policy.decide(
                PolicyQuery(
                    call: ToolCall(id: "c", name: "refund_order", arguments: arguments), tool: tool, actor: nil, route: nil,
                    state: RunState(), limits: RunLimits()))
        }
        let gate = RulePolicy(name: "p", rules: [large], defaultDecision: PolicyDecision(.allow, rule: "default"))
        #expect(decide(gate, ["amount": "50000"]).verdict == .approvalRequired)
        let odd = decide(gate, ["amount": "lots"])
        #expect(odd.verdict == .approvalRequired && odd.reason?.contains("applied because argument amount is") == true, "\(odd)")
        #expect(decide(gate, ["amount": 500]).verdict == .allow)
        let allowList = RulePolicy(name: "p", rules: [small], defaultDecision: PolicyDecision(.deny, rule: "default"))
        #expect(decide(allowList, ["amount": "lots"]).verdict == .deny, "an unreadable value never opens an allow rule")
        #expect(decide(allowList, ["amount": "50"]).verdict == .allow)
    }

    @Test(
        "a policy file may hold input_requests alone for mcp-proxy (every call allowed, the questions judged), never for audit or a case; any other needs policy:, and a misspelt policy: is named"
    )
    func policyFileWithQuestionsOnly() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("policy-\(UInt64.random(in: 0...UInt64.max)).yaml").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        func load(_ text: String) throws -> PolicyFile {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return try PolicyFile.load(path: path)
        }
        let questions = try load("input_requests:\n  sampling: deny\n")
        #expect(questions.inputRequests.sampling == .deny)
        let decision = questions.policy.decide(
            PolicyQuery(
                call: ToolCall(id: "c", name: "delete_customer", arguments: [:]), tool: Self.delete, actor: nil, route: nil,
                state: RunState(), limits: RunLimits()))
        #expect(decision.verdict == .allow && decision.rule == "default")
        // What judges recorded calls by the rules (audit, a case's policy:) refuses the file:
        // with no rules it would pass every call it was given.
        do throws(ConfigErrors) {
            _ = try PolicyFile.load(path: path, for: .callChecker(what: "audit"))
            Issue.record("a file without policy: was read for audit")
        } catch {
            let problem = error.errors.first
            #expect(error.errors.count == 1)
            #expect(problem?.message.contains("no policy: block, only input_requests:; audit checks calls") == true)
            #expect(problem?.location.path == path && problem?.location.line == 1)
            #expect(problem?.hint?.contains("mcp-proxy --policy") == true)
        }
        try "policy:\n  default: deny\ninput_requests:\n  sampling: deny\n".write(toFile: path, atomically: true, encoding: .utf8)
        let both = try PolicyFile.load(path: path, for: .callChecker(what: "audit"))
        #expect(both.policy.defaultDecision.verdict == .deny && both.inputRequests.sampling == .deny)
        for (text, expected) in [
            ("side_effects:\n  add_note: draft\n", #"the policy file has no "policy""#),
            ("polcy:\n  default: deny\ninput_requests:\n  sampling: deny\n", #"has no setting "polcy""#),
        ] {
            do {
                _ = try load(text)
                Issue.record("\(text) was read")
            } catch let errors as ConfigErrors {
                #expect(errors.errors.contains { $0.message.contains(expected) }, "\(errors.errors.map(\.message))")
            }
        }
    }
}
