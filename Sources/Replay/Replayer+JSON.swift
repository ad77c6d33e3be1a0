public import TraceCore
import TraceLog

extension Replayer.Result {
    /// The whole replay as `agent-eval replay --json` prints it (docs/replay.md), in three
    /// pieces so that the steps stream out as they are replayed and memory stays flat in the
    /// log's length: `streamingHead`, then the steps' `ReplayStep.json` separated by commas,
    /// then `streamingTail` (or `streamingTail(error:)` when reading stopped at damage). The
    /// members come in this order: `schema`, `version`, `log`, `steps`, then the rest.
    public static func streamingHead(log: String) -> [UInt8] {
        Array("{\"schema\":\"agent-eval/replay\",\"version\":1,\"log\":".utf8) + JSONWriter.encode(.string(log))
            + Array(",\"steps\":[".utf8)
    }

    /// The end of the document after the last step: the run id, the final state, the checks.
    public func streamingTail() -> [UInt8] {
        var tail = Array("]".utf8)
        for (key, value) in tailMembers {
            tail += Array(",".utf8) + JSONWriter.encode(.string(key)) + Array(":".utf8) + JSONWriter.encode(value)
        }
        return tail + Array("}".utf8)
    }

    /// The members after `steps`, in the order the document has them: `run_id`, `final_state`,
    /// `verification`.
    public var tailMembers: [(key: String, value: JSONValue)] {
        var verification = ObjectBuilder()
        verification.set("digests_checked", digestsChecked)
        verification.set(
            "digest_mismatches",
            JSONValue.array(
                digestMismatches.map { ["seq": .int($0.sequence), "recorded": .string($0.recorded), "computed": .string($0.computed)] }))
        verification.set("tear", read.tear.map { "\($0)" })
        verification.set("end_signed", endIsSigned)
        return [
            ("run_id", state.runId.map { .string($0) } ?? .null), ("final_state", StateSummary(state, settled: settled).json),
            ("verification", verification.json),
        ]
    }

    /// The end of the document when reading stopped at damage: the steps read before it, then
    /// the diagnostic.
    public static func streamingTail(error: any Diagnostic) -> [UInt8] {
        Array("],\"error\":".utf8) + JSONWriter.encode(error.json) + Array("}".utf8)
    }
}

extension ReplayStep {
    /// One step as `agent-eval replay --step N --json` prints it (docs/replay.md).
    public func document(log: String, runId: String, fullState: RunState?) -> JSONValue {
        var object = ObjectBuilder()
        object.set("schema", "agent-eval/replay-step")
        object.set("version", 1)
        object.set("log", log)
        object.set("run_id", runId)
        object.set("step", json)
        object.set("full_state", fullState?.json)
        return object.json
    }
}
