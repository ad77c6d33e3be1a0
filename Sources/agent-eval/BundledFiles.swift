import Foundation

/// The files that come with the binary (`Sources/agent-eval/Templates`): the project `init`
/// writes and the `help` topics. SwiftPM puts them beside the executable in
/// `agent-eval_agent-eval.resources`; `scripts/install` installs them there too, and a
/// symbolic link to the binary finds them through the link's target.
enum BundledFiles {
    static let bundleName = "agent-eval_agent-eval.resources"

    /// The `Templates` folder, or an error that says where it was looked for.
    static func templates() throws -> String {
        var candidates: [String] = []
        if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
            candidates.append(executable.deletingLastPathComponent().appendingPathComponent(bundleName).path)
        }
        candidates.append(Bundle.main.bundleURL.resolvingSymlinksInPath().appendingPathComponent(bundleName).path)
        for candidate in candidates {
            let folder = candidate + "/Templates"
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue { return folder }
        }
        throw BundledFilesMissing(searched: candidates)
    }

    /// Every regular file under `folder`, as paths relative to it, sorted.
    static func files(under folder: String) -> [String] {
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

struct BundledFilesMissing: Error, CustomStringConvertible {
    var searched: [String]

    var description: String {
        "the files that come with agent-eval are missing (looked in \(searched.joined(separator: " and "))); "
            + "install agent-eval with scripts/install, which puts \(BundledFiles.bundleName) beside the binary"
    }
}
