import Foundation
import PackagePlugin

/// Records the commit the `agent-eval` binary is built from, for `agent-eval --version`: a
/// generated `BuildInfo.swift` gets `git rev-parse` of the package (with `-dirty` when tracked
/// files changed), or `unknown` outside a git checkout. The file is only rewritten when the
/// commit changes, so an unchanged tree recompiles nothing.
///
/// A build command, not a prebuild one: SwiftPM runs prebuild commands only when it plans the
/// build again (a file added or removed), so a build after a commit kept the commit before it.
/// This one runs whenever git's `HEAD` or index, or any source file of the package, is newer
/// than the file it wrote.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated").appending(path: "BuildInfo.swift")
        let package = context.package.directoryURL
        let script = """
            commit=$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
            if [ "$commit" != unknown ] && [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
                commit="$commit-dirty"
            fi
            text="/// The commit this binary was built from (written by the BuildInfo plugin).
            let buildCommit = \\"$commit\\""
            mkdir -p "$(dirname "$2")"
            if [ ! -f "$2" ] || [ "$(cat "$2")" != "$text" ]; then
                printf '%s\\n' "$text" > "$2"
            fi
            """
        // What can change the answer: a commit or a checkout (HEAD, the index), or an edit of
        // a tracked file (the dirty mark); only inputs that exist, so a copy without `.git`
        // still builds.
        let git = package.appending(path: ".git")
        var inputs = [git.appending(path: "HEAD"), git.appending(path: "index")].filter {
            FileManager.default.fileExists(atPath: $0.path)
        }
        for case let module as SourceModuleTarget in context.package.targets {
            inputs += module.sourceFiles.map(\.url)
        }
        return [
            .buildCommand(
                displayName: "Recording the commit \(target.name) is built from",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", package.path, output.path],
                inputFiles: inputs,
                outputFiles: [output])
        ]
    }
}
