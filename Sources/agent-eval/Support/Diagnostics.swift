import AgentRuntime
import ArgumentParser
import Catalog
import Foundation
import Synchronization
import TraceCore
import TraceLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The CLI's exit codes: a contract for CI.
enum Exit {
    static let success = ExitCode(0)
    /// Damaged, failed or regressed.
    static let failure = ExitCode(1)
    /// Could not run: unreadable input.
    static let unusable = ExitCode(2)
    /// The command line is wrong.
    static let usage = ExitCode(64)
}

/// Writes to standard error; on a terminal (unless NO_COLOR is set) `error:`, `warning:` and
/// `hint:` at the start of a line are coloured.
func printError(_ text: String) {
    var line = terminalSafe(text)
    if TerminalStyle.isEnabled(descriptor: 2) {
        for (prefix, colour) in [("error:", TerminalStyle.red), ("warning:", TerminalStyle.yellow), ("hint:", TerminalStyle.cyan)]
        where line.hasPrefix(prefix) {
            line = TerminalStyle.paint(prefix, colour) + line.dropFirst(prefix.count)
        }
    }
    FileHandleStream.standardError.write(line + "\n")
}

/// Colour, only where a person reads it: a terminal, no NO_COLOR (https://no-color.org), a
/// TERM that is not `dumb`. Pipes, files and CI logs get plain text.
enum TerminalStyle {
    static let red = "31"
    static let green = "32"
    static let yellow = "33"
    static let cyan = "36"

    static func isEnabled(descriptor: Int32) -> Bool {
        // Asked for every line printed: standard output's and error's answers are kept (the
        // environment is copied on each read of it).
        switch descriptor {
        case 1: return isStandardOutputStyled
        case 2: return isStandardErrorStyled
        default: return isStyled(descriptor)
        }
    }

    private static let isStandardOutputStyled = isStyled(1)
    private static let isStandardErrorStyled = isStyled(2)

    private static func isStyled(_ descriptor: Int32) -> Bool {
        let environment = ProcessInfo.processInfo.environment
        guard isatty(descriptor) == 1, environment["TERM"] != "dumb" else { return false }
        return (environment["NO_COLOR"] ?? "").isEmpty
    }

    static func paint(_ text: some StringProtocol, _ colour: String) -> String {
        "\u{1B}[\(colour)m\(text)\u{1B}[0m"
    }
}

/// Prints one line of output on standard output, its control characters made visible.
func say(_ text: String) {
    printOutput(terminalSafe(text))
}

/// `print` for everything the CLI writes on standard output, so that `StandardOutput` knows
/// whether a command has begun its output.
func printOutput(_ text: String, terminator: String = "\n") {
    guard StandardOutput.beginWriting() else { return }
    print(text, terminator: terminator)
}

/// Whether a command has written on standard output, and the errors it reported: what a
/// `--json` command that fails before it has printed anything prints instead of nothing, so
/// that a machine reading its standard output always gets a document.
enum StandardOutput {
    /// Who has standard output: nobody yet (0), the command, whose output has begun
    /// (`command`), or the error document (`errorDocumentOwner`). Claimed once, by an atomic
    /// exchange, so that a signal ending the process while the command prints its own
    /// document cannot add a second one. An atomic, not a lock: every line a long listing
    /// prints goes through it.
    private static let owner = Atomic<UInt8>(0)
    private static let command: UInt8 = 1
    private static let errorDocumentOwner: UInt8 = 2
    /// The errors `diagnose` printed, in order (the first `keptErrors` of them).
    private static let errors = Mutex<[DiagnosticRecord]>([])
    static let keptErrors = 100

    /// Whether the command line asks for JSON (`asksForJSON`), noted at start for the one
    /// path that has no command line at hand: a signal that ends the process.
    private static let isJSONRequested = Atomic<Bool>(false)

    static func noteCommandLine(_ arguments: [String]) {
        isJSONRequested.store(asksForJSON(arguments), ordering: .relaxed)
    }

