public import ArgumentParser
import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

extension SequenceExpectation.Mode: ExpressibleByArgument {}

extension ArgumentMatcher.Mode: ExpressibleByArgument {}

extension EvalSetConversion.Match: ExpressibleByArgument {}

/// `path` as seen from `directory` (both taken from the current directory when relative).
func relativePath(_ path: String, from directory: String) -> String {
    func absolute(_ p: String) -> [String] {
        ConfigPath.absolute(p.isEmpty ? "." : p).split(separator: "/").map(String.init)
    }
    let target = absolute(path)
    let base = absolute(directory)
    let common = zip(target, base).prefix { $0 == $1 }.count
    let parts = Array(repeating: "..", count: base.count - common) + target[common...]
    return parts.isEmpty ? "." : parts.joined(separator: "/")
}
