import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What SIGINT (Ctrl-C), SIGTERM and SIGHUP (the terminal closed) do, in every command: the one
/// place they are handled. SIGHUP is taken like SIGTERM: a closed terminal stops `record` with its
/// stop recorded and its command's processes ended, not mid-write.
///
/// `install()`, at start, makes either signal end the process promptly with 128 + its number
/// — 130 for SIGINT, 143 for SIGTERM — whatever the command is doing: reading and checking
/// case files (`check`, `run` before anything runs), indexing, importing, merging results.
/// That work has nothing to finish, and what it would print is incomplete.
///
/// Work that must record how it ended (live runs, pipelines, the cases of `run`) runs under
/// `withInterruption`, which takes a signal over: its task is cancelled, stops at its next step
/// with its stop recorded and its logs closed, and the command exits 128 + signal once it has
/// said what ran. A second signal meanwhile ends the process at once.
enum Interruption {
    private struct State {
        var isInstalled = false
        /// Cancels the work of the innermost `withInterruption`, while one runs.
        var cancel: (@Sendable () -> Void)?
        /// The signal that cancelled it.
        var received: Int32?
    }

    private static let state = Mutex(State())
    // Kept for the life of the process: a signal source that is released stops delivering.
    private static let sources = Mutex<[any DispatchSourceSignal]>([])

    /// Handles SIGINT and SIGTERM from now on (idempotent). Call it first thing.
    static func install() {
        let isFirst = state.withLock { state in
            defer { state.isInstalled = true }
            return !state.isInstalled
        }
        guard isFirst else { return }
        sources.withLock { sources in
            sources = [SIGINT, SIGTERM, SIGHUP].map { number -> any DispatchSourceSignal in
                // Ignored, so that only the source sees it (children start with every signal at
                // its default: `SpawnedProcess`).
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { received(number) }
                source.resume()
                return source
            }
        }
    }

    /// Runs until `task` ends, a signal cancelling it instead of ending the process; returns its
    /// value and the signal that came, if one did.
    static func cancelling<T: Sendable>(_ task: Task<T, any Error>) async throws -> (T, Int32?) {
        install()
        let outer = state.withLock { state in
            defer { state.cancel = { task.cancel() } }
            return state.cancel
        }
        defer { state.withLock { $0.cancel = outer } }
        let value = try await task.value
        return (value, state.withLock { $0.received })
    }

    /// `SIGINT`, `SIGTERM` or `SIGHUP`.
    static func name(of number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "SIGTERM"
        }
    }

    private static func received(_ number: Int32) {
        let cancel = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.received == nil, let cancel = state.cancel else { return nil }
            state.received = number
            return cancel
        }
        if let cancel {
            cancel()
            return
        }
        let message = "interrupted by \(name(of: number)): stopped before finishing"
        printError(message)
        StandardOutput.printInterruption(exitCode: 128 + number, message: message)
        // `exit`, not `_exit`: the handlers registered at exit still run (the sweep of the
        // processes tools left behind).
        exit(128 + number)
    }
}
