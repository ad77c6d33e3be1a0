import Foundation
import Testing

/// docs/architecture.md's table of modules is the rule for imports: every `import` in Sources/
/// must be one the table allows for its module, every module has a row, and the allowed imports
/// point down (a lower or the same layer, with no cycle).
@Suite("Architecture")
struct ArchitectureTests {
    /// System modules any module but TraceCore may import.
    static let system: Set<String> = ["Foundation", "FoundationNetworking", "Dispatch", "Synchronization", "Glibc", "Musl", "Darwin"]

    struct Row {
        var layer: Int
        var imports: Set<String>
    }

    /// The rows of the table: `| \`Module\` | layer | \`A\`, \`B\` |`.
    static func table() throws -> [String: Row] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        var rows: [String: Row] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4, let layer = Int(cells[2]) else { continue }
            let name = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            let imports = cells[3].split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "` ")) }
                .filter { !$0.isEmpty }
            rows[name] = Row(layer: layer, imports: Set(imports))
        }
        return rows
    }

    /// The modules each Swift file of `Sources/<module>` imports, with the file and line.
    static func imports(of module: String) throws -> [(module: String, place: String)] {
        let folder = repositoryRoot.appendingPathComponent("Sources/\(module)")
        guard let files = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        var found: [(String, String)] = []
        let pattern =
            /^\s*(?:@[A-Za-z_]+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate)\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)/
        while let file = files.nextObject() as? String {
            guard file.hasSuffix(".swift") else { continue }
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            // Lines inside a multi-line string literal (a script the code runs) are not imports.
            var inString = false
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if line.ranges(of: "\"\"\"").count % 2 == 1 {
                    inString.toggle()
                    continue
                }
                if !inString, let match = line.firstMatch(of: pattern) {
                    found.append((String(match.1), "Sources/\(module)/\(file):\(index + 1)"))
                }
            }
        }
        return found
    }

    @Test("every import in Sources/ is one docs/architecture.md allows its module, and every module has a row")
    func importsFollowTheTable() throws {
        let table = try Self.table()
        #expect(table.count >= 10, "docs/architecture.md has no table of modules")
        let modules = try FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("Sources").path)
            .filter { !$0.hasPrefix(".") }.sorted()
        for module in modules {
            guard let row = table[module] else {
                Issue.record("Sources/\(module) has no row in docs/architecture.md: give it a layer and what it may import")
                continue
            }
            for (imported, place) in try Self.imports(of: module) {
                let allowed = row.imports.contains(imported) || (module != "TraceCore" && Self.system.contains(imported))
                #expect(allowed, "\(place): \(module) imports \(imported), which docs/architecture.md does not allow it")
            }
        }
    }

    @Test("the imports the table allows point down: to a module of a lower or the same layer, never in a cycle")
    func layersPointDown() throws {
        let table = try Self.table()
        for (module, row) in table {
            for imported in row.imports {
                guard let target = table[imported] else { continue }  // a package's product
                #expect(target.layer <= row.layer, "\(module) (layer \(row.layer)) may import \(imported) of layer \(target.layer)")
            }
        }
        // No cycle: every module can be reached in an order where its imports come first.
        var done: Set<String> = []
        var left = Set(table.keys)
        while !left.isEmpty {
            let ready = left.filter { module in table[module]?.imports.allSatisfy { table[$0] == nil || done.contains($0) } ?? true }
            #expect(!ready.isEmpty, "the allowed imports of \(left.sorted().joined(separator: ", ")) form a cycle")
            if ready.isEmpty { break }
            done.formUnion(ready)
            left.subtract(ready)
        }
    }
}