    /// Notes that the command's output begins: true, unless an error document has taken
    /// standard output (a signal is ending the process), when the caller writes nothing.
    static func beginWriting() -> Bool {
        switch owner.load(ordering: .relaxed) {
        case command: return true
        case errorDocumentOwner: return false
        default: return owner.compareExchange(expected: 0, desired: command, ordering: .relaxed).original != errorDocumentOwner
        }
    }

    static func noteError(_ error: any Error) {
        errors.withLock { if $0.count < keptErrors { $0.append(record(of: error)) } }
    }

    private static func record(of error: any Error) -> DiagnosticRecord {
        var record: DiagnosticRecord
        if let diagnostic = error as? any Diagnostic {
            record = DiagnosticRecord(diagnostic)
            // The hint standard error shows, naming this CLI's commands.
            record.hint = commandHint(for: diagnostic) ?? diagnostic.hint
        } else {
            record = DiagnosticRecord(CommandError("system_error", FileProblem.reason(of: error)))
        }
        return record
    }

    /// Whether `arguments` ask for JSON on standard output: `--json` (or `log cat`'s `--jsonl`)
    /// before any `--` (what follows `--` is another program's command line).
    static func asksForJSON(_ arguments: [String]) -> Bool {
        arguments.prefix { $0 != "--" }.contains { $0 == "--json" || $0 == "--jsonl" }
    }

    /// The document a `--json` command prints when it ends with `code` (not 0) before printing
    /// anything: `{"error": {"code", "message", "location"?, "hint"?, "cause"?}, "errors": [...],
    /// "exit_code", "schema": "agent-eval/error", "version": 1}`. `errors` holds every error the
    /// command reported, in order, and `error` the first of them (usually the cause of the
    /// rest). An error it throws without reporting it (`thrown`: a usage error the argument
    /// parser found, a stop) comes last, worded as `message` says. Nil when it must not print one:
    /// the command has begun its output, or another error document has been printed. A
    /// document returned has taken standard output: print it with `printErrorDocument`.
    /// `errorCode` names that last error (by default "usage" for exit 64, else "failed").
    static func claimErrorDocument(
        exitCode code: Int32, thrown: any Error, message: @autoclosure () -> String, errorCode: String? = nil
    ) -> JSONValue? {
        guard code != 0, owner.compareExchange(expected: 0, desired: errorDocumentOwner, ordering: .relaxed).exchanged else {
            return nil
        }
        var reported = errors.withLock { $0 }
        if !(thrown is ExitCode) || reported.isEmpty {
            let text = message()
            reported.append(
                DiagnosticRecord(
                    CommandError(
                        errorCode ?? (code == Exit.usage.rawValue ? "usage" : "failed"),
                        text.isEmpty ? "the command ended with exit status \(code)" : text
                    )))
        }
        var object = ObjectBuilder()
        object.set("error", reported[0].json)
        object.set("errors", JSONValue.array(reported.map(\.json)))
        object.set("exit_code", Int(code))
        object.set("schema", "agent-eval/error")
        object.set("version", 1)
        return object.json
    }
}

extension StandardOutput {
    /// What a signal that ends the process prints on standard output (`Interruption`): the
    /// error document, with the interruption as its last error, when the command line asked
    /// for JSON and nothing has been printed yet.
    static func printInterruption(exitCode: Int32, message: String) {
        guard isJSONRequested.load(ordering: .relaxed),
            let document = claimErrorDocument(
                exitCode: exitCode, thrown: CommandError("interrupted", message), message: message, errorCode: "interrupted")
        else { return }
        printErrorDocument(document)
    }

    /// Prints a document `claimErrorDocument` returned: standard output is its, so the command's
    /// own writers (`beginWriting`) write nothing after it.
    static func printErrorDocument(_ document: JSONValue) {
        print(JSONWriter.encodeString(document))
    }
}

