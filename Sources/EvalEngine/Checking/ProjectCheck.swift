public import AgentRuntime
import ConfigFile
import Foundation
import Pipelines
import TraceCore
import TraceLog

/// Checks case files, agent files, model scripts and pipeline files without running anything
/// (`agent-eval check`; `agent-eval run` makes the same checks before it starts): every error
/// of every file with file:line:column, then what ties them together — the agent, pipeline
/// and logs a case names exist and load, and the tools and tasks its expectations name are
/// ones that agent, pipeline or log has.
///
/// ```swift
/// let report = ProjectCheck(options: ProjectCheck.Options()).check(paths: ["EvalCases"])
/// for file in report.files { print(file.path, file.problems.count) }
/// ```
public struct ProjectCheck: Sendable {
    public struct Options: Sendable {
        /// Model clients and the command line's `--model`/`--base-url`, for agent files.
        public var models = ModelOptions()
        /// The agent for cases that name neither an agent nor logs (`--agent`).
        public var defaultAgent: String?
        /// Read each recorded log's first event to check the tools a case names against the
        /// tools the run had. `run` leaves this off: it checks that after reading the logs.
        public var readsLogs = true
        /// The judge of rubrics that name none (`--judge-model`).
        public var judgeModel: ModelSource?
        /// The project's quarantine file, checked with the cases (`check(paths:)`): nil for
        /// `.agent-eval/quarantine.yaml` in the project root.
        public var quarantineFile: String?

        public init(
            models: ModelOptions = ModelOptions(), defaultAgent: String? = nil, readsLogs: Bool = true, judgeModel: ModelSource? = nil
        ) {
            self.models = models
            self.defaultAgent = defaultAgent
            self.readsLogs = readsLogs
            self.judgeModel = judgeModel
        }
    }

    public let options: Options

    public init(options: Options) {
        self.options = options
    }

