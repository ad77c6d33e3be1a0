import ConfigFile
import Foundation

/// Where a suite run's baseline is: the same folder whichever case path the run is given (the
/// suite's folder, a subfolder, one case file), found as the catalog is, from the project.
///
/// From the first path's folder (the folder itself, or a file's folder) up to the project root
/// (`ConfigPath.projectRoot(of:)`), the nearest folder that holds a `.baseline` directory. Where
/// none does, a baseline is written to `<first directory>/.baseline` (`writeDefault`); there is
/// none to read.
public struct BaselineLocation: Sendable, Hashable {
    /// The `.baseline` directory found, or nil.
    public var found: String?
    /// The folders looked in, nearest first (for the message when none was found).
    public var searched: [String]
    /// Where `--update-baseline` writes when nothing was found: `<first path>/.baseline` for a
    /// directory; nil for a file (the run must be told where).
    public var writeDefault: String?

    /// The baseline of a run over `paths`.
    public init(paths: [String]) {
        searched = []
        writeDefault = nil
        guard let first = paths.first else { return }
        let trimmed = first.count > 1 && first.hasSuffix("/") ? String(first.dropLast()) : first
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: trimmed, isDirectory: &isDirectory) else { return }
        // A file's folder, folded by the one path resolver (NSString's path methods trap on ".").
        let start = isDirectory.boolValue ? trimmed : ConfigPath.resolve(trimmed + "/..", from: ".")
        if isDirectory.boolValue { writeDefault = trimmed + "/.baseline" }
        let root = URL(fileURLWithPath: ConfigPath.projectRoot(of: start)).standardizedFileURL.path
        // Shown as the user gave the path: relative folders stay relative.
        var folder = start
        while true {
            searched.append(folder)
            let candidate = folder == "." ? ".baseline" : folder + "/.baseline"
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isFolder), isFolder.boolValue {
                found = candidate
                return
            }
            let absolute = URL(fileURLWithPath: folder).standardizedFileURL
            if absolute.path == root || absolute.path == "/" { return }
            folder = ConfigPath.resolve(folder + "/..", from: ".")
        }
    }
}
