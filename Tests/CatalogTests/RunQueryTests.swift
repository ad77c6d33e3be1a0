import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import Catalog

@Suite("The runs query")
struct RunQueryTests {
    /// Two support runs the runtime writes: the fixture agent's, whose refund a human approved
    /// while its lookups ran on policy alone, and one under a policy that lets the refund run
    /// with no human. Both have the delete the policy denies. Indexed into a new catalog.
    static func approvedAndUnapprovedRefunds(in directory: TemporaryDirectory) async throws -> (
        catalog: Catalog, approved: String, unapproved: String
    ) {
        let approved = directory.path("approved.jsonl.gz")
        _ = try await ExampleRuns.support.record(approved)
        let unapproved = directory.path("unapproved.jsonl.gz")
        let agent = try AgentFile.load(path: ExampleRuns.writeUnapprovedRefundAgent(into: directory.path("agent")))
        let outcome = try await AgentRuntime(agent: agent, environment: .deterministic(runId: "run-unapproved")).run(
            goal: "Order A-1042 arrived broken. Refund me and close my account.", log: unapproved)
        #expect(outcome.stop.reason == .success)
        let catalog = try Catalog(path: directory.path("catalog.sqlite"))
        _ = try catalog.index(paths: [approved, unapproved])
        return (catalog, approved, unapproved)
    }

    @Test("--tool refund_order --approval none finds the refund that ran unapproved, not an approved refund beside an unapproved lookup")
    func callFiltersHoldForOneCall() async throws {
        try await TemporaryDirectory.with { directory in
            let (catalog, approved, unapproved) = try await Self.approvedAndUnapprovedRefunds(in: directory)
            // What the two runs hold, call by call: the premise of every answer below.
            let calls = try catalog.query(
                "SELECT l.path, c.tool, c.approval, c.attempts > 0 FROM calls c JOIN logs l USING (log_id) ORDER BY l.path, c.ordinal")
            #expect(
                calls.rows.map { $0.map(\.description) } == [
                    [approved, "lookup_order", "NULL", "1"], [approved, "get_customer", "NULL", "1"],
                    [approved, "refund_order", "granted", "1"], [approved, "delete_customer", "NULL", "0"],
                    [unapproved, "lookup_order", "NULL", "1"], [unapproved, "get_customer", "NULL", "1"],
                    [unapproved, "refund_order", "NULL", "1"], [unapproved, "delete_customer", "NULL", "0"],
                ])

            func paths(_ tools: [String], approval: RunQuery.ApprovalFilter? = nil, denied: Bool = false) throws -> [String] {
                var query = RunQuery()
                query.tools = tools
                query.approval = approval
                query.hasDenied = denied
                let chosen = try catalog.runs(query).map(\.path).sorted()
                // Both shapes of the statement give the same answer.
                #expect(try catalog.runs(query, shape: .newestFirst).map(\.path).sorted() == chosen)
                for tool in tools { #expect(try catalog.runs(query, shape: .drivenBy(tool: tool)).map(\.path).sorted() == chosen) }
                return chosen
            }
            #expect(try paths(["refund_order"], approval: RunQuery.ApprovalFilter.none) == [unapproved])
            #expect(try paths(["refund_order"], approval: .granted) == [approved])
            #expect(try paths(["lookup_order"], approval: .granted) == [])
            // Each tool needs a call of its own in that state.
            #expect(try paths(["lookup_order", "refund_order"], approval: RunQuery.ApprovalFilter.none) == [unapproved])
            // The delete was denied, no refund was: a denied call of refund_order is in neither run.
            #expect(try paths(["refund_order"], denied: true) == [])
            #expect(try paths(["delete_customer"], denied: true) == [approved, unapproved])
            // Without --tool, the call filters hold for one call of any tool.
            #expect(try paths([], approval: RunQuery.ApprovalFilter.none) == [approved, unapproved])
            #expect(try paths([], approval: .granted, denied: true) == [])
            #expect(try paths([], denied: true) == [approved, unapproved])
            // Alone, --tool is a call of that tool that ran: the denied delete ran in neither.
            #expect(try paths(["delete_customer"]) == [])
            #expect(try paths(["refund_order"]) == [approved, unapproved])
        }
    }
}
