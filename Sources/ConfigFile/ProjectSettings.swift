import Foundation
import TraceLog

/// The project's settings: `.agent-eval/settings.yaml` in the project root (`ConfigPath.projectRoot`),
/// a file meant to be committed, which every command in the project takes without a flag — a flag
/// or an environment variable wins over it. Its keys (docs/README.md, "Project settings"):
///
/// ```yaml
/// catalog: postgres://ci@db.internal:5432/agent_eval   # or a file, relative to the project root
/// maxMemberMib: 256                                     # LogReadLimit, 1 to 1024
/// ```
///
/// Each key is read by the one that uses it (`catalog` by the catalog, which judges the URL);
/// an unknown key is an error naming its line, with the closest known key.
public struct ProjectSettings: Sendable {
    /// The settings file, relative to the project root.
    public static let file = ".agent-eval/settings.yaml"

    /// The project root the file was found in.
    public let root: String
    /// `catalog:` as written, for the catalog to judge; nil when absent.
    public let catalog: ConfigNode?
    /// `maxMemberMib:`, the read limit of every log reader, in MiB; nil when absent.
    public let maxMemberMib: Int?

    /// The settings of the project `directory` is in (this process's working directory when
    /// nil); nil when the project has no settings file.
    public static func load(in directory: String? = nil) throws(ConfigError) -> ProjectSettings? {
        let root = ConfigPath.projectRoot(of: directory ?? FileManager.default.currentDirectoryPath)
        let path = (root as NSString).appendingPathComponent(file)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var settings = try ConfigNode.load(path: path).mapping("the project settings")
        let catalog = settings.optional("catalog")
        let limit = try settings.optional("maxMemberMib")?.int("maxMemberMib", in: LogReadLimit.allowedMiB)
        try settings.finish()
        return ProjectSettings(root: root, catalog: catalog, maxMemberMib: limit)
    }
}
