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

    /// The paths of the runs `query` lists, sorted; every shape of the statement gives the same.
    static func paths(_ query: RunQuery, in catalog: Catalog) throws -> [String] {
        let chosen = try catalog.runs(query).map(\.path).sorted()
        #expect(try catalog.runs(query, shape: .newestFirst).map(\.path).sorted() == chosen)
        for tool in query.tools { #expect(try catalog.runs(query, shape: .drivenBy(tool: tool)).map(\.path).sorted() == chosen) }
        return chosen
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
                return try Self.paths(query, in: catalog)
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

    @Test("--not-tool lists only runs whose logs were read whole to their stop: a damaged or torn copy cannot show the tool never ran")
    func notToolNeedsTheWholeRun() async throws {
        try await TemporaryDirectory.with { directory in
            let (catalog, approved, unapproved) = try await Self.approvedAndUnapprovedRefunds(in: directory)
            // Copies of the approved run that end before its refund: one with a byte changed in
            // its first member (the reader stops there), one cut short (a crashed writer).
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: approved)))
            let damaged = directory.path("damaged.jsonl.gz")
            let torn = directory.path("torn.jsonl.gz")
            try Data(bytes.prefix(bytes.count / 3)).write(to: URL(fileURLWithPath: torn))
            bytes[40] ^= 0x55
            try Data(bytes).write(to: URL(fileURLWithPath: damaged))
            _ = try catalog.index(paths: [damaged, torn])
            // The premise: the copies are indexed, not intact, and show no refund.
            let copies = try catalog.query(
                """
                SELECT path, status, (SELECT COUNT(*) FROM calls c WHERE c.log_id = l.log_id AND c.tool = 'refund_order')
                FROM logs l WHERE path IN (?, ?) ORDER BY path
                """, arguments: [.text(damaged), .text(torn)])
            #expect(copies.rows.map { $0.map(\.description) } == [[damaged, "damaged", "0"], [torn, "torn", "0"]])

            func paths(notTools: [String], tools: [String] = []) throws -> [String] {
                var query = RunQuery()
                query.tools = tools
                query.notTools = notTools
                return try Self.paths(query, in: catalog)
            }
            // Both whole runs refunded; the copies stopped reading before theirs.
            #expect(try paths(notTools: ["refund_order"]) == [])
            #expect(try paths(notTools: ["delete_customer"]) == [approved, unapproved])
            #expect(try paths(notTools: ["delete_customer"], tools: ["lookup_order"]) == [approved, unapproved])
            // Asked for by status, the copies are still there: only the claim of absence needs the whole run.
            var byStatus = RunQuery()
            byStatus.statuses = [.damaged, .torn]
            #expect(try catalog.runs(byStatus).map(\.path).sorted() == [damaged, torn])
        }
    }
}
