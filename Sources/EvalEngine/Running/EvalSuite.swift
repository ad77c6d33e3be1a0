import ConfigFile
import Foundation
import TraceCore

/// Finds and loads eval cases: every case file under the directories given — a `.yaml`, `.yml`
/// or `.json` file whose top level is a case (`caseId` or `expected`) or a list of them; agent
/// files, model scripts, pipelines and other data beside them are left alone, and hidden files
/// and folders (such as `.baseline/`) are skipped — and files given by name, in path order.
public enum EvalSuite {
    /// The cases, and every problem found: all files are read before anything runs, so one
    /// broken file does not hide the next.
    public static func load(paths: [String]) -> (cases: [EvalCase], errors: [EvalError]) {
        var files: [(path: String, isNamed: Bool)] = []
        var errors: [EvalError] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                errors.append(EvalError(.missingPath, "\(path) does not exist", hint: "give a directory of case files or case files"))
                continue
            }
            if isDirectory.boolValue {
                files.append(contentsOf: configFiles(under: path).map { ($0, false) })
            } else {
                files.append((path, true))
            }
        }
        var cases: [EvalCase] = []
        var seen: [String: SourceLocation] = [:]
        for (file, isNamed) in files {
            do throws(ConfigErrors) {
                let root = try ConfigNode.loadReportingAll(path: file)
                // In a folder, only case files are cases; a file named on the command line is
                // read as one whatever it holds, so its errors say what is missing.
                if !isNamed && ConfigFileKind(of: root) != .cases { continue }
                for evalCase in try EvalCaseFile.cases(in: root, path: file) {
                    if let duplicate = register(evalCase, in: &seen) {
                        errors.append(duplicate)
                    } else {
                        cases.append(evalCase)
                    }
                }
            } catch {
                errors.append(contentsOf: error.errors.map(EvalError.init))
            }
        }
        if cases.isEmpty && errors.isEmpty {
            errors.append(
                EvalError(
                    .noCases, "no case files (.yaml, .yml, .json with caseId or expected) under \(paths.joined(separator: ", "))",
                    hint: "`agent-eval init` writes a project with cases to start from"))
        }
        return (cases, errors)
    }

    /// Notes `evalCase`'s id as seen; the error when a case read earlier has it. The one rule for
    /// unique case ids, which `run` and `check` both apply.
    static func register(_ evalCase: EvalCase, in seen: inout [String: SourceLocation]) -> EvalError? {
        if let first = seen[evalCase.id] {
            return EvalError(
                .duplicateCase, "caseId \"\(evalCase.id)\" is used twice (first at \(first))", location: evalCase.location,
                hint: "case ids must be unique: baselines and reports are keyed by them")
        }
        seen[evalCase.id] = evalCase.location
        return nil
    }

    /// Whether a file named `name` may be a case, agent, policy or pipeline file: `.yaml`, `.yml` or
    /// `.json`, in any case (a `Refunds.YAML` was skipped without a word).
    static func isConfigFileName(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return lowered.hasSuffix(".yaml") || lowered.hasSuffix(".yml") || lowered.hasSuffix(".json")
    }

    /// Every `.yaml`, `.yml` and `.json` file under `directory` (the suffix in any case), hidden
    /// ones left out, sorted.
    static func configFiles(under directory: String) -> [String] {
        // A linked case directory is read where the link points; the paths reported keep the
        // name the user gave.
        // So is a linked folder inside it (a folder of cases shared between projects): its cases
        // were skipped without a word. Each folder is walked once, and a link to a folder that
        // holds the one it is in (`up -> ..`, a loop) is not followed: it would take in the cases
        // around the folder given, or walk it again.
        let root = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        var walked: Set<String> = [root]
        var files: [String] = []
        func walk(_ folder: String, _ relative: String) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
            for name in names.sorted() where !name.hasPrefix(".") {
                let path = folder + "/" + name
                let named = relative.isEmpty ? name : relative + "/" + name
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
                    let holdsThisFolder = folder == resolved || folder.hasPrefix(resolved.hasSuffix("/") ? resolved : resolved + "/")
                    if !holdsThisFolder, walked.insert(resolved).inserted { walk(resolved, named) }
                } else if isConfigFileName(name) {
                    // `run .` names files as the user would (`evals/a.yaml`), not `./evals/a.yaml`.
                    if directory == "." || directory == "./" {
                        files.append(named)
                    } else {
                        files.append(directory.hasSuffix("/") ? directory + named : directory + "/" + named)
                    }
                }
            }
        }
        walk(root, "")
        return files.sorted()
    }

    /// Cases whose id or one of whose tags matches one of `patterns` (globs); all when empty.
    public static func filter(_ cases: [EvalCase], by patterns: [String]) -> [EvalCase] {
        guard !patterns.isEmpty else { return cases }
        let globs = patterns.map(Glob.init)
        return cases.filter { evalCase in
            globs.contains { glob in glob.matches(evalCase.id) || evalCase.tags.contains(where: glob.matches) }
        }
    }

    /// The cases of shard `index` (1-based) of `count`, by a stable hash of the case id: each
    /// case is in exactly one shard, and adding cases never moves the others.
    public static func shard(_ cases: [EvalCase], index: Int, count: Int) -> [EvalCase] {
        cases.filter { Int(stableHash($0.id) % UInt64(count)) == index - 1 }
    }

    /// FNV-1a, 64 bits: the same on every machine and every run (unlike `Hasher`).
    public static func stableHash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    /// What to do about patterns in `logs` that matched no log.
    public static let missingLogsHint = "paths in logs: start from the case file's folder; record runs with agent-eval exec"

    /// The files a log pattern names: a path, or a glob (`Glob.paths(matching:)`: `runs/*.jsonl.gz`,
    /// `runs/*/run.jsonl.gz`, `runs/**/*.jsonl.gz`; `runs/**` is every `*.jsonl.gz` below `runs`).
    /// A folder a glob matches is no log; a path given as it is is taken as it is (a folder then
    /// fails as one, saying so).
    public static func expand(_ pattern: String) -> [String] {
        guard Glob.isPathPattern(pattern) else { return FileManager.default.fileExists(atPath: pattern) ? [pattern] : [] }
        let logsOnly = Glob.endsInAnyDepth(pattern)
        return Glob.paths(matching: pattern, skipsFolders: true).filter { !logsOnly || $0.hasSuffix(".jsonl.gz") }
    }
}
