public import AgentRuntime
public import ConfigFile
import Foundation
public import TraceCore

/// Reads pipeline files (YAML or JSON, docs/pipelines.md), checked completely before anything
/// runs: every key, every task's agent file, inputs that name upstream tasks, recovery
/// policies, breakers, and the graph (cycles, unknown tasks). Errors give file:line:column,
/// all of them at once.
public enum PipelineFile {
    /// Loads the file at `path`; `loadAgent` reads a task's agent file (the command line passes
    /// its model and tool-server options through it).
    public static func load(
        path: String,
        loadAgent: @escaping (String) throws(ConfigError) -> Agent = { path throws(ConfigError) in try AgentFile.load(path: path) }
    ) throws(ConfigErrors) -> PipelineDefinition {
        let (root, bytes): (ConfigNode, [UInt8])
        do {
            (root, bytes) = try ConfigNode.loadWithBytes(path: path)
        } catch {
            throw ConfigErrors([error])
        }
        let directory = (path as NSString).deletingLastPathComponent
        var reader = Reader(directory: directory.isEmpty ? "." : directory, loadAgent: loadAgent)
        let definition = reader.read(root, path: path, digest: ContentHash.sha256(bytes))
        guard let definition, reader.errors.errors.isEmpty else {
            throw reader.errors.inFileOrder(of: root.location.path)
        }
        return definition
    }

    /// Task ids: what file names and references can hold.
    static func isValidId(_ id: String) -> Bool {
        !id.isEmpty && !id.hasPrefix("$") && id.allSatisfy { $0.isLetter || $0.isNumber || "-_".contains($0) }
    }

    private struct Reader {
        let directory: String
        let loadAgent: (String) throws(ConfigError) -> Agent
        var errors = ConfigErrors([])

        mutating func read(_ root: ConfigNode, path: String, digest: String) -> PipelineDefinition? {
            guard var file = errors.collect({ () throws(ConfigError) in try root.mapping("the pipeline file") }) else { return nil }
            let name = errors.collect { () throws(ConfigError) in
                try file.required("pipeline", hint: "name the pipeline: pipeline: my-pipeline").nonEmptyString("pipeline")
            }
            _ = errors.collect { () throws(ConfigError) in try file.optional("description")?.string("description") }
            let jobs = errors.collect { () throws(ConfigError) in try file.optional("jobs")?.int("jobs", in: 1...256) } ?? nil
            let input = file.optional("input")?.json ?? .object(JSONObject())
            let breakers = readBreakers(file.optional("breakers"))
            var tasks: [PipelineTask] = []
            var taskNodes: [String: ConfigNode] = [:]
            if let list = errors.collect({ () throws(ConfigError) in
                try file.required("tasks", hint: "a pipeline runs a list of tasks").list("tasks")
            }) {
                if list.isEmpty { errors.errors.append(ConfigError(.invalidValue, "tasks is empty", at: root.location)) }
                for (index, node) in list.enumerated() {
                    guard let task = readTask(node, index: index, breakers: breakers) else { continue }
                    if taskNodes[task.id] != nil {
                        errors.errors.append(
                            ConfigError(
                                .invalidValue, "a second task is named \"\(task.id)\"", at: node.location, hint: "task ids must be unique"))
                        continue
                    }
                    taskNodes[task.id] = node
                    tasks.append(task)
                }
            }
            let outputsNode = file.optional("outputs")
            let outputs = errors.collect { () throws(ConfigError) in try outputsNode?.names("outputs") } ?? nil
            errors.errors += file.unknownKeys()
            guard let name else { return nil }
            var definition = PipelineDefinition(
                name: name, path: path, fileDigest: digest, jobs: jobs, input: input, outputs: outputs ?? [], tasks: tasks,
                breakers: breakers, warnings: [])
            guard errors.errors.isEmpty else { return definition }
            PipelineGraph.check(&definition, outputsLocation: outputsNode?.location ?? root.location, errors: &errors)
            return definition
        }

        mutating func readBreakers(_ node: ConfigNode?) -> [String: BreakerSettings] {
            guard let node, let mapping = errors.collect({ () throws(ConfigError) in try node.mapping("breakers") }) else { return [:] }
            var breakers: [String: BreakerSettings] = [:]
            for pair in mapping.pairs {
                let what = "breaker \"\(pair.key)\""
                let settings = errors.collect { () throws(ConfigError) -> BreakerSettings in
                    var fields = try pair.value.mapping(what)
                    let failures = try fields.required("failures", hint: "how many failures in the window open it").int(
                        "failures", in: 1...1_000_000)
                    let window = try fields.optional("window_ms")?.int("window_ms", in: 1...86_400_000) ?? 60_000
                    let open = try fields.optional("open_ms")?.int("open_ms", in: 0...86_400_000) ?? 30_000
                    try fields.finish()
                    return BreakerSettings(failures: failures, windowMs: window, openMs: open)
                }
                if let settings { breakers[pair.key] = settings }
            }
            return breakers
        }

