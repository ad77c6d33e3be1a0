import AgentRuntime
public import Catalog
import Foundation
import Recording
import Synchronization
import TraceLog
public import Viewer

/// `agent-eval serve`: a web server on a local address over the catalog and the logs it
/// indexes — the runs list, run pages that fill in live, compare, approvals (docs/serve.md).
public final class WebServer: Sendable {
    /// What the server serves and how.
    public struct Options: Sendable {
        /// The address to listen on: the loopback one unless `token` is given.
        public var host = "127.0.0.1"
        /// 0: a free port.
        public var port = 7300
        /// Needed of every request (cookie, bearer header, or `?token=` once) when given; a
        /// host other than the loopback one needs one.
        public var token: String?
        /// Directories indexed at the start and watched: their logs appear as they are written.
        public var directories: [String] = []
        public var assets: ViewerAssets
        /// Who answers approvals by default (the page lets a person say otherwise).
        public var approver: String
        /// The most decompressed bytes a log's member may hold (`LogReadLimit`).
        public var memberLimit: Int
        /// Policy files the audit page offers, by name (the file's name without its folder).
        public var policies: [(name: String, path: String)] = []
        /// The project's quarantine file, read for each case page.
        public var quarantineFile: String?
        /// The clock the server waits on: the house's live clock, whose one watchdog keeps every
        /// page's 15-second waits (tests may inject another).
        public var clock: any Clock<Duration> = LiveClock()

        public init(assets: ViewerAssets, approver: String, memberLimit: Int) {
            self.assets = assets
            self.approver = approver
            self.memberLimit = memberLimit
        }

        /// Whether `host` is a loopback address (only this machine can connect): `localhost`,
        /// `::1`, or an IPv4 address in 127.0.0.0/8 (a name is not resolved: `127.example.com` is not one).
        public static func isLoopback(_ host: String) -> Bool {
            if host == "localhost" || host == "::1" { return true }
            let parts = host.split(separator: ".", omittingEmptySubsequences: false)
            return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in UInt8(part).map { _ in true } ?? false }
        }
    }

    /// `http://HOST:PORT/`.
    public let address: String
    public let port: Int
    private let http: LocalHTTPServer
    private let watcher: LogWatcher
    private let indexing: Task<Void, Never>
    private let handler: WebHandler

    private init(address: String, port: Int, http: LocalHTTPServer, watcher: LogWatcher, indexing: Task<Void, Never>, handler: WebHandler) {
        self.address = address
        self.port = port
        self.http = http
        self.watcher = watcher
        self.indexing = indexing
        self.handler = handler
    }

    /// Starts serving `catalog` as `options` say; the directories are indexed in the background.
    public static func start(catalog: Catalog, options: Options) async throws(WebError) -> WebServer {
        if options.token == nil && !Options.isLoopback(options.host) {
            throw WebError(
                .tokenNeeded, "serving on \(options.host) lets other machines in: it needs a token",
                hint: "give --token (or --token-file), or listen on 127.0.0.1")
        }
        var directories: [String] = []
        for directory in options.directories {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw WebError(.notADirectory, "\(directory) is not a directory", hint: "give directories of logs (runs/)")
            }
            directories.append(LogAccess.resolved(Catalog.absolute(directory)))
        }
        // Watching a large tree walks it: off the cooperative pool.
        let watched = directories
        let made = await OwnThread.run(name: "agent-eval serve watch") { () -> Result<LogWatcher, WebError> in
            do throws(WebError) {
                return .success(try LogWatcher(directories: watched))
            } catch {
                return .failure(error)
            }
        }
        let watcher = try made.get()
        let index = LiveIndex()
        let state = WebState(
            catalog: catalog, options: options, access: LogAccess(catalog: catalog, directories: directories), watcher: watcher,
            index: index)
        let handler = WebHandler(state: state)
        let http: LocalHTTPServer
        do {
            http = try await LocalHTTPServer(host: options.host, port: options.port, handler: handler)
        } catch {
            watcher.stop()
            throw WebError(
                .listenFailed, "cannot listen on \(options.host):\(options.port): \(error)", hint: "give another --listen address")
        }
        state.port.withLock { $0 = http.port }
        let limit = options.memberLimit
        let clock = options.clock
        let indexing = Task {
            await index.run(
                catalog: catalog, directories: directories, watcher: watcher, memberLimit: limit, pause: .milliseconds(200), clock: clock)
        }
        let host = options.host.contains(":") ? "[\(options.host)]" : options.host
        return WebServer(
            address: "http://\(host):\(http.port)/", port: http.port, http: http, watcher: watcher, indexing: indexing, handler: handler)
    }

    /// Serves until the calling task is cancelled (a signal, `withInterruption`), then stops.
    /// Nothing polls: the wait is the indexing task's, which the cancellation ends.
    public func serveUntilCancelled() async {
        let indexing = self.indexing
        await withTaskCancellationHandler {
            await indexing.value
        } onCancel: {
            indexing.cancel()
        }
        await stop()
    }

    /// Stops listening, ends every connection (open event streams included) and the indexing.
    public func stop() async {
        indexing.cancel()
        await http.stop()
        await indexing.value
        watcher.stop()
        handler.state.readers.finish()
    }
}
