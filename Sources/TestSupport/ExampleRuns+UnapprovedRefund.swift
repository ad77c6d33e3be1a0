import Foundation

extension ExampleRuns {
    /// Writes the support agent of `Fixtures/agents/support` into `directory` with one change:
    /// its policy has no `refund-approval` rule, so the refund the script asks for runs with no
    /// human's approval (the `approved-refunds` rule allows it). Beside it, the run the fixture
    /// agent makes, whose refund a human approved while its lookups ran on policy alone, is the
    /// pair that tells a filter about one call from filters about any calls. Returns the agent
    /// file's path; its model script is copied next to it.
    public static func writeUnapprovedRefundAgent(into directory: String) throws -> String {
        let source = fixtures.appendingPathComponent("agents/support")
        let text = try String(contentsOf: source.appendingPathComponent("agent.yaml"), encoding: .utf8)
        let rule = """
                - id: refund-approval
                  when: {tool: refund_order, approved: false}
                  verdict: approval_required
                  reason: a human approves every refund

            """
        guard text.contains(rule) else { throw ExampleError("Fixtures/agents/support/agent.yaml no longer has its refund-approval rule") }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let agent = (directory as NSString).appendingPathComponent("agent.yaml")
        try text.replacingOccurrences(of: rule, with: "").write(toFile: agent, atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(
            atPath: source.appendingPathComponent("support.model.yaml").path,
            toPath: (directory as NSString).appendingPathComponent("support.model.yaml"))
        return agent
    }
}
