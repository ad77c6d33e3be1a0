import AgentRuntime
public import ConfigFile
import Foundation
import TraceCore

/// Reads eval case files (YAML or JSON): one case as a mapping, or several as a list. The
/// format is documented in docs/eval-cases.md, with a JSON Schema in
/// docs/eval-case.schema.json. Every error names file:line:column.
public enum EvalCaseFile {
    /// The cases of the file at `path`; throws every error found in it (all cases and all
    /// their fields are read before giving up), in file order.
    public static func load(path: String) throws(ConfigErrors) -> [EvalCase] {
        try cases(in: ConfigNode.loadReportingAll(path: path), path: path)
    }

    /// The cases of a file already parsed.
    static func cases(in root: ConfigNode, path: String) throws(ConfigErrors) -> [EvalCase] {
        var errors = ConfigErrors([])
        let cases = read(root, path: path, errors: &errors, keepingPartial: false)
        guard errors.errors.isEmpty else {
            throw errors.inFileOrder(of: root.location.path)
        }
        return cases
    }

    /// The cases of a file that has errors, as far as each could be read (its id, its source and
    /// the expectations without errors): so that `check` finds what ties them to other files —
    /// a misspelt tool, a missing agent — in the same round as the file's own errors.
    static func partialCases(in root: ConfigNode, path: String) -> [EvalCase] {
        var errors = ConfigErrors([])
        return read(root, path: path, errors: &errors, keepingPartial: true)
    }

    static func read(_ root: ConfigNode, path: String, errors: inout ConfigErrors, keepingPartial: Bool) -> [EvalCase] {
        // A bare file name's folder is the working directory: "." (an empty folder would start a
        // command case's program nowhere).
        let folder = (path as NSString).deletingLastPathComponent
        let directory = folder.isEmpty ? "." : folder
        var cases: [EvalCase] = []
        switch root.content {
        case .sequence(let items):
            for (index, item) in items.enumerated() {
                if let found = readCase(
                    item, what: "case \(index + 1)", directory: directory, errors: &errors, keepingPartial: keepingPartial)
                {
                    cases.append(found)
                }
            }
        default:
            if let found = readCase(root, what: "the case", directory: directory, errors: &errors, keepingPartial: keepingPartial) {
                cases.append(found)
            }
        }
        return cases
    }

    /// `path` relative to the case file's directory (see `ConfigPath.resolve`).
    static func resolve(_ path: String, from directory: String) -> String { ConfigPath.resolve(path, from: directory) }