        mutating func readTask(_ node: ConfigNode, index: Int, breakers: [String: BreakerSettings]) -> PipelineTask? {
            let before = errors.errors.count
            guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("task \(index + 1)") }) else { return nil }
            let idNode = fields.optional("id")
            let id = errors.collect { () throws(ConfigError) -> String in
                guard let idNode else { throw ConfigError(.missingKey, "task \(index + 1) has no \"id\"", at: node.location) }
                let id = try idNode.nonEmptyString("id")
                guard PipelineFile.isValidId(id) else {
                    throw ConfigError(
                        .invalidValue, "task id \"\(id)\" may only hold letters, digits, \"-\" and \"_\"", at: idNode.location)
                }
                return id
            }
            let what = id.map { "task \"\($0)\"" } ?? "task \(index + 1)"
            let inputs = readInputs(fields.optional("inputs"), what: what)
            let after = errors.collect { () throws(ConfigError) in try fields.optional("after")?.names("after") } ?? nil
            let timeoutMs =
                errors.collect { () throws(ConfigError) in try fields.optional("timeout_ms")?.int("timeout_ms", in: 1...86_400_000) } ?? nil
            let validation = readValidation(fields.optional("validate"), what: what)
            let recoveryNode = fields.optional("on_error")
            let recovery = readRecovery(recoveryNode, what: what)
            // A skip's default is the task's output from then on: it holds to the output schema
            // as every output the task goes on with does (checked here, where it is written).
            if let schema = validation?.schema, let recovery, let recoveryNode {
                // Each default once (several error classes may skip with the same one), in a fixed order.
                var seen = Set<String>()
                let defaults = recovery.sorted { $0.key.rawValue < $1.key.rawValue }.compactMap(\.value.defaultOutput)
                for value in defaults where seen.insert(JSONWriter.encodeString(value)).inserted {
                    guard let violation = schema.violation(of: value, root: "default") else { continue }
                    errors.errors.append(
                        ConfigError(
                            .invalidValue, "\(what) skips with a default output that its validate.schema refuses: \(violation)",
                            at: recoveryNode.location, hint: "give a default the schema accepts, or let the task fail"))
                }
            }
            let breakerNode = fields.optional("breaker")
            let breaker =
                errors.collect { () throws(ConfigError) -> String? in
                    guard let breakerNode else { return nil }
                    let key = try breakerNode.nonEmptyString("breaker")
                    guard breakers[key] != nil else {
                        throw ConfigError(
                            .invalidValue, "\(what) names breaker \"\(key)\", which the file's breakers do not define",
                            at: breakerNode.location,
                            hint: breakers.isEmpty
                                ? "add breakers: {\(key): {failures: 3}}" : "defined: \(breakers.keys.sorted().joined(separator: ", "))")
                    }
                    return key
                } ?? nil
            let work = readWork(&fields, node: node, what: what, inputNames: inputs?.map(\.name) ?? [])
            errors.errors += fields.unknownKeys(in: what)
            guard errors.errors.count == before, let id, let inputs, let validation, let recovery, let work else { return nil }
            let needs = Set(inputs.compactMap(\.reference.task) + (after ?? []))
            return PipelineTask(
                id: id, work: work, inputs: inputs, needs: needs.sorted(), timeoutMs: timeoutMs, validation: validation, recovery: recovery,
                breaker: breaker, location: node.location)
        }

        mutating func readWork(_ fields: inout MappingReader, node: ConfigNode, what: String, inputNames: [String]) -> PipelineTask.Work? {
            let agentNode = fields.optional("agent")
            let commandNode = fields.optional("command")
            let goalNode = fields.optional("goal")
            let outputNode = fields.optional("output")
            switch (agentNode, commandNode) {
            case (nil, nil):
                errors.errors.append(
                    ConfigError(
                        .missingKey, "\(what) has neither \"agent\" nor \"command\"", at: node.location,
                        hint: "give an agent file or a command"))
                return nil
            case (.some, .some):
                errors.errors.append(ConfigError(.invalidValue, "\(what) has both \"agent\" and \"command\"; give one", at: node.location))
                return nil
            case (let agentNode?, nil):
                if let outputNode {
                    errors.errors.append(
                        ConfigError(.unknownKey, "\(what) is an agent task; \"output\" is for command tasks", at: outputNode.location))
                }
                let goal =
                    errors.collect { () throws(ConfigError) -> String? in
                        guard let goalNode else { return nil }
                        let goal = try goalNode.nonEmptyString("goal")
                        for placeholder in PipelineGoal.placeholders(in: goal) where !inputNames.contains(placeholder) {
                            throw ConfigError(
                                .invalidValue, "the goal of \(what) uses {{\(placeholder)}}, which is not one of its inputs",
                                at: goalNode.location,
                                hint: inputNames.isEmpty ? "declare it under inputs" : "its inputs: \(inputNames.joined(separator: ", "))")
                        }
                        return goal
                    } ?? nil
                return errors.collect { () throws(ConfigError) -> PipelineTask.Work in
                    let relative = try agentNode.nonEmptyString("agent")
                    let path = ConfigPath.resolve(relative, from: directory)
                    guard FileManager.default.fileExists(atPath: path) else {
                        throw ConfigError(.invalidValue, "the agent file \(path) of \(what) does not exist", at: agentNode.location)
                    }
                    return .agent(path: path, agent: try loadAgent(path), goal: goal)
                }
            case (nil, let commandNode?):
                if let goalNode {
                    errors.errors.append(
                        ConfigError(.unknownKey, "\(what) is a command task; \"goal\" is for agent tasks", at: goalNode.location))
                }
                let isText = errors.collect { () throws(ConfigError) -> Bool in
                    guard let outputNode else { return false }
                    let format = try outputNode.string("output")
                    guard format == "json" || format == "text" else {
                        throw ConfigError(
                            .invalidValue, "output is \"\(format)\"; it is json (the default) or text", at: outputNode.location)
                    }
                    return format == "text"
                }
                let arguments = errors.collect { () throws(ConfigError) in try Reader.readCommand(commandNode, "command") }
                guard let isText, let arguments else { return nil }
                return .command(arguments: arguments, directory: directory, isText: isText)
            }
        }

        static func readCommand(_ node: ConfigNode, _ what: String) throws(ConfigError) -> [String] {
            let arguments = try node.strings(what)
            guard let first = arguments.first, !first.isEmpty else {
                throw ConfigError(.invalidValue, "\(what) is empty; give the program and its arguments as a list", at: node.location)
            }
            return arguments
        }

        mutating func readInputs(_ node: ConfigNode?, what: String) -> [(name: String, reference: InputReference)]? {
            guard let node else { return [] }
            guard let mapping = errors.collect({ () throws(ConfigError) in try node.mapping("inputs of \(what)") }) else { return nil }
            var inputs: [(name: String, reference: InputReference)] = []
            for pair in mapping.pairs {
                let reference = errors.collect { () throws(ConfigError) -> InputReference in
                    let text = try pair.value.nonEmptyString("input \"\(pair.key)\"")
                    let parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
                    guard parts.allSatisfy({ !$0.isEmpty }) else {
                        throw ConfigError(
                            .invalidValue, "input \"\(pair.key)\" of \(what) is \"\(text)\", which has an empty part",
                            at: pair.value.location)
                    }
                    if parts[0] == "$input" { return InputReference(task: nil, path: Array(parts.dropFirst())) }
                    guard PipelineFile.isValidId(parts[0]) else {
                        throw ConfigError(
                            .invalidValue, "input \"\(pair.key)\" of \(what) is \"\(text)\"; it names a task (task or task.key) or $input",
                            at: pair.value.location)
                    }
                    return InputReference(task: parts[0], path: Array(parts.dropFirst()))
                }
                if let reference { inputs.append((pair.key, reference)) }
            }
            return inputs.sorted { $0.name < $1.name }
        }

        mutating func readValidation(_ node: ConfigNode?, what: String) -> OutputValidation? {
            let directory = self.directory
            guard let node else { return OutputValidation(directory: directory) }
            return errors.collect { () throws(ConfigError) -> OutputValidation in
                var fields = try node.mapping("validate of \(what)")
                var validation = OutputValidation(directory: directory)
                if let schemaNode = fields.optional("schema") {
                    do throws(SchemaError) {
                        validation.schema = try JSONSchema(json: schemaNode.json)
                    } catch {
                        throw ConfigError(
                            .invalidValue, "the output schema of \(what) is not valid: \(error.sentence)", at: schemaNode.location)
                    }
                }
                validation.command = try fields.optional("command").map { node throws(ConfigError) in
                    try Reader.readCommand(node, "validate.command")
                }
                try fields.finish()
                return validation
            }
        }

        mutating func readRecovery(_ node: ConfigNode?, what: String) -> [TaskErrorClass: RecoveryPolicy]? {
            guard let node else { return [:] }
            guard let mapping = errors.collect({ () throws(ConfigError) in try node.mapping("on_error of \(what)") }) else { return nil }
            var recovery: [TaskErrorClass: RecoveryPolicy] = [:]
            var any: RecoveryPolicy?
            for pair in mapping.pairs {
                let classes: [TaskErrorClass]
                if pair.key == "any" {
                    classes = []
                } else if let errorClass = TaskErrorClass(rawValue: pair.key) {
                    classes = [errorClass]
                } else {
                    let names = TaskErrorClass.allCases.map(\.rawValue) + ["any"]
                    errors.errors.append(
                        ConfigError(
                            .unknownKey, "on_error of \(what) has no error class \"\(pair.key)\"", at: pair.keyLocation,
                            hint: ConfigNode.suggestion(for: pair.key, among: names).map { "did you mean \"\($0)\"?" }
                                ?? "classes: \(names.joined(separator: ", "))"))
                    continue
                }
                guard
                    let policy = errors.collect({ () throws(ConfigError) in
                        try Reader.readPolicy(pair.value, what: "on_error.\(pair.key) of \(what)")
                    })
                else { continue }
                if classes.isEmpty { any = policy }
                for errorClass in classes { recovery[errorClass] = policy }
            }
            if let any {
                for errorClass in TaskErrorClass.allCases where recovery[errorClass] == nil { recovery[errorClass] = any }
            }
            return recovery
        }

        static func readPolicy(_ node: ConfigNode, what: String) throws(ConfigError) -> RecoveryPolicy {
            var fields = try node.mapping(what)
            var policy = RecoveryPolicy()
            policy.retries = try fields.optional("retry")?.int("retry", in: 0...100) ?? 0
            policy.backoffMs = try fields.optional("backoff_ms")?.int("backoff_ms", in: 0...3_600_000) ?? 100
            policy.maxBackoffMs = try fields.optional("max_backoff_ms")?.int("max_backoff_ms", in: 0...3_600_000) ?? 30_000
            let thenNode = fields.optional("then")
            policy.then = try thenNode?.choice("then", as: TaskRecovery.Action.self) ?? .fail
            if policy.then == .retry, let thenNode {
                throw ConfigError(
                    .invalidValue, "then is what happens when no retry is left: fail, skip or fallback", at: thenNode.location)
            }
            let defaultNode = fields.optional("default")
            policy.defaultOutput = defaultNode?.json
            let fallbackNode = fields.optional("fallback")
            policy.fallback = try fallbackNode?.name("fallback")
            switch policy.then {
            case .skip where defaultNode == nil:
                throw ConfigError(
                    .missingKey, "\(what) skips but gives no default output", at: node.location,
                    hint: "add default: <the output to go on with>")
            case .fallback where fallbackNode == nil:
                throw ConfigError(
                    .missingKey, "\(what) routes to a fallback but names none", at: node.location, hint: "add fallback: <task id>")
            case .fail, .retry, .skip, .fallback:
                if let defaultNode, policy.then != .skip {
                    throw ConfigError(.invalidValue, "default is only used with then: skip", at: defaultNode.location)
                }
                if let fallbackNode, policy.then != .fallback {
                    throw ConfigError(.invalidValue, "fallback is only used with then: fallback", at: fallbackNode.location)
                }
            }
            try fields.finish()
            return policy
        }
    }
}

/// Goal templates of agent tasks: `{{name}}` is replaced by the input `name` (a string as it
/// is, anything else as canonical JSON).
public enum PipelineGoal {
    static func placeholders(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.range(of: "{{"), let close = rest[open.upperBound...].range(of: "}}") {
            names.append(rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces))
            rest = rest[close.upperBound...]
        }
        return names
    }

    /// The goal for `input` (the task's input object).
    public static func render(_ template: String?, input: JSONValue) -> String {
        guard let template else { return JSONWriter.encodeString(input) }
        var text = ""
        var rest = Substring(template)
        while let open = rest.range(of: "{{"), let close = rest[open.upperBound...].range(of: "}}") {
            text += rest[..<open.lowerBound]
            let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            switch input[name] {
            case .string(let value)?: text += value
            case let value?: text += JSONWriter.encodeString(value)
            case nil: text += ""
            }
            rest = rest[close.upperBound...]
        }
        return text + rest
    }
}
