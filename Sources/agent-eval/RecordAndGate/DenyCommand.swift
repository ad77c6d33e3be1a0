import ArgumentParser

/// `agent-eval deny LOG CALL`: refuse a call that waits for approval in a running proxy.
struct DenyCommand: ParsableCommand, ReadsLogs {
    static let configuration = CommandConfiguration(
        commandName: "deny",
        abstract: "Refuse a tool call that waits for approval in a running agent-eval mcp-proxy or record.",
        discussion: """
            As `agent-eval approve`, with the answer no: the proxy answers the call with an error and records \
            approval_recorded (granted false) with --approver and --reason. docs/mcp.md, "Approvals".

            Examples:
              agent-eval deny runs/fs-run-1.jsonl.gz mcp-3 --reason "not on a Friday"
            """
    )

    @OptionGroup
    var waiting: WaitingCallAnswer

    @OptionGroup var limits: LogReadLimits

    func run() throws {
        try waiting.answer(granted: false, verb: "deny")
    }
}
