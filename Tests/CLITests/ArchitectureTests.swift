import Foundation
import Testing

/// docs/architecture.md's table of modules is the rule for imports: every `import` in Sources/
/// must be one the table allows for its module, every module has a row, each layer is the
/// module's real depth (imports point strictly down), Package.swift declares what the rows say,
/// the pure core does no I/O, and threads are made only where the page says.
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

    /// Each target's dependencies in Package.swift, by target name: `"Name"` and
    /// `.product(name: "Name", …)` entries of its `dependencies:` list.
    static func packageDependencies() throws -> [String: Set<String>] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        var targets: [String: Set<String>] = [:]
        for match in text.matches(of: /\.(?:target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"/) {
            let name = String(match.1)
            let rest = text[match.range.upperBound...]
            // The dependency list, when the target has one before its closing parenthesis.
            guard let open = rest.firstRange(of: "dependencies: ["),
                rest[..<open.lowerBound].firstMatch(of: /\.(?:target|executableTarget|testTarget|plugin|systemLibrary)\(/) == nil
            else {
                targets[name] = []
                continue
            }
            var depth = 1
            var end = open.upperBound
            while depth > 0, end < rest.endIndex {
                if rest[end] == "[" { depth += 1 } else if rest[end] == "]" { depth -= 1 }
                end = rest.index(after: end)
            }
            let list = rest[open.upperBound..<end]
            var names = Set<String>()
            for product in list.matches(of: /\.product\(name:\s*"([^"]+)"/) { names.insert(String(product.1)) }
            let withoutProducts = list.replacing(/\.product\([^)]*\)/, with: "")
            for plain in withoutProducts.matches(of: /"([^"]+)"/) { names.insert(String(plain.1)) }
            targets[name] = names
        }
        return targets
    }

    @Test("each module's layer is its real depth: one more than the deepest module of ours it may import, so imports point strictly down")
    func layersAreRealDepths() throws {
        let table = try Self.table()
        for (module, row) in table {
            let ours = row.imports.compactMap { table[$0] }
            for imported in row.imports {
                guard let target = table[imported] else { continue }  // a package's product, a system module
                #expect(target.layer < row.layer, "\(module) (layer \(row.layer)) may import \(imported) of layer \(target.layer)")
            }
            let depth = (ours.map(\.layer).max() ?? -1) + 1
            #expect(row.layer == depth, "\(module) is on layer \(row.layer) in docs/architecture.md, but its depth is \(depth)")
        }
    }

    @Test("Package.swift gives each module exactly the dependencies its row in docs/architecture.md names")
    func packageMatchesTheTable() throws {
        let table = try Self.table()
        let package = try Self.packageDependencies()
        for (module, row) in table.sorted(by: { $0.key < $1.key }) {
            guard let declared = package[module] else {
                // The C shims are system libraries or plain C targets without dependencies.
                #expect(row.imports.isEmpty, "\(module) has a row in docs/architecture.md but no target with dependencies in Package.swift")
                continue
            }
            let named = row.imports.subtracting(Self.system)
            #expect(
                declared == named,
                """
                \(module): Package.swift declares \(declared.subtracting(named).sorted()) beyond its row, \
                and its row names \(named.subtracting(declared).sorted()) that Package.swift does not declare
                """)
        }
    }

    @Test("the table names no dependency that no file of the module imports")
    func everyDependencyIsUsed() throws {
        let table = try Self.table()
        for (module, row) in table.sorted(by: { $0.key < $1.key }) where !row.imports.isEmpty {
            let used = Set(try Self.imports(of: module).map(\.module))
            let unused = row.imports.subtracting(Self.system).subtracting(["Glibc", "Musl", "Darwin"]).subtracting(used)
            #expect(unused.isEmpty, "\(module) may import \(unused.sorted()) (docs/architecture.md, Package.swift), but no file of it does")
        }
    }

    /// Calls into the C library that reach files, processes, the clock or the environment.
    static let ioCalls: Set<String> = [
        "stat", "lstat", "fstat", "access", "open", "openat", "fopen", "fread", "fwrite", "fclose", "pread", "pwrite", "close",
        "unlink", "rename", "mkdir", "opendir", "readdir", "getenv", "setenv", "clock_gettime", "gettimeofday", "time",
        "nanosleep", "usleep", "sleep", "socket", "connect", "fork", "execve", "posix_spawn", "pthread_create", "dlopen",
    ]

    @Test("the pure core does no I/O: TraceCore calls nothing of the C library that reaches files, processes or the clock")
    func pureCoreDoesNoIO() throws {
        let folder = repositoryRoot.appendingPathComponent("Sources/TraceCore")
        let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }.sorted()
        var texts: [(String, String)] = []
        for file in files { texts.append((file, try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8))) }
        // A name TraceCore defines itself (its JSON writer's `write`) is its own, not the C library's.
        var own = Set<String>()
        for (_, text) in texts {
            for match in text.matches(of: /func\s+([A-Za-z_][A-Za-z0-9_]*)/) { own.insert(String(match.1)) }
        }
        let forbidden = Self.ioCalls.subtracting(own)
        #expect(!forbidden.isEmpty)
        for (file, text) in texts {
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                for match in code.matches(of: /(?:^|[^A-Za-z0-9_.])([a-z_]+)\s*\(/) where forbidden.contains(String(match.1)) {
                    Issue.record(
                        "Sources/TraceCore/\(file):\(index + 1) calls \(match.1)(), which does I/O: the pure core must not (move it to TraceLog)"
                    )
                }
            }
        }
    }

    /// Where the project may make a thread of its own (docs/architecture.md, "Blocking work").
    static let threadMakers: Set<String> = [
        "Sources/TraceLog/WorkerThreads.swift", "Sources/AgentRuntime/Tools/DeadlineWatchdog.swift", "Sources/CProcess/cprocess.c",
    ]

    @Test("threads are made only where docs/architecture.md says: WorkerThreads, the deadline watchdog, the process spawner")
    func threadsComeFromTheOnePlace() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") || $0.hasSuffix(".c") }.sorted()
        var makers: Set<String> = []
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where ["Thread", "DispatchQueue", "pthread_create", "detached"].contains(where: { line.range(of: $0) != nil }) {
                let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                guard code.contains(/(?:^|[^A-Za-z0-9_])(Thread\s*(\(|\{)|DispatchQueue\s*\(|pthread_create\s*\(|Task\.detached)/)
                else { continue }
                let path = "Sources/\(file)"
                makers.insert(path)
                #expect(
                    Self.threadMakers.contains(path),
                    "\(path):\(index + 1) makes a thread or queue of its own: use TraceLog's WorkerThreads (JobThreads), or say why not in docs/architecture.md"
                )
            }
        }
        #expect(makers == Self.threadMakers, "the places that make threads are \(makers.sorted())")
    }

    @Test("a command with --max-member-mib is a ReadsLogs, so that main applies it before the command reads a log")
    func readLimitsAreApplied() throws {
        let commands = repositoryRoot.appendingPathComponent("Sources/agent-eval")
        let files = try #require(FileManager.default.enumerator(atPath: commands.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }.sorted()
        var taking = 0
        for file in files {
            let text = try String(contentsOf: commands.appendingPathComponent(file), encoding: .utf8)
            let options = text.components(separatedBy: "@OptionGroup var limits: LogReadLimits").count - 1
            guard options > 0 else { continue }
            taking += options
            let readers = text.components(separatedBy: "ParsableCommand, ReadsLogs {").count - 1
            #expect(readers == options, "Sources/agent-eval/\(file): \(options) commands take --max-member-mib, \(readers) are ReadsLogs")
        }
        #expect(taking >= 30, "the scan found the commands that read logs (\(taking))")
    }

    @Test("the catalog's databases are reached only from its Store/ folder: GRDB, SQLite's C API and PostgresNIO nowhere else")
    func catalogDatabasesStayInStore() throws {
        let drivers: Set<String> = ["GRDB", "GRDBSQLite", "PostgresNIO"]
        let outside = try Self.imports(of: "Catalog").filter {
            drivers.contains($0.module) && !$0.place.hasPrefix("Sources/Catalog/Store/")
        }
        #expect(outside.isEmpty, "\(outside.map { "\($0.place) imports \($0.module)" })")
        #expect(try Self.imports(of: "Catalog").contains { $0.module == "GRDB" }, "the scan found the store's own imports")
    }

    @Test("the allowed imports form no cycle")
    func noCycle() throws {
        let table = try Self.table()
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