    /// One case; nil when it has errors, which go to `errors` (every field is read), unless
    /// `keepingPartial`: then what could be read, when that is an id, a source and expectations.
    static func readCase(
        _ node: ConfigNode, what: String, directory: String, errors: inout ConfigErrors, keepingPartial: Bool = false
    ) -> EvalCase? {
        let before = errors.errors.count
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping(what) }) else { return nil }
        let id = errors.collect { () throws(ConfigError) -> String in
            let idNode = try fields.required("caseId", hint: "every case needs a unique caseId")
            let id = try idNode.nonEmptyString("caseId")
            guard EvalCase.isValidId(id) else { throw EvalCase.invalidIdError(id, at: idNode.location) }
            return id
        }
        let name = id.map { "case \"\($0)\"" } ?? what
        let description = errors.collect { () throws(ConfigError) in try fields.optional("description")?.string("description") } ?? nil
        let tags = errors.collect { () throws(ConfigError) in try fields.optional("tags")?.names("tags") ?? [] } ?? []
        let inputNode = fields.optional("input")
        let agent = errors.collect { () throws(ConfigError) in try fields.optional("agent")?.nonEmptyString("agent") } ?? nil
        let pipeline = errors.collect { () throws(ConfigError) in try fields.optional("pipeline")?.nonEmptyString("pipeline") } ?? nil
        // A pipeline's input is any JSON value; an agent's is the goal text.
        let input =
            pipeline != nil ? nil : errors.collect { () throws(ConfigError) in try inputNode?.string("input") } ?? nil
        let logsNode = fields.optional("logs")
        let logs = errors.collect { () throws(ConfigError) in try logsNode?.strings("logs") } ?? nil
        let approve = errors.collect { () throws(ConfigError) in try fields.optional("approve")?.names("approve") ?? [] } ?? []
        let deny = errors.collect { () throws(ConfigError) in try fields.optional("deny")?.names("deny") ?? [] } ?? []
        let allowsUnfinished =
            errors.collect { () throws(ConfigError) in try fields.optional("allowUnfinished")?.bool("allowUnfinished") ?? false } ?? false
        let allowsReusedCallIds =
            errors.collect { () throws(ConfigError) in try fields.optional("allowReusedCallIds")?.bool("allowReusedCallIds") ?? false }
            ?? false
        let minPassRateNode = fields.optional("minPassRate")
        let minPassRate =
            errors.collect { () throws(ConfigError) -> Double? in
                guard let minPassRateNode else { return nil }
                let value = try minPassRateNode.double("minPassRate")
                guard value > 0 && value <= 1 else {
                    throw ConfigError(
                        .invalidValue, "minPassRate must be above 0 and at most 1, found \(value)", at: minPassRateNode.location,
                        hint: "the share of a live case's attempts that must pass, e.g. 0.8")
                }
                return value
            } ?? nil
        let quarantine = fields.optional("quarantine").flatMap { QuarantineEntry.read($0, caseId: id ?? "", errors: &errors) }
        let kappaNode = fields.optional("judgeMinKappa")
        let judgeMinKappa =
            errors.collect { () throws(ConfigError) -> Double? in
                guard let kappaNode else { return nil }
                let value = try kappaNode.double("judgeMinKappa")
                guard value > -1 && value <= 1 else {
                    throw ConfigError(
                        .invalidValue, "judgeMinKappa must be above -1 and at most 1, found \(value)", at: kappaNode.location,
                        hint: "the least Cohen's κ the case's judge must reach against people's labels, e.g. 0.6")
                }
                return value
            } ?? nil
        let cassetteNode = fields.optional("cassette")
        let cassette = errors.collect { () throws(ConfigError) in try cassetteNode?.nonEmptyString("cassette") } ?? nil
        let policyNode = fields.optional("policy")
        let policyPath = errors.collect { () throws(ConfigError) in try policyNode?.nonEmptyString("policy") } ?? nil
        let policy = policyPath.flatMap { path in readPolicy(resolve(path, from: directory), errors: &errors) }
        let userNode = fields.optional("user")
        let user = userNode.flatMap { node in
            errors.collect { () throws(ConfigError) in try CaseUserSpec.read(node, directory: directory) }
        }
        let commandNode = fields.optional("command")
        let command = commandNode.flatMap { readCommand($0, fields: &fields, directory: directory, errors: &errors) }
        for key in ["upstream", "timeout", "env", "name"] where commandNode == nil {
            if let node = fields.optional(key) {
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(name) has \(key), which only a command case uses", at: node.location,
                        hint: "add command: [program, args…] to run an agent through the recording gateway, or drop \(key)"))
            }
        }
        let expectedNode = errors.collect { () throws(ConfigError) in try fields.required("expected") }
        let expected = expectedNode.flatMap {
            readExpectations($0, case: name, directory: directory, errors: &errors, keepingPartial: keepingPartial)
        }
        errors.errors.append(contentsOf: fields.unknownKeys(in: name))

        var source: EvalCase.Source?
        errors.collect { () throws(ConfigError) in
            if commandNode != nil {
                guard agent == nil, logsNode == nil, pipeline == nil else {
                    let other = agent != nil ? "agent" : logsNode != nil ? "logs" : "pipeline"
                    throw ConfigError(
                        .invalidValue, "\(name) has command and \(other); a case checks one source", at: node.location,
                        hint: "command: runs any program through the recording gateway; keep it or \(other), not both")
                }
                if !approve.isEmpty || !deny.isEmpty {
                    throw ConfigError(
                        .invalidValue,
                        "\(name) approve and deny apply to agent files' runs; a command's tools run in its own process, beyond the gateway",
                        at: node.location)
                }
                guard let command else { return }  // already reported
                source = .command(command)
                if userNode != nil, let inputNode {
                    throw ConfigError(
                        .invalidValue, "\(name) has input and user: a conversation's first message is the user's", at: inputNode.location,
                        hint: "move the input to user.opening")
                }
                if input == nil, userNode == nil {
                    throw ConfigError(
                        .missingKey, "\(name) runs live and needs an input (or a user: for a conversation)", at: node.location)
                }
                return
            }
            if let pipeline {
                guard agent == nil, logsNode == nil else {
                    throw ConfigError(
                        .invalidValue, "\(name) has pipeline and \(agent != nil ? "agent" : "logs"); a case checks one source",
                        at: node.location, hint: "recorded pipeline runs go under logs: (their pipeline.jsonl.gz)")
                }
                if !approve.isEmpty || !deny.isEmpty {
                    throw ConfigError(
                        .invalidValue, "\(name) approve and deny apply to agent runs; a pipeline's agents decide by their policies",
                        at: node.location)
                }
                source = .pipeline(file: resolve(pipeline, from: directory))
                return
            }
            switch (agent, logs) {
            case (let agent?, nil):
                source = .live(agent: resolve(agent, from: directory), approve: approve, deny: deny)
            case (nil, let logs?):
                guard !logs.isEmpty else {
                    throw ConfigError(.invalidValue, "\(name) logs is empty", at: logsNode?.location ?? node.location)
                }
                // An empty path would name the case file's own folder.
                guard !logs.contains(where: { $0.trimmingCharacters(in: .whitespaces).isEmpty }) else {
                    throw ConfigError(
                        .invalidValue, "\(name) logs has an empty path", at: logsNode?.location ?? node.location,
                        hint: "name a log, e.g. logs: runs/refund.jsonl.gz, or a pattern such as runs/*.jsonl.gz")
                }
                if let inputNode {
                    // Left alone, it reads as checked: a case whose logs hold another task passed.
                    throw ConfigError(
                        .invalidValue, "\(name) has input and logs: input is the goal of a live run, and a recorded log holds its own",
                        at: inputNode.location,
                        hint: "drop input, since the log's goal is its run_started event's; or run the case live with agent and input")
                }
                if !approve.isEmpty || !deny.isEmpty {
                    throw ConfigError(.invalidValue, "\(name) approve and deny only apply to live runs (with agent)", at: node.location)
                }
                source = .recorded(patterns: logs.map { resolve($0, from: directory) })
            case (nil, nil) where logsNode == nil:
                source = .defaultAgent(approve: approve, deny: deny)
            case (nil, nil):
                return  // logs had the wrong type: already reported
            default:
                throw ConfigError(
                    .invalidValue, "\(name) has both agent and logs; a case checks live runs or recorded ones", at: node.location)
            }
            if case .recorded? = source {
                if cassetteNode != nil {
                    throw ConfigError(
                        .invalidValue, "\(name) names a cassette but checks recorded logs: a cassette serves the model of live runs",
                        at: cassetteNode?.location ?? node.location, hint: "drop cassette, or run the case live with agent and input")
                }
            } else if userNode != nil {
                if let inputNode {
                    throw ConfigError(
                        .invalidValue, "\(name) has input and user: a conversation's first message is the user's", at: inputNode.location,
                        hint: "move the input to user.opening")
                }
            } else if input == nil {
                throw ConfigError(.missingKey, "\(name) runs live and needs an input", at: node.location)
            }
        }
        if let userNode, let source {
            switch source {
            case .live, .defaultAgent: break
            case .recorded:
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(name) has user, which talks to live runs; recorded conversations are checked as they are",
                        at: userNode.location, hint: "drop user to check the recorded logs, or give agent: to run the conversation live"))
            case .command(let command):
                // The turns come on standard input; the opening is not known when the command line is made.
                if command.arguments.contains(where: { $0.contains("{input}") }) {
                    errors.errors.append(
                        ConfigError(
                            .invalidValue,
                            "\(name) has user and a command with {input}: a conversation's turns come on the command's standard "
                                + "input, one line each (the first also as AGENT_EVAL_INPUT)",
                            at: node.location(ofKey: "command") ?? node.location,
                            hint: "drop {input} and read the turns from standard input"))
                }
            case .pipeline:
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(name) has user and pipeline: conversations run an agent file (agent:) or a command (command:)",
                        at: userNode.location, hint: "give agent: agents/NAME.yaml, or command: [python3, agent.py]"))
            }
        }
        if let user, let expected, let beyond = expected.turns.first(where: { $0.turn > user.maxTurns }) {
            errors.errors.append(
                ConfigError(
                    .invalidValue,
                    "\(name) expects turns.\(beyond.turn), and its conversation has at most \(user.maxTurns) user turns (user.maxTurns)",
                    at: expectedNode?.location(ofKey: "turns") ?? node.location, hint: "raise user.maxTurns, or check an earlier turn"))
        }
        if let expected, expected.state != nil, let source, !source.isLive || source.isPipeline {
            errors.errors.append(
                ConfigError(
                    .invalidValue,
                    "\(name) expects state, which a command reads from the environment a live run leaves: "
                        + (source.isPipeline ? "a pipeline's" : "a recorded log's") + " is gone",
                    at: expectedNode?.location(ofKey: "state") ?? node.location,
                    hint: "check a live case's state (agent: or command:), or drop state"))
        }
        if userNode == nil, let expected, !expected.turns.isEmpty, let source, source.isLive {
            errors.errors.append(
                ConfigError(
                    .invalidValue, "\(name) expects turns, and its runs are no conversations: it gives no user",
                    at: expectedNode?.location(ofKey: "turns") ?? node.location,
                    hint: "add user: (docs/conversations.md), or move the expectations out of turns"))
        }
        if let kappaNode, let expected, expected.allRubrics.isEmpty {
            errors.errors.append(
                ConfigError(
                    .invalidValue, "\(name) has judgeMinKappa but no model-graded expectation: there is no judge to hold to it",
                    at: kappaNode.location, hint: "add answer: {rubric} or arguments: {tool: {rubric}}, or drop judgeMinKappa"))
        }
        if let policyNode, let source {
            switch source {
            case .recorded, .command: break
            case .live, .defaultAgent, .pipeline:
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(name) has policy, which audits runs that had no gate: recorded logs and command cases",
                        at: policyNode.location, hint: "an agent file's runs are gated by the policy in the agent file; drop policy here"))
            }
        }
        if let expected, let source {
            errors.collect { () throws(ConfigError) in
                try checkTarget(expected, of: source, case: name, at: expectedNode?.location ?? node.location)
            }
        }
        guard errors.errors.count == before || keepingPartial, let id, let source, let expected else { return nil }
        var evalCase = EvalCase(
            id: id, description: description, tags: tags, input: input, source: source, expected: expected, location: node.location)
        evalCase.allowsUnfinished = allowsUnfinished
        evalCase.allowsReusedCallIds = allowsReusedCallIds
        if let minPassRate { evalCase.minPassRate = minPassRate }
        // Recorded logs with a minPassRate are repeated attempts of one agent (recorded N times,
        // as the pytest marker does): a mix of passes and failures is graded at that rate.
        if minPassRate != nil, case .recorded = source { evalCase.logsAreRepeats = true }
        evalCase.quarantine = quarantine
        evalCase.judgeMinKappa = judgeMinKappa
        evalCase.node = node
        evalCase.cassette = cassette.map { resolve($0, from: directory) }
        evalCase.policy = policy
        evalCase.user = user
        if pipeline != nil { evalCase.pipelineInput = inputNode?.json }
        return evalCase
    }

    /// A case's `policy:` file (as `mcp-proxy --policy` and `audit` read it); nil when it cannot
    /// be read, with its errors, each at its own line, in `errors`.
    static func readPolicy(_ path: String, errors: inout ConfigErrors) -> CasePolicy? {
        do throws(ConfigErrors) {
            let file = try PolicyFile.load(path: path, for: .callChecker(what: "a case's policy:"))
            guard let bytes = FileManager.default.contents(atPath: path) else { return nil }
            return CasePolicy(path: path, file: file, digest: ContentHash.sha256Hex(bytes))
        } catch {
            errors.errors.append(contentsOf: error.errors)
            return nil
        }
    }

    /// A command case's program (`command:`) and the keys that go with it (`upstream:`,
    /// `timeout:`); nil when they have errors, which go to `errors` (all of them are read).
    static func readCommand(_ node: ConfigNode, fields: inout MappingReader, directory: String, errors: inout ConfigErrors)
        -> ExternalCommand?
    {
        let before = errors.errors.count
        let arguments = errors.collect { () throws(ConfigError) -> [String] in
            guard case .sequence(let items) = node.content else {
                throw ConfigError(
                    .invalidValue, "command must be a list: the program, then its arguments", at: node.location,
                    hint: "write it as [python3, agents/refund.py, \"{input}\"]; nothing is run through a shell")
            }
            guard !items.isEmpty else {
                throw ConfigError(.invalidValue, "command is empty: give the program to run, then its arguments", at: node.location)
            }
            var arguments: [String] = []
            for (index, item) in items.enumerated() {
                if case .mapping(let pairs) = item.content, pairs.count == 1, pairs[0].key == "input" {
                    throw ConfigError(
                        .invalidValue, "command[\(index)] is {input} unquoted, which YAML reads as a mapping", at: item.location,
                        hint: "quote it: \"{input}\"")
                }
                arguments.append(try item.string("command[\(index)]"))
            }
            guard !arguments[0].isEmpty else {
                throw ConfigError(.invalidValue, "command[0], the program, is empty", at: items[0].location)
            }
            return arguments
        }
        var upstreams: [String: String] = [:]
        if let upstreamNode = fields.optional("upstream"),
            var providers = errors.collect({ () throws(ConfigError) in try upstreamNode.mapping("upstream") })
        {
            for provider in ["openai", "anthropic"] {
                guard let urlNode = providers.optional(provider) else { continue }
                errors.collect { () throws(ConfigError) in
                    let url = try urlNode.nonEmptyString("upstream.\(provider)")
                    guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                        throw ConfigError(
                            .invalidValue, "upstream.\(provider) must be an http or https URL, found \"\(url)\"", at: urlNode.location,
                            hint: provider == "openai" ? "e.g. http://127.0.0.1:8000/v1" : "e.g. https://api.anthropic.com")
                    }
                    upstreams[provider] = url
                }
            }
            errors.errors.append(contentsOf: providers.unknownKeys())
        }
        var timeout = ExternalCommand.defaultTimeoutSeconds
        if let timeoutNode = fields.optional("timeout") {
            errors.collect { () throws(ConfigError) in timeout = try timeoutNode.int("timeout (seconds)", in: 1...86_400) }
        }
        var environment: [(name: String, value: String)] = []
        if let envNode = fields.optional("env"), let pairs = errors.collect({ () throws(ConfigError) in try envNode.mapping("env").pairs })
        {
            for pair in pairs {
                errors.collect { () throws(ConfigError) in
                    guard ShellWords.isVariableName(pair.key[...]) else {
                        throw ConfigError(
                            .invalidValue, "env \"\(pair.key)\" is not a variable name", at: pair.keyLocation,
                            hint: "letters, digits and _, not starting with a digit, e.g. OPENAI_BASE_URL")
                    }
                    guard case .scalar(let value, _) = pair.value.content else {
                        throw ConfigError(.invalidValue, "env \(pair.key) must be a string or a number", at: pair.value.location)
                    }
                    environment.append((pair.key, value))
                }
            }
        }
        let agentName = errors.collect { () throws(ConfigError) in try fields.optional("name")?.nonEmptyString("name") } ?? nil
        guard errors.errors.count == before, let arguments else { return nil }
        var command = ExternalCommand(arguments: arguments, directory: directory, upstreams: upstreams, timeoutSeconds: timeout)
        command.environment = environment
        command.agentName = agentName
        return command
    }

    /// The expectations; nil when they have errors, which go to `errors` (every one is read),
    /// unless `keepingPartial`: then the ones that could be read.
    static func readExpectations(
        _ node: ConfigNode, case name: String, directory: String, errors: inout ConfigErrors, keepingPartial: Bool = false
    ) -> Expectations? {
        let before = errors.errors.count
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("expected") }) else { return nil }
        var expected = readRunExpectations(&fields, directory: directory, errors: &errors)
        let pipelineNode = fields.optional("pipeline")
        let tasksNode = fields.optional("tasks")
        if pipelineNode != nil || tasksNode != nil {
            expected.pipeline = readPipelineExpectations(pipelineNode, tasks: tasksNode, directory: directory, errors: &errors)
        }
        errors.errors.append(contentsOf: fields.unknownKeys())
        guard errors.errors.count == before || keepingPartial else { return nil }
        if expected.count == 0 {
            errors.errors.append(
                ConfigError(
                    .invalidValue, "\(name) expects nothing: a case with no expectation would pass any run", at: node.location,
                    hint: "add at least one expectation, such as toolsCalled, toolsNotCalled or stopReason"))
            return nil
        }
        return expected
    }

    /// A case checks a run or a pipeline: its expectations must fit its source.
    static func checkTarget(_ expected: Expectations, of source: EvalCase.Source, case name: String, at place: SourceLocation)
        throws(ConfigError)
    {
        switch source {
        case .pipeline:
            guard expected.runKeyCount == 0 else {
                throw ConfigError(
                    .invalidValue, "\(name) runs a pipeline but expects run-level facts (toolsCalled, stopReason…) of it", at: place,
                    hint: "put pipeline facts under expected.pipeline, and a task's trajectory under expected.tasks.<task>")
            }
        case .live, .defaultAgent, .command:
            guard expected.pipeline == nil else {
                throw ConfigError(
                    .invalidValue, "\(name) runs an agent but has pipeline expectations (pipeline:, tasks:)", at: place,
                    hint: "use pipeline: <file> to run a pipeline, or logs: for recorded pipeline logs")
            }
        case .recorded:
            guard expected.pipeline == nil || expected.runKeyCount == 0 else {
                throw ConfigError(
                    .invalidValue, "\(name) mixes run-level expectations with pipeline ones", at: place,
                    hint: "a task's trajectory goes under expected.tasks.<task>")
            }
        }
    }

    /// The run-level keys of `fields` (the trajectory of one run), one `ExpectationKind` after
    /// another; errors go to `errors`.
    static func readRunExpectations(_ fields: inout MappingReader, directory: String, errors: inout ConfigErrors) -> Expectations {
        var expected = Expectations()
        for kind in ExpectationKind.all {
            guard let node = fields.optional(kind.key) else { continue }
            if let empty = vacuousPart(of: node, key: kind.key) {
                // Beside another expectation it passed without a word, checking nothing.
                errors.errors.append(emptyExpectation(empty))
                continue
            }
            errors.collect { () throws(ConfigError) in try kind.read(node, &expected, directory) }
        }
        return expected
    }

    /// The error for an expectation that checks nothing (`vacuousPart`), named under `within`.
    static func emptyExpectation(_ empty: (name: String, node: ConfigNode), within: String = "") -> ConfigError {
        ConfigError(
            .invalidValue, "\(within)\(empty.name) is empty: it checks nothing, and every run passes it", at: empty.node.location,
            hint: "list what it should check, or remove it")
    }

    /// The part of expectation `key`'s value that is an empty list or mapping, so checks nothing:
    /// the value itself, or a member of it (`verdicts: {denied: []}`, `answer: {contains: []}`).
    /// `toolsAllowed: []` says something (no tool may be called), and so does a `sequence` of no
    /// calls in a mode that forbids others (its reader judges it); `arguments` and `state` hold
    /// matchers and values below their first level, which are not judged here.
    static func vacuousPart(of node: ConfigNode, key: String) -> (name: String, node: ConfigNode)? {
        func isEmpty(_ node: ConfigNode) -> Bool {
            switch node.content {
            case .sequence(let items): items.isEmpty
            case .mapping(let pairs): pairs.isEmpty
            case .scalar: false
            }
        }
        if isEmpty(node) { return key == "toolsAllowed" || key == "sequence" ? nil : (key, node) }
        guard case .mapping(let pairs) = node.content, !["state", "arguments", "sequence"].contains(key) else { return nil }
        return pairs.first { isEmpty($0.value) }.map { ("\(key).\($0.key)", $0.value) }
    }

    /// `arguments:` — per tool, a matcher (and a rubric), or a list of matchers, one per call.
    static func readArgumentExpectations(_ node: ConfigNode, _ expected: inout Expectations, directory: String) throws(ConfigError) {
        let tools = try node.mapping("arguments")
        for pair in tools.pairs {
            if case .sequence(let items) = pair.value.content {
                // One matcher per call, in the order the calls ran.
                guard !items.isEmpty else {
                    throw ConfigError(
                        .invalidValue, "arguments of \(pair.key) is an empty list: give a matcher per call, in order",
                        at: pair.value.location)
                }
                var matchers: [ArgumentMatcher] = []
                for (index, item) in items.enumerated() {
                    matchers.append(try readMatcher(item, what: "arguments of \(pair.key), call \(index + 1)"))
                }
                expected.argumentsByCall.append((pair.key, matchers))
                continue
            }
            let (matcher, rubric) = try readArguments(pair.value, tool: pair.key, directory: directory)
            if let matcher { expected.arguments.append((pair.key, matcher)) }
            if let rubric { expected.argumentRubrics.append(ArgumentRubric(tool: pair.key, rubric: rubric)) }
        }
    }

    /// `answer:` — a text it contains, or a mapping of contains, matches, similarTo (and min) and a rubric.
    /// `state:` — a command that prints the environment's final state as JSON, and the state it
    /// must be: `equals:` a gold JSON file (canonical JSON, compared exactly) or `match:` a matcher.
    static func readStateExpectation(_ node: ConfigNode, _ expected: inout Expectations, directory: String) throws(ConfigError) {
        var fields = try node.mapping("state")
        let commandNode = try fields.required("command", hint: "the command that prints the environment's state as JSON")
        let command = try commandNode.strings("state.command")
        guard !command.isEmpty else {
            throw ConfigError(.invalidValue, "state.command is empty: give the program and its arguments", at: commandNode.location)
        }
        let equals = fields.optional("equals")
        let match = fields.optional("match")
        let matcher: ArgumentMatcher
        let described: String
        switch (equals, match) {
        case (let file?, nil):
            let named = try file.nonEmptyString("state.equals")
            let path = resolve(named, from: directory)
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigError(
                    .unreadable, "state.equals: \(path) does not exist", at: file.location,
                    hint: "a JSON file of the state the run must leave; the path starts from the case file's folder")
            }
            let gold: JSONValue
            do {
                gold = try JSONParser.parse(Array(data))
            } catch {
                throw ConfigError(.invalidValue, "state.equals: \(path) is not JSON: \(error)", at: file.location)
            }
            matcher = ArgumentMatcher(mode: .exact, expected: gold)
            described = "equals \(named)"
        case (nil, let node?):
            matcher = try readMatcher(node, what: "state.match")
            described = "meets \(matcher)"
        case (nil, nil):
            throw ConfigError(.missingKey, "state needs equals (a gold JSON file) or match (a matcher)", at: node.location)
        default:
            throw ConfigError(.invalidValue, "state has both equals and match; give one", at: node.location)
        }
        try fields.finish()
        expected.state = StateExpectation(command: command, directory: directory, matcher: matcher, expected: described)
    }

    /// `turns:` — per user turn of a conversation (`3: {toolsCalled: [lookup_order]}`), what the
    /// agent did within it: the keys of `ExpectationKind.perTurnKeys`.
    static func readTurnExpectations(_ node: ConfigNode, _ expected: inout Expectations, directory: String) throws(ConfigError) {
        for pair in try node.mapping("turns").pairs {
            guard let turn = Int(pair.key), turn >= 1 else {
                throw ConfigError(
                    .invalidValue, "turns has the key \"\(pair.key)\", which is no user turn (1 for the first, 2, …)",
                    at: pair.value.location, hint: "for example turns: {2: {toolsCalled: [lookup_order]}}")
            }
            var fields = try pair.value.mapping("turns.\(turn)")
            var inTurn = Expectations()
            for kind in ExpectationKind.all {
                guard let value = fields.optional(kind.key) else { continue }
                guard ExpectationKind.perTurnKeys.contains(kind.key) else {
                    throw ConfigError(
                        .invalidValue,
                        "turns.\(turn).\(kind.key): a turn has no \(kind.key) of its own; the run's expected.\(kind.key) says it",
                        at: value.location,
                        hint: "a turn takes \(ExpectationKind.perTurnKeys.sorted().joined(separator: ", "))")
                }
                if let empty = vacuousPart(of: value, key: kind.key) { throw emptyExpectation(empty, within: "turns.\(turn).") }
                try kind.read(value, &inTurn, directory)
            }
            try fields.finish()
            if !inTurn.rubrics.isEmpty {
                throw ConfigError(
                    .invalidValue, "turns.\(turn) has a rubric: a turn is checked by its trajectory; a judge grades the run's",
                    at: pair.value.location)
            }
            if inTurn.count == 0 {
                throw ConfigError(.invalidValue, "turns.\(turn) expects nothing", at: pair.value.location)
            }
            expected.turns.append((turn, inTurn))
        }
    }

    static func readAnswerExpectations(_ node: ConfigNode, _ expected: inout Expectations, directory: String) throws(ConfigError) {
        if case .scalar = node.content {
            let text = try node.string("answer")
            guard !text.isEmpty else {
                throw ConfigError(
                    .invalidValue, "answer is empty: every answer contains it", at: node.location,
                    hint: "give words the answer must hold, or remove the key")
            }
            expected.answerContains = [text]
            return
        }
        var answer = try node.mapping("answer")
        let contains = answer.optional("contains")
        expected.answerContains = try contains?.strings("answer.contains") ?? []
        if let empty = expected.answerContains.firstIndex(of: ""), let contains {
            var place = contains.location
            if case .sequence(let items) = contains.content, items.indices.contains(empty) { place = items[empty].location }
            throw ConfigError(.invalidValue, "answer.contains[\(empty)] is empty: every answer contains it", at: place)
        }
        if let pattern = answer.optional("matches") {
            expected.answerMatches = try pattern.regex("answer.matches")
            if try pattern.string("answer.matches").isEmpty {
                throw ConfigError(.invalidValue, "answer.matches is empty: it matches every answer", at: pattern.location)
            }
        }
        if let reference = answer.optional("similarTo") {
            let text = try reference.string("answer.similarTo")
            guard !AnswerSimilarity.tokens(text).isEmpty else {
                throw ConfigError(
                    .invalidValue,
                    "answer.similarTo has no word to compare with: the score counts the words (letters and digits) two answers share",
                    at: reference.location, hint: "give the reference answer in words, or check the answer with contains: or matches:")
            }
            var least = 0.8
            if let node = answer.optional("min") {
                least = try node.double("answer.min")
                guard (0...1).contains(least) else {
                    throw ConfigError(.invalidValue, "answer.min must be from 0 to 1, found \(least)", at: node.location)
                }
            }
            expected.answerSimilarTo = (text, least)
        } else if let least = answer.optional("min") {
            throw ConfigError(
                .invalidValue, "answer.min is the least similarity to answer.similarTo, which is not given", at: least.location)
        }
        expected.answerRubric = try readRubric(&answer, what: "answer", directory: directory)
        try answer.finish()
    }

    /// `expected.pipeline` and `expected.tasks`; errors go to `errors`.
    static func readPipelineExpectations(
        _ node: ConfigNode?, tasks tasksNode: ConfigNode?, directory: String, errors: inout ConfigErrors
    )
        -> PipelineExpectations
    {
        var expected = PipelineExpectations()
        if let node, var fields = errors.collect({ () throws(ConfigError) in try node.mapping("expected.pipeline") }) {
            for kind in PipelineExpectationKind.all {
                guard let value = fields.optional(kind.key) else { continue }
                // `outputs` judges an empty matcher itself ("expects nothing").
                if kind.key != "outputs", let empty = vacuousPart(of: value, key: kind.key) {
                    errors.errors.append(emptyExpectation(empty, within: "pipeline."))
                    continue
                }
                errors.collect { () throws(ConfigError) in try kind.read(value, &expected) }
            }
            errors.errors.append(contentsOf: fields.unknownKeys())
            if expected.noBreakerOpened, !expected.breakersOpened.isEmpty {
                errors.errors.append(
                    ConfigError(.invalidValue, "pipeline.noBreakerOpened contradicts pipeline.breakersOpened", at: node.location))
            }
        }
        guard let tasksNode, let tasks = errors.collect({ () throws(ConfigError) in try tasksNode.mapping("expected.tasks") }) else {
            return expected
        }
        for pair in tasks.pairs {
            let what = "tasks.\(pair.key)"
            guard var fields = errors.collect({ () throws(ConfigError) in try pair.value.mapping(what) }) else { continue }
            var task = TaskExpectations(task: pair.key, location: pair.keyLocation)
            for kind in TaskExpectationKind.all {
                guard let value = fields.optional(kind.key) else { continue }
                errors.collect { () throws(ConfigError) in try kind.read(value, &task, what) }
            }
            let run = readRunExpectations(&fields, directory: directory, errors: &errors)
            if run.state != nil {
                // A task's child run has no environment of its own that a command could read afterwards.
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(what).state: a pipeline task's state cannot be read after the task",
                        at: pair.value.location(ofKey: "state") ?? pair.keyLocation, hint: "drop state"))
            }
            if run.count > 0 { task.run = run }
            errors.errors.append(contentsOf: fields.unknownKeys(in: what))
            if task.count == 0, fields.unknownKeys().isEmpty {
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "\(what) expects nothing", at: pair.keyLocation,
                        hint: "give it status, retries, output or trajectory expectations (toolsCalled, stopReason…)"))
            }
            expected.tasks.append(task)
        }
        return expected
    }

    static func readSequence(_ node: ConfigNode) throws(ConfigError) -> SequenceExpectation {
        let sequence: SequenceExpectation
        // A plain list is an in-order subsequence: the common case.
        if case .sequence = node.content {
            sequence = SequenceExpectation(mode: .inOrder, calls: try readCalls(node))
        } else {
            var fields = try node.mapping("sequence")
            let mode = try mode(
                fields.required("mode", hint: "strict, unordered, superset, subset or in_order"), what: "sequence.mode",
                synonyms: SequenceExpectation.Mode.synonyms)
            let calls = try readCalls(fields.required("calls"))
            try fields.finish()
            sequence = SequenceExpectation(mode: mode, calls: calls)
        }
        // No calls in order, or in a superset: every run holds the empty sequence, so it would
        // pass any run. (strict, unordered and subset with no calls expect a run that called none.)
        if sequence.calls.isEmpty && (sequence.mode == .inOrder || sequence.mode == .superset) {
            throw ConfigError(
                .invalidValue, "sequence (\(sequence.mode.rawValue)) with no calls expects nothing: every run holds the empty sequence",
                at: node.location, hint: "list the calls, or write mode: strict with calls: [] to expect a run that called no tool")
        }
        return sequence
    }

    /// A mode by its name or one of its synonyms.
    static func mode<Mode: RawRepresentable & CaseIterable>(_ node: ConfigNode, what: String, synonyms: [String: Mode]) throws(ConfigError)
        -> Mode where Mode.RawValue == String
    {
        if case .scalar = node.content, let text = try? node.string(what), let mode = synonyms[text] { return mode }
        return try node.choice(what)
    }

    static func readCalls(_ node: ConfigNode) throws(ConfigError) -> [CallPattern] {
        var calls: [CallPattern] = []
        for (index, item) in try node.list("sequence.calls").enumerated() {
            if case .scalar = item.content {
                calls.append(CallPattern(tool: try item.name("sequence.calls[\(index)]"), location: item.location))
                continue
            }
            var fields = try item.mapping("sequence.calls[\(index)]")
            let tool = try fields.required("tool").name("sequence.calls[\(index)].tool")
            let arguments = try fields.optional("arguments").map { node throws(ConfigError) in
                try readMatcher(node, what: "sequence.calls[\(index)].arguments")
            }
            try fields.finish()
            calls.append(CallPattern(tool: tool, arguments: arguments, location: item.location))
        }
        return calls
    }

    static let matcherKeys = ["mode", "match", "paths", "ignoreKeys"]

    /// A rubric under `fields` (`rubric`, and `model` for its judge); nil when there is none.
    static func readRubric(_ fields: inout MappingReader, what: String, directory: String) throws(ConfigError) -> Rubric? {
        let modelNode = fields.optional("model")
        guard let node = fields.optional("rubric") else {
            if let modelNode {
                throw ConfigError(
                    .invalidValue, "\(what).model names a judge, but there is no \(what).rubric for it to grade against",
                    at: modelNode.location)
            }
            return nil
        }
        let text = try node.nonEmptyString("\(what).rubric")
        let model = try modelNode.map { node throws(ConfigError) in
            try ModelSource.read(node, what: "\(what).model", directory: directory)
        }
        return Rubric(text: text, model: model, location: node.location)
    }

    /// What the arguments of a tool's calls must be: a matcher (`{mode, match, paths,
    /// ignoreKeys}` or a plain mapping of expected arguments), a rubric for a judge
    /// (`{rubric, model}`), or both in one mapping.
    static func readArguments(_ node: ConfigNode, tool: String, directory: String) throws(ConfigError) -> (ArgumentMatcher?, Rubric?) {
        let what = "arguments of \(tool)"
        guard case .mapping(let pairs) = node.content, pairs.contains(where: { $0.key == "rubric" }) else {
            return (try readMatcher(node, what: what), nil)
        }
        var fields = try node.mapping(what)
        let rubric = try readRubric(&fields, what: "arguments.\(tool)", directory: directory)
        guard fields.pairs.contains(where: { matcherKeys.contains($0.key) }) else {
            try fields.finish()
            return (nil, rubric)
        }
        return (try readMatcher(&fields, node: node, what: what), rubric)
    }

    /// A matcher: `{mode, match, paths, ignoreKeys}`, or a plain mapping of expected
    /// arguments (a superset match: the call has at least these).
    /// `readMatcher`, refusing a matcher that every object holds (`{}`): an output expectation
    /// that expects nothing would pass a pipeline that failed.
    static func readOutputMatcher(_ node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher {
        let matcher = try readMatcher(node, what: what)
        if matcher.mode == .superset || matcher.mode == .ignore, matcher.paths.isEmpty, matcher.expected.objectValue?.isEmpty ?? false {
            throw ConfigError(
                .invalidValue, "\(what) expects nothing: every output holds {}", at: node.location,
                hint: "name the members the output must have, e.g. {labels: {T-1: billing}}, or drop it")
        }
        return matcher
    }

    static func readMatcher(_ node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher {
        var fields = try node.mapping(what)
        guard fields.pairs.contains(where: { matcherKeys.contains($0.key) }) else {
            return ArgumentMatcher(mode: .superset, expected: node.json)
        }
        return try readMatcher(&fields, node: node, what: what)
    }

    /// The matcher keys of `fields` (`mode`, `match`, `paths`, `ignoreKeys`); no other key may
    /// be left unread.
    static func readMatcher(_ fields: inout MappingReader, node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher {
        let mode =
            try fields.optional("mode").map { node throws(ConfigError) in
                try Self.mode(node, what: "\(what) mode", synonyms: ArgumentMatcher.Mode.synonyms)
            } ?? .superset
        let match = fields.optional("match")
        if let match, case .mapping = match.content {
        } else if let match {
            throw match.typeError("\(what) match", expected: "a mapping of arguments")
        }
        var paths: [(String, ArgumentMatcher.ValueTest)] = []
        if let node = fields.optional("paths") {
            for pair in try node.mapping("\(what) paths").pairs {
                paths.append((pair.key, try readTest(pair.value, what: "\(what) paths.\(pair.key)")))
            }
        }
        let ignored = try fields.optional("ignoreKeys")?.strings("\(what) ignoreKeys") ?? []
        try fields.finish()
        if mode == .exact || mode == .subset, match == nil {
            throw ConfigError(.missingKey, "\(what) mode \(mode.rawValue) needs match (the expected arguments)", at: node.location)
        }
        return ArgumentMatcher(mode: mode, expected: match?.json ?? .object(JSONObject()), paths: paths, ignoredKeys: ignored)
    }

    static func readTest(_ node: ConfigNode, what: String) throws(ConfigError) -> ArgumentMatcher.ValueTest {
        guard case .mapping(let pairs) = node.content else { return .equals(node.json) }
        var fields = try node.mapping(what)
        if let value = fields.optional("equals") {
            try fields.finish()
            return .equals(value.json)
        }
        if let value = fields.optional("regex") {
            let pattern = try value.regex("\(what) regex")
            try fields.finish()
            return .regex(pattern)
        }
        if let value = fields.optional("exists") {
            let flag = try value.bool("\(what) exists")
            try fields.finish()
            return .exists(flag)
        }
        if let value = fields.optional("in") {
            let options = try value.list("\(what) in").map(\.json)
            try fields.finish()
            return .oneOf(options)
        }
        let low = try fields.optional("min")?.double("\(what) min")
        let high = try fields.optional("max")?.double("\(what) max")
        try fields.finish()
        guard low != nil || high != nil else {
            throw ConfigError(
                .invalidValue,
                "\(what) needs one of equals, regex, in, exists, or min/max (it has \(pairs.map(\.key).joined(separator: ", ")))",
                at: node.location)
        }
        return .range(min: low, max: high)
    }

    static func readRange(_ node: ConfigNode, what: String) throws(ConfigError) -> CountRange {
        if case .scalar = node.content {
            let count = try node.int(what, in: 0...Int.max)
            return CountRange(min: count, max: count)
        }
        var fields = try node.mapping(what)
        let range = CountRange(
            min: try fields.optional("min")?.int("\(what).min", in: 0...Int.max) ?? 0,
            max: try fields.optional("max")?.int("\(what).max", in: 0...Int.max))
        try fields.finish()
        if let max = range.max, max < range.min {
            throw ConfigError(.invalidValue, "\(what) max (\(max)) is below min (\(range.min))", at: node.location)
        }
        if range.min == 0 && range.max == nil {
            // A count is never below 0: beside another expectation it passed without a word.
            throw ConfigError(
                .invalidValue, "\(what) asks for at least 0 and sets no max: it checks nothing, and every run passes it",
                at: node.location, hint: "give a min above 0 or a max, or remove it")
        }
        return range
    }
}