/// `text` with the control characters a terminal would act on — escape sequences, carriage
/// returns, backspaces, C1 controls — shown as `\x1b` and the like. Model answers, tool output
/// and file contents are untrusted: printed raw, they could move the cursor, rewrite earlier
/// lines or change the terminal's title. Newlines and tabs stay, but a line that would begin
/// with `::` shows its first colon as `\x3a`: a CI runner takes such a line for a workflow
/// command (a recorded tool name `lookup\n::stop-commands::x` would switch off agent-eval's own
/// annotations). agent-eval's annotations are printed without this.
func terminalSafe(_ text: String) -> String {
    let safe = escapingControls(text)
    guard safe.hasPrefix("::") || safe.contains("\n::") else { return safe }
    let lines = safe.split(separator: "\n", omittingEmptySubsequences: false).map { line in
        line.hasPrefix("::") ? "\\x3a" + line.dropFirst() : line
    }
    return lines.joined(separator: "\n")
}

private func escapingControls(_ text: String) -> String {
    func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
    }
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var result = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
        if isControl(scalar) {
            result.append(contentsOf: String(format: "\\x%02x", scalar.value).unicodeScalars)
        } else {
            result.append(scalar)
        }
    }
    return String(result)
}

/// Prints an error in the CLI's form — `error: …`, `  --> where`, `hint: …`, `caused by: …` —
/// on standard error, and returns the exit code the command gives it. Each command passes its
/// own: what an error means for the exit status is the command's contract, not the error's.
@discardableResult
func diagnose(_ error: any Error, exit code: ExitCode = Exit.unusable) -> ExitCode {
    if let error = error as? ExitCode { return error }
    StandardOutput.noteError(error)
    if let diagnostic = error as? any Diagnostic {
        for line in diagnostic.lines(hint: commandHint(for: diagnostic)) { printError(line) }
    } else {
        // From the system (a directory that cannot be made, a file that cannot be written):
        // its own sentence, not its type's dump.
        printError("error: \(FileProblem.reason(of: error))")
    }
    return code
}

/// An error the CLI finds itself (a step a log does not have, a flag that needs another): a
/// `Diagnostic` like the library's, printed by `diagnose` in the same form. Codes are `cli.*`.
struct CommandError: Diagnostic, Hashable {
    var diagnosticCode: String
    var message: String
    var place: SourceLocation?
    var hint: String?

    init(_ code: String, _ message: String, at place: SourceLocation? = nil, hint: String? = nil) {
        self.diagnosticCode = "cli." + code
        self.message = message
        self.place = place
        self.hint = hint
    }
}

/// Prints a diagnostic that does not stop the command, as `warning: …` lines.
func warn(_ diagnostic: any Diagnostic) {
    for line in diagnostic.lines(hint: commandHint(for: diagnostic)) {
        printError(line.hasPrefix("error: ") ? "warning: " + line.dropFirst("error: ".count) : line)
    }
}

/// Damage that `agent-eval log verify` reports in full: other commands point to it.
let damageCodes: Set<String> = [
    "log.corrupt_member", "log.split_event", "log.invalid_event", "log.broken_chain", "log.sequence_gap", "log.sequence_repeat",
    "log.run_mismatch",
]

