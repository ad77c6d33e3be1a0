public import AgentRuntime
import Foundation
import TraceCore
import TraceLog

/// The small working project `agent-eval init` writes: the template files (an agent, its tools
/// and model, two cases, a CI workflow) and a first run of that agent, recorded for the case
/// that checks a recorded run. Nothing is overwritten: when any file is there already, nothing
/// is written.
///
/// ```swift
/// let project = try await ProjectTemplate(templates: [common, folder]).write(into: "my-agent")
/// print(project.files, project.firstRun?.stop.reason)
/// ```
public struct ProjectTemplate: Sendable {
    /// The folders of template files, each adding its files (a later folder's file replaces an
    /// earlier one's); a name that starts with `dot-` stands for one that starts with `.`
    /// (SwiftPM leaves hidden files out of resources).
    public var templates: [String]
    /// Whether the project is an agent file (`agent.yaml`) whose first run is recorded for the
    /// recorded case; false for a project whose agent is a command (`init --external`), which
    /// the caller records through the gateway.
    public var recordsFirstRun: Bool

    /// The input the recorded run and the live case use.
    public static let firstInput = "Where is my order A-1001? Cancel it if it has not shipped."
    /// Where the first run is recorded, in the project.
    public static let recordedLog = "evals/recorded/first-run.jsonl.gz"

    public init(templates: [String], recordsFirstRun: Bool = true) {
        self.templates = templates
        self.recordsFirstRun = recordsFirstRun
    }

    /// What `write` made.
    public struct Project: Sendable {
        /// The folder, as given (without a trailing `/`).
        public var root: String
        /// Every file written, relative to `root`, sorted; the recorded log among them.
        public var files: [String]
        /// The recorded first run, when the template records one.
        public var firstRun: RunOutcome?

        /// `relative` inside the project, as a path from the caller's folder.
        public func path(_ relative: String) -> String { ProjectTemplate.path(relative, in: root) }
    }

    /// Writes the project into `directory` (made when missing) and records its first run.
    public func write(into directory: String) async throws(EvalError) -> Project {
        let root = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        var byPath: [String: String] = [:]
        for folder in templates {
            for file in Self.files(under: folder) { byPath[Self.projectPath(for: file)] = folder + "/" + file }
        }
        let targets = byPath.keys.sorted().map { (source: byPath[$0] ?? "", relative: $0) }
        let recorded = recordsFirstRun ? [Self.recordedLog] : []

        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw EvalError(
                .writeFailed, "\(root) is a file; init writes a project into a folder",
                hint: "give a new folder's name: agent-eval init my-agent")
        }
        let existing = (targets.map(\.relative) + recorded).filter {
            FileManager.default.fileExists(atPath: Self.path($0, in: root))
        }
        guard existing.isEmpty else {
            throw EvalError(
                .projectExists,
                "\(root == "." ? "this folder" : root) has \(existing.joined(separator: ", ")) already; init overwrites nothing",
                hint: "run init in a new folder (agent-eval init my-agent), or move those files away")
        }
        do {
            for target in targets {
                let path = Self.path(target.relative, in: root)
                let folder = (path as NSString).deletingLastPathComponent
                try FileManager.default.createDirectory(atPath: folder.isEmpty ? "." : folder, withIntermediateDirectories: true)
                let bytes = try Data(contentsOf: URL(fileURLWithPath: target.source))
                try bytes.write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
                // Scripts stay runnable: a tool's program must be executable.
                let permissions = bytes.starts(with: Array("#!".utf8)) ? 0o755 : 0o644
                try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
            }
            // `.agent-eval/` marks the project root: commands run from any folder below it keep
            // their catalog here (`Catalog.projectRoot`), not in that folder.
            try FileManager.default.createDirectory(atPath: Self.path(".agent-eval", in: root), withIntermediateDirectories: true)
        } catch {
            throw EvalError(.writeFailed, "cannot write the project in \(root): \(FileProblem.reason(of: error))")
        }

        guard recordsFirstRun else { return Project(root: root, files: targets.map(\.relative), firstRun: nil) }
        // The recorded case checks a real run of the agent, recorded here by this code.
        let firstRun: RunOutcome
        do {
            let agent = try AgentFile.load(path: Self.path("agent.yaml", in: root))
            firstRun = try await AgentRuntime(agent: agent).run(goal: Self.firstInput, log: Self.path(Self.recordedLog, in: root))
        } catch {
            throw EvalError(
                .writeFailed, "the project was written, but its first run could not be recorded; the recorded case needs it",
                cause: error as? any Diagnostic)
        }
        return Project(root: root, files: (targets.map(\.relative) + recorded).sorted(), firstRun: firstRun)
    }

    static func path(_ relative: String, in root: String) -> String { root == "." ? relative : root + "/" + relative }

    /// A template's path in the project: `dot-` at the start of a name stands for `.`.
    public static func projectPath(for template: String) -> String {
        template.split(separator: "/").map { $0.hasPrefix("dot-") ? "." + $0.dropFirst(4) : String($0) }.joined(separator: "/")
    }

    /// Every regular file under `folder`, as paths relative to it, sorted.
    public static func files(under folder: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: folder) else { return [] }
        var files: [String] = []
        while let relative = enumerator.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(relative)
            }
        }
        return files.sorted()
    }
}
