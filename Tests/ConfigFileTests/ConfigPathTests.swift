import TestSupport
import Testing

@testable import ConfigFile

@Suite("Paths")
struct ConfigPathTests {
    @Test("an absolute path is made standard: paths already standard come back as they are, others are folded (the catalog's key)")
    func absolutePaths() {
        // The reference: fold `.`, `..` and empty components.
        func folded(_ path: String) -> String {
            var kept: [Substring] = []
            for component in path.split(separator: "/", omittingEmptySubsequences: true) {
                if component == "." { continue }
                if component == ".." { _ = kept.popLast() } else { kept.append(component) }
            }
            return "/" + kept.joined(separator: "/")
        }
        var generator = SeededGenerator(seed: 11)
        let pieces = ["a", "b.c", ".", "..", "", "...", ".x", "x.", "é"]
        for _ in 0..<3000 {
            let count = Int.random(in: 0...5, using: &generator)
            let path = "/" + (0..<count).map { _ in pieces.randomElement(using: &generator)! }.joined(separator: "/")
            #expect(ConfigPath.absolute(path) == folded(path), "\(path)")
            #expect(ConfigPath.isStandard(path) == (folded(path) == path), "\(path)")
        }
        #expect(ConfigPath.absolute("x/./y") == folded(ConfigPath.currentDirectory() + "/x/y"))
    }

    @Test("a path in a config file is relative to the file's folder, folded; .. above a relative start is kept, at the root dropped")
    func relativePaths() {
        #expect(ConfigPath.resolve("tools/x.sh", from: "cases/../agents") == "agents/tools/x.sh")
        #expect(ConfigPath.resolve("../../x", from: "a") == "../x")
        #expect(ConfigPath.resolve("/../x", from: "a") == "/x")
        #expect(ConfigPath.resolve(".", from: ".") == ".")
        #expect(ConfigPath.absolute("b", from: "a") == ConfigPath.currentDirectory() + "/a/b")
    }
}