/// The hint this CLI gives for a diagnostic, naming its own commands and flags (library
/// hints never do); nil keeps the library's.
func commandHint(for diagnostic: any Diagnostic) -> String? {
    let path = diagnostic.place?.path ?? "LOG"
    if damageCodes.contains(diagnostic.diagnosticCode) {
        return "run `agent-eval log verify \(ShellWords.quoted(path))` for a full report of the damage"
    }
    switch diagnostic.diagnosticCode {
    case "log.torn_tail":
        return "run `agent-eval log repair \(ShellWords.quoted(path))` to seal it"
    case "log.stray_seal":
        return "if nothing needs it, remove it: rm \(ShellWords.quoted(path + ".seal"))"
    case "log.pending_seal":
        return "run `agent-eval log repair \(ShellWords.quoted(path))` to finish the interrupted seal"
    case "log.digest_mismatch":
        return "run `agent-eval replay \(ShellWords.quoted(path))` to see the step whose digest differs; keep the file as evidence"
    case "log.not_repairable":
        return "inspect it with `agent-eval log verify \(ShellWords.quoted(path))`; keep the file as evidence rather than rewriting it"
    case "runtime.undecided_calls":
        return "pass --approve <call-id> or --deny <call-id> for each waiting call"
    case "catalog.newer_schema" where Catalog.isServer(path):
        // A team's catalog holds other machines' runs and history: it is not rebuilt from here.
        return "use the agent-eval that wrote it, or a newer one (upgrade this one)"
    case "catalog.corrupt", "catalog.newer_schema":
        return "the catalog is derived from the logs: rebuild it with `agent-eval catalog rebuild <log directories> --catalog \(path)`"
    case "catalog.not_a_catalog":
        // Someone's file: rebuilding over it would destroy it, and rebuild refuses to.
        if Catalog.isServer(path) {
            return "give --catalog (or AGENT_EVAL_CATALOG) a database of the catalog's own, or an empty one"
        }
        return "give --catalog (or AGENT_EVAL_CATALOG) the catalog's own file, or a path where no file is yet"
    case "catalog.history_unreadable":
        return "copy \(ShellWords.quoted(path)) somewhere safe, then add --discard-history to rebuild without its suite history"
    case "catalog.timed_out":
        return "narrow the statement (a WHERE on an indexed column, a LIMIT), or give it longer with --timeout SECONDS (0: no limit)"
    case "eval.unreadable_baseline":
        // `--update-baseline` reads the file it adds to, so only starting over writes past it.
        return "mend the file, or write it again from a run you trust with `agent-eval run … --update-baseline --replace-baseline`"
    default:
        // A wrapper with nothing of its own to say (an export that could not read its log)
        // gives the hint of what it wraps, when the library's own hint is not there.
        guard diagnostic.hint == nil, let cause = diagnostic.cause else { return nil }
        return commandHint(for: cause) ?? cause.hint
    }
}

/// Unbuffered writes to a file descriptor.
struct FileHandleStream: TextOutputStream {
    let descriptor: Int32

    static let standardError = FileHandleStream(descriptor: 2)

    func write(_ string: String) {
        if descriptor == 1, !StandardOutput.beginWriting() { return }
        var text = string
        text.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let wrote = Glibc_write(descriptor, base + offset, buffer.count - offset)
                if wrote <= 0 { return }
                offset += wrote
            }
        }
    }
}

private func Glibc_write(_ fd: Int32, _ pointer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, pointer, count)
}

/// Buffered standard output for large listings (a `print` per line is slow when piped).
struct OutputBuffer {
    private var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(1 << 16) }

    mutating func append(_ text: String) {
        bytes.append(contentsOf: terminalSafe(text).utf8)
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { flush() }
    }

    /// Appends bytes as they are: for JSON, whose encoding already escapes what must be.
    mutating func append(raw: [UInt8]) {
        bytes.append(contentsOf: raw)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func append(line: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: line)
        bytes.append(0x0A)
        if bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
        // Written when it reaches the descriptor: what is buffered and never flushed is not output.
        if !bytes.isEmpty, !StandardOutput.beginWriting() {
            bytes.removeAll()
            return
        }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count, let base = buffer.baseAddress {
                let wrote = Glibc_write(1, base + offset, buffer.count - offset)
                if wrote <= 0 { return }
                offset += wrote
            }
        }
        bytes.removeAll(keepingCapacity: true)
    }
}

/// Prints a JSON value on standard output in canonical form.
func printJSON(_ value: JSONValue) {
    printOutput(JSONWriter.encodeString(value))
}

/// Runs `body` in a task that SIGINT and SIGTERM cancel, instead of ending the process: the
/// work stops at its next step with everything recorded. Returns the value and the signal
/// that came, if one did (the command exits 128 + signal). `Interruption` says what the
/// signals do elsewhere.
///
/// The commands that run agents and pipelines call it, so it also makes this process the
/// keeper of what they start (`SpawnedProcess.adoptOrphans`): at exit, after a signal too,
/// nothing a tool, an MCP server or a command task started is left running.
func withInterruption<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> (T, Int32?) {
    SpawnedProcess.adoptOrphans()
    return try await Interruption.cancelling(Task { try await body() })
}
