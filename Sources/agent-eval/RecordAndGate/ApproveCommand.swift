import ArgumentParser

/// `agent-eval approve LOG CALL`: answer a call that waits for approval in a running proxy.
struct ApproveCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "Approve a tool call that waits for approval in a running agent-eval mcp-proxy or record.",
        discussion: """
            The proxy names the log and the call when a call waits (on its standard error); without a call, \
            this lists the calls that wait — only while a process holds the log's write lock: a proxy that exited \
            or was killed leaves pending files nothing would take an answer from, and they are neither listed \
            nor answered. The answer is recorded in the run's log as approval_recorded, with \
            --approver and --reason. `agent-eval deny` refuses one. The answer carries the call's proof, which the \
            proxy keeps in $XDG_RUNTIME_DIR/agent-eval-approvals (else ~/.local/state/agent-eval/approvals): answer \
            as the user that runs the proxy; an answer file written by other means is taken as a refusal. \
            docs/mcp.md, "Approvals".

            A run that stopped with approval_required (exec, run) is no longer waiting: it is continued with \
            `agent-eval exec AGENT_FILE --resume LOG --approve CALL` (or --deny CALL); `agent-eval fork --approve` \
            asks what the run would have done with another answer.

            Examples:
              agent-eval approve runs/fs-run-1.jsonl.gz
              agent-eval approve runs/fs-run-1.jsonl.gz mcp-3
            """
    )

    @OptionGroup
    var waiting: WaitingCallAnswer

    /// The older spelling of `agent-eval deny` (a visible --deny takes a call everywhere else).
    @Flag(name: .customLong("deny"), help: .hidden)
    var denySpelling = false

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        try waiting.answer(granted: !denySpelling, verb: "approve")
    }
}
