import ArgumentParser
import ConfigFile
import TraceLog

/// `--max-member-mib`: what one gzip member of a log may inflate to in every log the command
/// reads (`LogReadLimit`), for every command that reads logs (`ReadsLogs`).
struct LogReadLimits: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            """
            The most decompressed data one gzip member of a log may hold, in MiB (1 to 1024; default: maxMemberMib in \
            .agent-eval/settings.yaml, else 64). An event never spans members, so this bounds every event too, and the \
            memory each log being read takes. A log with a larger member (a decompression bomb, an endless line, another \
            writer's enormous event) stops the read at that member with an error naming it.
            """, valueName: "mib"))
    var maxMemberMib: Int?

    func validate() throws {
        if let maxMemberMib, !LogReadLimit.allowedMiB.contains(maxMemberMib) {
            throw ValidationError(
                "--max-member-mib must be between \(LogReadLimit.allowedMiB.lowerBound) and \(LogReadLimit.allowedMiB.upperBound)")
        }
    }

    /// Sets the process's limit before `command` runs, when it reads logs (`ReadsLogs`), so that
    /// every reader in it keeps the bound: its option, else the project's setting, else the
    /// default. A settings file that does not read is reported, and the command does not run
    /// (exit 2).
    static func apply(to command: any ParsableCommand) throws(ExitCode) {
        guard let reader = command as? any ReadsLogs else { return }
        do {
            try apply(option: reader.limits.maxMemberMib)
        } catch {
            throw diagnose(error)
        }
    }

    private static func apply(option maxMemberMib: Int?) throws(ConfigError) {
        // The settings file is read even when the option is given: one that does not read is
        // an error whatever the command line says.
        let setting = try ProjectSettings.load()?.maxMemberMib
        LogReadLimit.set(mib: maxMemberMib ?? setting ?? (LogReadLimit.defaultMemberBytes >> 20))
    }

    /// The limit in force, in bytes (after `apply`).
    var memberLimit: Int { LogReadLimit.memberBytes }
}

/// A command that reads logs: `AgentEval.main` applies its `--max-member-mib` (or the project's
/// setting) before it runs, so every reader in it keeps that bound.
protocol ReadsLogs {
    var limits: LogReadLimits { get }
}
