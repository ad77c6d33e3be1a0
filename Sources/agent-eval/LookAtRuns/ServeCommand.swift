import ArgumentParser
import Catalog
import EvalEngine
import Foundation
import TraceCore
import TraceLog
import Viewer
import WebUI

/// `agent-eval serve`: the live web UI over the catalog and its logs.
struct ServeCommand: AsyncParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a live web UI over the catalog's runs: filter them, watch one being recorded, compare two, answer approvals.",
        discussion: """
            Open the address it prints. The runs list takes every filter of `agent-eval runs` (the address holds \
            them, so a link can be shared); each run's page is the page `agent-eval view` writes, and while its log \
            grows its steps arrive as they are written (server-sent events; a page that reconnects picks up where \
            it was). DIRs given are indexed into the catalog at the start and watched: a run that exec, record, run \
            or a pipeline writes there appears in the list within a second. Calls waiting for a person in a running \
            mcp-proxy or record can be approved or denied from the page, recorded as `agent-eval approve` records \
            them; of two answers at once one is taken. Suite runs link each failure to its run's step; a case's \
            history shows its outcome per commit and its quarantine; with --policy, the runs shown can be audited. \
            A long run's page (a log of 4 MiB or more) comes at once with its first 25 steps; the others follow \
            as outlines, and a step's events load as the reader reaches it.

            By default it listens on 127.0.0.1 and answers only requests addressed to it there; every local user \
            of the machine can reach it, so on a shared machine give a token there too. Any other address needs \
            --token (or --token-file): every request then needs it (the address printed carries it once, then a \
            cookie). Only logs the catalog indexes, or under the DIRs, are read. docs/serve.md.

            Stops cleanly on SIGINT or SIGTERM (exit 0). Exit 2: the address cannot be listened on, a DIR is not a \
            directory, a token is missing for an address other than the loopback one, the catalog cannot be \
            opened; 64: usage.

            Examples:
              agent-eval serve runs/
              agent-eval serve --listen 127.0.0.1:0 --json runs/    # a free port, printed as JSON
              agent-eval serve --listen 0.0.0.0:7300 --token-file ~/.agent-eval-token runs/
            """
    )

    @Argument(help: "Directories of logs to index and watch (their new and growing logs appear live).")
    var directories: [String] = []

    @Option(help: ArgumentHelp("The address to listen on: HOST:PORT, :PORT or PORT (port 0: a free one).", valueName: "address"))
    var listen = "127.0.0.1:7300"

    @Option(help: "The token every request must carry (needed to listen on any address but 127.0.0.1).")
    var token: String?

    @Option(help: ArgumentHelp("A file whose first line is the token.", valueName: "file"))
    var tokenFile: String?

    @Option(help: "Who answers approvals by default (default: the USER variable); the page can say otherwise.")
    var approver: String?

    @Option(
        help: ArgumentHelp(
            "A policy file the audit page offers (repeatable): a policy: block and side_effects:, as `agent-eval audit --policy` takes.",
            valueName: "file"))
    var policy: [String] = []

    @Flag(help: "Open the runs list in the default browser.")
    var open = false

    @Flag(help: "Print where it listens as one JSON line on standard output, and another when it stops.")
    var json = false

    @OptionGroup var location: CatalogArguments

    @OptionGroup var limits: LogReadLimits

    func validate() throws {
        guard CollectCommand.address(listen) != nil else {
            throw ValidationError("--listen takes HOST:PORT, :PORT or PORT (0-65535); \"\(listen)\" is none")
        }
        if token != nil && tokenFile != nil { throw ValidationError("give --token or --token-file, not both") }
        for file in policy where !FileManager.default.fileExists(atPath: file) {
            throw ValidationError("--policy \(file): there is no such file")
        }
        let names = policy.map { ($0 as NSString).lastPathComponent }
        if Set(names).count != names.count { throw ValidationError("two --policy files have the same name: give files whose names differ") }
        if let token, !Self.isToken(token) {
            throw ValidationError(
                "--token must be 16 or more letters, digits, '-', '_', '.' or '~' (make one with: openssl rand -hex 16)")
        }
    }

    /// A token a cookie and a header carry as it is: 16 or more URL-safe characters.
    static func isToken(_ text: String) -> Bool {
        text.count >= 16
            && text.unicodeScalars.allSatisfy {
                $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.~".unicodeScalars.contains($0))
            }
    }

    func run() async throws {
        guard let (host, port) = CollectCommand.address(listen) else { throw Exit.usage }
        var secret = token
        if let tokenFile {
            let text: String
            do {
                text = try String(contentsOfFile: tokenFile, encoding: .utf8)
            } catch {
                throw diagnose(
                    CommandError(
                        "token_unreadable",
                        "--token-file \(tokenFile) cannot be read: \(FileProblem.reading(tokenFile) ?? FileProblem.reason(of: error))",
                        at: SourceLocation(path: tokenFile),
                        hint: "give the file that holds the token, or make one: openssl rand -hex 16 > \(tokenFile)"))
            }
            guard let line = text.split(whereSeparator: \.isNewline).first.map({ $0.trimmingCharacters(in: .whitespaces) }),
                Self.isToken(line)
            else {
                throw diagnose(
                    CommandError(
                        "token_unreadable",
                        "--token-file \(tokenFile) holds no token on its first line (16 or more letters, digits, '-', '_', '.' or '~')",
                        at: SourceLocation(path: tokenFile), hint: "write one: openssl rand -hex 16 > \(tokenFile)"))
            }
            secret = line
        }
        let catalog = try await location.open()
        let assets: ViewerAssets
        do {
            assets = try ViewerAssets.load(from: try BundledFiles.viewerAssets())
        } catch {
            throw diagnose(error)
        }
        var options = WebServer.Options(
            assets: assets, approver: approver ?? ProcessInfo.processInfo.environment["USER"] ?? "agent-eval serve",
            memberLimit: limits.memberLimit)
        options.host = host
        options.port = port
        options.token = secret
        options.directories = directories
        options.policies = policy.map { (($0 as NSString).lastPathComponent, Catalog.absolute($0)) }
        options.quarantineFile = QuarantineFile.defaultPath()
        let server: WebServer
        do {
            server = try await WebServer.start(catalog: catalog, options: options)
        } catch {
            throw diagnose(error)
        }
        let link = server.address + (secret.map { "?token=" + $0 } ?? "")
        if json {
            printJSON([
                "event": "listening", "url": .string(link), "port": .int(server.port), "catalog": .string(Catalog.redacted(catalog.path)),
            ])
            fflush(nil)
        } else {
            printError("serving the runs of \(Catalog.redacted(catalog.path)) at \(link); Ctrl-C stops")
            if !directories.isEmpty {
                printError("watching \(directories.map(displayPath).joined(separator: ", ")) for new and growing logs")
            }
        }
        if open { HTMLOutput.open(link) }
        // Until a signal cancels it.
        _ = try await withInterruption { await server.serveUntilCancelled() }
        if json {
            printJSON(["event": "stopped"])
        } else {
            printError("stopped")
        }
        fflush(nil)
    }
}
