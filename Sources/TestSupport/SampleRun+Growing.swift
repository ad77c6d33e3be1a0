public import TraceCore
public import TraceLog

extension SampleRun {
    /// The packet of step `step` of a run that builds its packets as a context builder does:
    /// a window of the newest observations, and every older one listed as omitted (newest
    /// first, after the tools policy hides).
    public static func growingPacket(step: Int, window: Int = 4) -> ContextBuilt {
        let calls = (1..<step).map { "call-\($0)" }
        let included = calls.suffix(window)
        let left = calls.dropLast(window).reversed()
        return ContextBuilt(
            goal: "Summarise the incident.", stateSummary: "Step \(step). \(calls.count) tool calls executed.",
            observations: included.map { ItemReference(id: $0, summary: "lookup ok: \($0)") }, toolsDisclosed: ["lookup", "search"],
            memory: step.isMultiple(of: 3) ? [ItemReference(id: "mem-1", summary: "a note")] : [],
            omitted: [OmittedItem(id: "tool:delete", reason: .policy, detail: "write tools hidden")]
                + left.map { OmittedItem(id: $0, reason: .budget, detail: "the observation needs 40 tokens") },
            tokenEstimate: 100 + 10 * included.count)
    }

    /// Writes `steps` steps of packets (and a step end each) and returns the packets appended.
    @discardableResult
    public static func writeGrowingRun(to path: String, steps: Int, options: LogWriter.Options) throws -> [ContextBuilt] {
        var packets: [ContextBuilt] = []
        try LogWriter.withWriter(creating: path, runId: "r-delta", options: options) { writer in
            try writer.append(.runStarted(SampleRun.supportStart()), step: 0, timeUs: 1)
            for step in 1...steps {
                let packet = growingPacket(step: step)
                packets.append(packet)
                try writer.append(.contextBuilt(packet), step: step, timeUs: step * 10)
                try writer.append(
                    .stepEnded(StepEnded(stateDigest: "sha256:" + String(repeating: "0", count: 64))), step: step, timeUs: step * 10 + 1)
            }
            try writer.append(.runStopped(RunStopped(reason: .success, answer: "done")), step: steps, timeUs: steps * 10 + 5)
        }
        return packets
    }
}
