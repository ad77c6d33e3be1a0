import Foundation
import PackagePlugin

/// Records the commit the `agent-eval` binary is built from, for `agent-eval --version`: before
/// every build, a generated `BuildInfo.swift` gets `git rev-parse` of the package (with
/// `-dirty` when tracked files changed), or `unknown` outside a git checkout. The file is only
/// rewritten when the commit changes, so an unchanged tree recompiles nothing.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let directory = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = """
            commit=$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
            if [ "$commit" != unknown ] && [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
                commit="$commit-dirty"
            fi
            text="/// The commit this binary was built from (written by the BuildInfo plugin).
            let buildCommit = \\"$commit\\""
            mkdir -p "$2"
            if [ ! -f "$2/BuildInfo.swift" ] || [ "$(cat "$2/BuildInfo.swift")" != "$text" ]; then
                printf '%s\\n' "$text" > "$2/BuildInfo.swift"
            fi
            """
        return [
            .prebuildCommand(
                displayName: "Recording the commit \(target.name) is built from",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", context.package.directoryURL.path, directory.path],
                outputFilesDirectory: directory)
        ]
    }
}
