import Foundation
import TraceCore

/// The files that come with the binary: the project `init` writes and the `help` topics
/// (`Sources/agent-eval/Templates`), and the viewer's page assets (`Sources/Viewer/Assets`).
/// SwiftPM puts each target's files beside the executable in `agent-eval_<target>.resources`;
/// `scripts/install` installs them there too, and a symbolic link to the binary finds them
/// through the link's target. The Python wheel (`scripts/build-wheel`) installs the binary as a
/// script (`PREFIX/bin`) and its files in `PREFIX/lib/agent-eval`.
enum BundledFiles {
    static let bundleName = "agent-eval_agent-eval.resources"
    static let viewerBundleName = "agent-eval_Viewer.resources"

    /// The `Templates` folder, or an error that says where it was looked for.
    static func templates() throws -> String {
        try folder("Templates", in: bundleName)
    }

    /// The viewer's `Assets` folder.
    static func viewerAssets() throws -> String {
        try folder("Assets", in: viewerBundleName)
    }

    static func folder(_ name: String, in bundle: String) throws -> String {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            let folder = executable.deletingLastPathComponent()
            candidates.append(folder.appendingPathComponent(bundle).path)
            // Installed from the Python wheel: the binary in PREFIX/bin, its files in PREFIX/lib/agent-eval.
            candidates.append(folder.deletingLastPathComponent().appendingPathComponent("lib/agent-eval/\(bundle)").path)
        }
        candidates.append(Bundle.main.bundleURL.resolvingSymlinksInPath().appendingPathComponent(bundle).path)
        for candidate in candidates {
            let folder = candidate + "/" + name
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue { return folder }
        }
        throw BundledFilesMissing(searched: candidates, bundle: bundle)
    }
}

struct BundledFilesMissing: Diagnostic, Hashable {
    var searched: [String]
    var bundle: String

    var diagnosticCode: String { "cli.missing_files" }
    var place: SourceLocation? { nil }
    var message: String { "the files that come with agent-eval are missing (looked in \(searched.joined(separator: " and ")))" }
    var hint: String? { "install agent-eval with scripts/install, which puts \(bundle) beside the binary" }
}