    /// Checks every `.yaml`, `.yml` and `.json` file under the directories given and the files
    /// given by name, and the agent, pipeline and model files they name.
    public func check(paths: [String]) -> CheckReport {
        var session = Session(options: options)
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                session.problem(
                    in: path, .error,
                    EvalError(
                        .missingPath, "\(path) does not exist", location: SourceLocation(path: path), hint: "give files or directories"))
                continue
            }
            if isDirectory.boolValue {
                let files = EvalSuite.configFiles(under: path)
                for file in files { session.checkFile(file, isNamed: false) }
                // A folder with nothing agent-eval reads is not a folder that checked clean:
                // `run` on it stops too.
                if !files.contains(where: { session.report.hasChecked(ConfigPath.resolve($0, from: "")) }) {
                    session.problem(
                        in: path, .error,
                        EvalError(
                            .noCases,
                            "nothing to check under \(path): no case, agent, model script, pipeline or policy file (.yaml, .yml, .json)"
                                + (files.isEmpty ? "" : "; \(files.count) other file\(files.count == 1 ? " was" : "s were") skipped"),
                            location: SourceLocation(path: path), hint: "`agent-eval init` writes a project with cases to start from"))
                }
            } else {
                session.checkFile(path, isNamed: true)
            }
        }
        session.checkQuarantine(at: options.quarantineFile ?? QuarantineFile.defaultPath())
        return session.report
    }

    /// The checks `run` makes before anything runs, for the cases it will run: the agent,
    /// pipeline and logs each case names, and the tools and tasks it expects.
    public func check(cases: [EvalCase]) -> CheckReport {
        var session = Session(options: options)
        for evalCase in cases { session.crossCheck(evalCase) }
        return session.report
    }

    /// One pass over the files: what was loaded is kept, so a file several cases name is read
    /// and reported once.
    private struct Session {
        let options: Options
        var report = CheckReport()
        var agents: [String: Agent?] = [:]
        var pipelines: [String: PipelineDefinition?] = [:]
        var logTools: [String: [String]?] = [:]
        /// The tools of each agent and the tasks of each pipeline, by path, made once.
        var agentTools: [String: Names] = [:]
        var pipelineTasks: [String: Names] = [:]
        /// The files each log pattern matched: cases that share a pattern list its folder once.
        var expanded: [String: [String]] = [:]
        /// Quarantine files checked (the project's, and one named on the command line).
        var quarantinesChecked: Set<String> = []
        /// Where case files quarantine their own cases, by case id.
        var caseQuarantines: [String: SourceLocation] = [:]
        /// Case ids seen so far, for the rule `run` applies too (`EvalSuite.register`).
        var caseIds: [String: SourceLocation] = [:]
        /// Makes each judge once (a scripted one is read, an HTTP one needs its key).
        let judge: RubricJudge

        init(options: Options) {
            self.options = options
            judge = RubricJudge(factory: options.models.factory, defaultModel: options.judgeModel)
        }

        mutating func checkFile(_ named: String, isNamed: Bool) {
            let path = ConfigPath.resolve(named, from: "")
            let root: ConfigNode
            do {
                root = try ConfigNode.load(path: path)
            } catch {
                problem(in: path, .error, error)
                return
            }
            guard let kind = ConfigFileKind(of: root) else {
                if isNamed {
                    problem(
                        in: path, .error,
                        ConfigError(
                            .unknownKind,
                            "this is not a file agent-eval reads: it has no caseId or expected (a case), model (an agent), "
                                + "decisions or rules (a model script), pipeline and tasks (a pipeline), or policy (a policy file)",
                            at: root.location, hint: "docs/eval-cases.md, \"Which files are cases\", says how files are told apart"))
                } else {
                    report.note(path, kind: nil, summary: "skipped: not a case, agent, model script, pipeline or policy file")
                }
                return
            }
            switch kind {
            case .cases:
                do {
                    let cases = try EvalCaseFile.cases(in: root, path: path)
                    report.note(
                        path, kind: .cases, summary: cases.count == 1 ? "1 case" : "\(cases.count) cases",
                        cases: cases.map { CheckReport.ListedCase(id: $0.id, line: $0.location.line, tags: $0.tags) })
                    for evalCase in cases {
                        if let duplicate = EvalSuite.register(evalCase, in: &caseIds) {
                            problem(in: path, .error, duplicate)
                        } else {
                            crossCheck(evalCase)
                            if let entry = evalCase.quarantine {
                                checkExpiry(of: entry)
                                caseQuarantines[evalCase.id] = entry.location
                            }
                        }
                    }
                } catch {
                    report.note(path, kind: .cases, summary: nil)
                    for problem in error.errors { self.problem(in: path, .error, problem) }
                    // What ties the cases to other files is checked too, as far as they could
                    // be read: a misspelt tool shows in this round, not after the fix.
                    for evalCase in EvalCaseFile.partialCases(in: root, path: path) where EvalSuite.register(evalCase, in: &caseIds) == nil
                    {
                        crossCheck(evalCase)
                    }
                }
            case .agent:
                _ = agent(at: path)
            case .modelScript:
                do {
                    let script = try ScriptedModel.loadReportingAll(path: path)
                    report.note(
                        path, kind: .modelScript,
                        summary:
                            "model script \(script.name): \(count(script.decisions.count, "decision")), \(count(script.rules.count, "rule"))"
                    )
                } catch {
                    report.note(path, kind: .modelScript, summary: nil)
                    for problem in error.errors { self.problem(in: path, .error, problem) }
                }
            case .pipeline:
                _ = pipeline(at: path)
            case .quarantine:
                checkQuarantine(at: path)
            case .policy:
                // Its tool names are checked where the tools are known: against an agent's, a
                // run's (a case's policy:, audit) or a server's (mcp-proxy).
                do {
                    let file = try PolicyFile.load(path: path)
                    report.note(
                        path, kind: .policy,
                        summary: "policy \(file.policy.name): \(count(file.policy.rules.count, "rule")), "
                            + count(file.sideEffects.count, "side effect"))
                } catch {
                    report.note(path, kind: .policy, summary: nil)
                    for problem in error.errors { self.problem(in: path, .error, problem) }
                }
            }
        }

        /// The quarantine file: readable, every entry for a case the check saw (a warning
        /// otherwise: the case may be in a folder not checked), none past its date, and no case
        /// quarantined both there and in its own file.
        mutating func checkQuarantine(at named: String) {
            let path = ConfigPath.resolve(named, from: "")
            guard FileManager.default.fileExists(atPath: path), !quarantinesChecked.contains(path) else { return }
            quarantinesChecked.insert(path)
            let file: QuarantineFile
            do {
                file = try QuarantineFile.load(path: path)
            } catch {
                report.note(path, kind: .quarantine, summary: nil)
                for problem in error.errors { self.problem(in: path, .error, problem) }
                return
            }
            report.note(path, kind: .quarantine, summary: counted(file.entries.count, "quarantined case"))
            for entry in file.entries {
                checkExpiry(of: entry)
                if let own = caseQuarantines[entry.caseId] {
                    problem(
                        in: path, .error,
                        EvalError(
                            .badCase, "case \(entry.caseId) is quarantined both here and in its case file (\(own))",
                            location: entry.location,
                            hint: "keep one of the two entries; `run` refuses both"))
                }
                if caseIds[entry.caseId] == nil {
                    problem(
                        in: path, .warning,
                        EvalError(
                            .badCase, "the quarantine file names case \(entry.caseId), which no case file checked here has",
                            location: entry.location,
                            hint: "release the entry if the case is gone: agent-eval quarantine release \(entry.caseId)"))
                }
            }
        }

        /// An entry past its `until` date is an error: `run` fails the case until it is released
        /// or extended.
        mutating func checkExpiry(of entry: QuarantineEntry) {
            guard entry.isExpiredNow else { return }
            problem(
                in: entry.location.path, .error,
                EvalError(
                    .badCase, "the quarantine of case \(entry.caseId) ended on \(entry.until) (\(entry.sentence))",
                    location: entry.location,
                    hint:
                        "fix the case and end the quarantine (\(entry.releaseAdvice)), or extend until; `run` fails the case meanwhile"
                ))
        }

        /// The agent file at `path`, loaded and reported once; nil when it has errors.
        mutating func agent(at named: String) -> Agent? {
            let path = ConfigPath.resolve(named, from: "")
            if let known = agents[path] { return known }
            var loaded: Agent?
            do {
                let agent = try AgentFile.loadReportingAll(path: path, models: options.models)
                let servers = agent.toolServers.isEmpty ? "" : " and the tools of \(count(agent.toolServers.count, "MCP server"))"
                report.note(path, kind: .agent, summary: "agent \(agent.name), \(count(agent.tools.names.count, "tool"))\(servers)")
                loaded = agent
                if let variable = agent.apiKeyVariable, (ProcessInfo.processInfo.environment[variable] ?? "").isEmpty {
                    // Not an error: replaying from a cassette needs no key, and check runs nothing.
                    problem(
                        in: path, .warning,
                        ConfigError(
                            .invalidValue,
                            "agent \(agent.name)'s model reads its API key from \(variable), which is not set: "
                                + "its runs can only replay the model from a cassette",
                            at: agent.apiKeyLocation ?? SourceLocation(path: path),
                            hint: "export \(variable)=… for live runs; CI replays with --cassette DIR (--record none) and needs no key"))
                }
                // A scripted model's replies meet the agent's tools only when it runs: a
                // misspelt tool or arguments its schema refuses show here instead.
                if let script = agent.model as? ScriptedModel {
                    for rejected in script.rejectedReplies(tools: agent.tools, toolsMayJoin: !agent.toolServers.isEmpty) {
                        problem(
                            in: path, .warning,
                            ConfigError(
                                .invalidValue,
                                "\(rejected.place): agent \(agent.name) (\(path)) would reject this reply (\(rejected.invalid.kind.rawValue)): "
                                    + rejected.invalid.message,
                                at: rejected.location ?? SourceLocation(path: path),
                                hint: "a run asks the model again after a rejected reply; fine if the script tests that"))
                    }
                }
            } catch {
                report.note(path, kind: .agent, summary: nil)
                for problem in error.errors { self.problem(in: path, .error, problem) }
            }
            agents[path] = loaded
            return loaded
        }

        /// The pipeline file at `path`, loaded and reported once; nil when it has errors.
        mutating func pipeline(at named: String) -> PipelineDefinition? {
            let path = ConfigPath.resolve(named, from: "")
            if let known = pipelines[path] { return known }
            var loaded: PipelineDefinition?
            let models = options.models
            do {
                let definition = try PipelineFile.load(path: path) { agentPath throws(ConfigError) in
                    try AgentFile.load(path: agentPath, models: models)
                }
                report.note(
                    path, kind: .pipeline, summary: "pipeline \(definition.name), \(count(definition.tasks.count, "task"))",
                    details: ["outputs: " + definition.outputs.joined(separator: ", ")] + definition.planLines)
                for warning in definition.warnings { problem(in: path, .warning, warning) }
                loaded = definition
            } catch {
                report.note(path, kind: .pipeline, summary: nil)
                for problem in error.errors { self.problem(in: path, .error, problem) }
            }
            pipelines[path] = loaded
            return loaded
        }

        /// What ties a case to the files it names.
        mutating func crossCheck(_ evalCase: EvalCase) {
            let path = evalCase.location.path
            let name = "case \"\(evalCase.id)\""
            for rubric in evalCase.expected.allRubrics {
                do {
                    _ = try judge.judge(of: rubric)
                } catch {
                    problem(
                        in: path, .error, EvalError(.judgeFailed, "\(name): \(error.message)", location: error.location, hint: error.hint))
                }
            }
            if let cassette = evalCase.cassette, !FileManager.default.fileExists(atPath: cassette + "/index.json") {
                // A warning: `run --record new` makes it.
                problem(
                    in: path, .warning,
                    EvalError(
                        .missingPath, "\(name) names the cassette \(cassette), which holds no recording yet: replaying it fails",
                        location: evalCase.location(ofKey: "cassette"),
                        hint: "record it once with the model reachable: agent-eval run \(ShellWords.quoted(path)) --record new"))
            }
            switch evalCase.source {
            case .live(let agentPath, _, _):
                checkTools(of: evalCase, againstAgentAt: agentPath)
            case .defaultAgent:
                guard let agentPath = options.defaultAgent else {
                    problem(
                        in: path, .error,
                        EvalError(
                            .badCase, "\(name) names no agent and no logs", location: evalCase.location,
                            hint: "add agent: or logs: to it, or give a default agent with --agent"))
                    return
                }
                checkTools(of: evalCase, againstAgentAt: agentPath)
            case .pipeline(let file):
                guard exists(file, namedBy: evalCase, as: "pipeline", key: "pipeline") else { return }
                guard let definition = pipeline(at: file), let expected = evalCase.expected.pipeline else { return }
                let tasks = pipelineTasks[file] ?? Names(definition.tasks.map(\.id))
                pipelineTasks[file] = tasks
                reportUnknown(expected.taskNames, of: evalCase, known: tasks, .unknownTask, list: "its tasks") { task in
                    "\(name) names the task \"\(task)\", which pipeline \(definition.name) does not have"
                }
                for taskExpectations in expected.tasks {
                    guard let run = taskExpectations.run, let index = tasks.index[taskExpectations.task],
                        case .agent(let agentPath, let agent, _) = definition.tasks[index].work
                    else { continue }
                    checkTools(run.toolNames, of: evalCase, in: agent, path: agentPath)
                }
            case .command(let command):
                checkProgram(of: command, in: evalCase)
            case .recorded(let patterns):
                var logs: [String] = []
                for pattern in patterns {
                    let found = expanded[pattern] ?? EvalSuite.expand(pattern)
                    expanded[pattern] = found
                    if found.isEmpty {
                        problem(
                            in: path, .error,
                            EvalError(
                                .missingPath, "\(name): no log matches \(pattern)", location: evalCase.location(ofKey: "logs"),
                                hint: EvalSuite.missingLogsHint))
                    }
                    logs += found
                }
                guard options.readsLogs, evalCase.expected.pipeline == nil, !logs.isEmpty else { return }
                var available: Set<String> = []
                for log in logs {
                    guard let tools = tools(recordedIn: log, by: evalCase) else { return }
                    available.formUnion(tools)
                }
                reportUnknown(evalCase.expected.toolNames, of: evalCase, known: Names(available.sorted()), .unknownTool, list: "they had") {
                    tool in "\(name) names the tool \"\(tool)\", which none of its logs' runs had"
                }
            }
        }

        /// A command case's program must be there: a path (from the case file's folder) or a name
        /// on PATH; so must the script an interpreter is given. Its tools are known only when it
        /// runs: they are checked after the run.
        mutating func checkProgram(of command: ExternalCommand, in evalCase: EvalCase) {
            let place = evalCase.location(ofKey: "command")
            let program = command.arguments[0]
            if program.contains("/") {
                let path = ConfigPath.resolve(program, from: command.directory)
                if !FileManager.default.isExecutableFile(atPath: path) {
                    problem(
                        in: evalCase.location.path, .error,
                        EvalError(
                            .missingPath,
                            "case \"\(evalCase.id)\" runs \(program), which is \(FileManager.default.fileExists(atPath: path) ? "not executable" : "not there") (\(path))",
                            location: place, hint: "paths in command: start from the case file's folder"))
                }
            } else if AgentFile.findProgram(program) == nil {
                problem(
                    in: evalCase.location.path, .error,
                    EvalError(
                        .missingPath, "case \"\(evalCase.id)\" runs \(program), which is not on PATH", location: place,
                        hint: "install it, or give its path in command:"))
            }
            if let script = command.script, !FileManager.default.fileExists(atPath: ConfigPath.resolve(script, from: command.directory)) {
                problem(
                    in: evalCase.location.path, .error,
                    EvalError(
                        .missingPath,
                        "case \"\(evalCase.id)\" runs the script \(script), which is not there (\(ConfigPath.resolve(script, from: command.directory)))",
                        location: place, hint: "paths in command: start from the case file's folder, where the command runs"))
            }
        }

        mutating func checkTools(of evalCase: EvalCase, againstAgentAt agentPath: String) {
            guard exists(agentPath, namedBy: evalCase, as: "agent file", key: "agent"), let agent = agent(at: agentPath) else { return }
            checkTools(evalCase.expected.toolNames, of: evalCase, in: agent, path: agentPath)
            if let user = evalCase.user { checkUser(user, of: evalCase, talkingTo: agent) }
        }

        /// A conversation's user: a script line waiting for a tool the agent does not have would
        /// never be said (the conversation would then stop as a simulator fault), and a user
        /// model served over HTTP needs its key for live runs.
        mutating func checkUser(_ user: CaseUserSpec, of evalCase: EvalCase, talkingTo agent: Agent) {
            let tools = Names(agent.tools.names)
            for (index, line) in user.lines.enumerated() {
                guard let tool = line.toolCalled, agent.toolServers.isEmpty, tools.index[tool] == nil else { continue }
                problem(
                    in: evalCase.location.path, .error,
                    EvalError(
                        .unknownTool,
                        "case \"\(evalCase.id)\": user.script[\(index)] waits for the tool \"\(tool)\", which agent \(agent.name) does not have",
                        location: user.location,
                        hint: ConfigNode.suggestion(for: tool, among: tools.ordered).map { "did you mean \"\($0)\"?" }
                            ?? "its tools: \(tools.listed)"))
            }
            if let variable = user.model?.apiKeyVariable, (ProcessInfo.processInfo.environment[variable] ?? "").isEmpty {
                problem(
                    in: evalCase.location.path, .warning,
                    ConfigError(
                        .invalidValue,
                        "case \"\(evalCase.id)\": the user's model reads its API key from \(variable), which is not set: "
                            + "its conversations can only replay the user from a cassette",
                        at: user.model?.location ?? user.location,
                        hint: "export \(variable)=… for live runs; a cassette replays without it"))
            }
        }

        /// The tools a case names that its agent does not have (an agent with MCP servers
        /// learns its tools when they start: those are checked after the run).
        mutating func checkTools(_ names: [String], of evalCase: EvalCase, in agent: Agent, path: String) {
            guard agent.toolServers.isEmpty else { return }
            let tools = agentTools[path] ?? Names(agent.tools.names)
            agentTools[path] = tools
            reportUnknown(names, of: evalCase, known: tools, .unknownTool, list: "its tools") { tool in
                "case \"\(evalCase.id)\" names the tool \"\(tool)\", which agent \(agent.name) (\(path)) does not have"
            }
        }

        /// Reports each of `names` (tools, tasks) that `known` lacks, at the line of the case
        /// that names it, suggesting the closest known name or listing them (`list: a, b`).
        /// Linear in the names: the case's lines are looked up once, and only for an error.
        mutating func reportUnknown(
            _ names: [String], of evalCase: EvalCase, known: Names, _ code: EvalError.Code, list: String,
            message: (String) -> String
        ) {
            var locations: EvalCase.NameLocations?
            for name in names where known.index[name] == nil {
                let places = locations ?? evalCase.nameLocations()
                locations = places
                problem(
                    in: evalCase.location.path, .error,
                    EvalError(
                        code, message(name), location: places.location(ofName: name),
                        hint: ConfigNode.suggestion(for: name, among: known.ordered).map { "did you mean \"\($0)\"?" }
                            ?? "\(list): \(known.listed)"))
            }
        }

        /// Whether the file a case names is there; reports it when it is not.
        mutating func exists(_ file: String, namedBy evalCase: EvalCase, as what: String, key: String) -> Bool {
            guard !FileManager.default.fileExists(atPath: file) else { return true }
            problem(
                in: evalCase.location.path, .error,
                EvalError(
                    .missingPath, "case \"\(evalCase.id)\" names the \(what) \(file), which does not exist",
                    location: evalCase.location(ofKey: key),
                    hint: "paths in a case start from the case file's folder"))
            return false
        }

        /// The tools the run of a log had (its first event); nil, reported, when it cannot be read.
        mutating func tools(recordedIn log: String, by evalCase: EvalCase) -> [String]? {
            if let known = logTools[log] { return known }
            var tools: [String]?
            do {
                switch try LogReader(path: log).firstEvent()?.event.payload {
                case .runStarted(let start)?:
                    tools = start.tools.map(\.name)
                case nil:
                    problem(
                        in: log, .error,
                        EvalError(
                            .badCase, "case \"\(evalCase.id)\" names \(log), which holds no event", location: SourceLocation(path: log),
                            hint: "a run that recorded nothing cannot be checked; record it again (agent-eval exec)"))
                default:
                    problem(
                        in: log, .error,
                        EvalError(
                            .badCase, "case \"\(evalCase.id)\" names \(log), which does not start with run_started",
                            location: SourceLocation(path: log),
                            hint: "check pipeline logs with expected.pipeline; agent-eval log verify says what the log holds"))
                }
            } catch {
                problem(in: log, .error, error)
            }
            logTools[log] = .some(tools)
            return tools
        }

        /// Reports a problem under the file it is in: `path`, or the file its location names (an
        /// agent's model script, a pipeline's agent file).
        mutating func problem(in path: String, _ severity: CheckReport.Severity, _ error: any Error) {
            let diagnostic = DiagnosticRecord(describing: error)
            let file = diagnostic.place.flatMap { $0.line > 0 ? ConfigPath.resolve($0.path, from: "") : nil } ?? path
            report.add(CheckReport.Problem(severity: severity, diagnostic: diagnostic), to: file)
        }

        func count(_ number: Int, _ noun: String) -> String { counted(number, noun) }
    }

    /// Names a file has (an agent's tools, a pipeline's tasks), in its order and for lookups.
    struct Names {
        let ordered: [String]
        /// Where each name is in `ordered` (its first place).
        let index: [String: Int]
        /// `a, b, c`, for hints.
        let listed: String

        init(_ names: [String]) {
            ordered = names
            index = Dictionary(names.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
            listed = names.joined(separator: ", ")
        }
    }
}
