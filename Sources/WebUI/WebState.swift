import Catalog
import EvalEngine
import Foundation
import Synchronization
import TraceCore
import TraceLog

/// What every request of one server shares.
final class WebState: Sendable {
    let catalog: Catalog
    let options: WebServer.Options
    let access: LogAccess
    let watcher: LogWatcher
    let index: LiveIndex
    /// Asked of every request that changes something (an approval): pages carry it, and a page
    /// of another site cannot read one of ours to learn it.
    let csrfToken: String
    /// The threads every blocking read of a request runs on (replays, the catalog's step tables,
    /// approval files, the quarantine and policy files): off the cooperative pool, and at most two
    /// at once however many pages are open (the others wait their turn).
    let readers = JobThreads(count: 2, name: "agent-eval serve reader")
    /// The port listened on, once known.
    let port = Mutex(0)
    /// This server's run: event ids that name another came from a server before it.
    let epoch: String

    /// What a request to this server says in `Host` when it listens on a loopback address.
    var loopbackHosts: Set<String> {
        let port = port.withLock { $0 }
        var hosts: Set = ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"]
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        hosts.insert("\(host.lowercased()):\(port)")
        return hosts
    }

    init(catalog: Catalog, options: WebServer.Options, access: LogAccess, watcher: LogWatcher, index: LiveIndex) {
        self.catalog = catalog
        self.options = options
        self.access = access
        self.watcher = watcher
        self.index = index
        var generator = SystemRandomNumberGenerator()
        csrfToken = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined(separator: "-")
        epoch = String(generator.next() as UInt32, radix: 36)
    }

    /// The project's quarantine file as it is now (nil: none given, or it does not read).
    func quarantine() -> QuarantineFile? {
        guard let path = options.quarantineFile else { return nil }
        return try? QuarantineFile.load(path: path)
    }

    /// What every page is told about the server it came from.
    var served: JSONValue {
        var object = ObjectBuilder()
        object.set("csrf", csrfToken)
        object.set("approver", options.approver)
        object.set("catalog", Catalog.redacted(catalog.path))
        object.set("directories", options.directories)
        object.set("policies", options.policies.map(\.name))
        return object.json
    }
}
