import TraceCore

/// Matches an expected call sequence against the executed calls, in one of five modes. Modes
/// name the relation of the run's calls to the expected ones (`superset`: the run made at least
/// the expected calls), as LangChain agentevals' `trajectory_match_mode` does.
/// Unordered modes pair calls by a maximum one-to-one assignment; in-order matching takes the
/// earliest possible call for each expected one, which finds a match whenever one exists.
enum SequenceMatch {
    static func check(_ sequence: SequenceExpectation, against executed: [ToolCallRecord]) -> ExpectationFailure? {
        let expected = sequence.calls
        // Each executed call's arguments parsed once (a record holds them as text), not per pair.
        let arguments = executed.map(\.arguments)
        let matches = { (i: Int, j: Int) in expected[i].matches(tool: executed[j].tool, arguments: arguments[j]) }
        let wanted = expected.map(\.description).joined(separator: ", ")
        let actualList = executed.isEmpty ? "no calls" : executed.map { "\($0.tool)" }.joined(separator: ", ")
        func failure(_ actual: String, step: Int?, callId: String? = nil) -> ExpectationFailure {
            ExpectationFailure(
                expectation: "sequence", expected: "\(sequence.mode.rawValue): \(wanted)", actual: actual, step: step, callId: callId)
        }
        switch sequence.mode {
        case .strict:
            // Calls proposed together (one decision, one step) have no order between them: each
            // such batch is compared with the expected calls at its positions as a set.
            var index = 0
            while index < max(expected.count, executed.count) {
                guard index < expected.count else {
                    return failure(
                        "call \(index + 1) is an extra \(executed[index].tool) (\(executed[index].id)); executed: \(actualList)",
                        step: executed[index].step, callId: executed[index].id)
                }
                guard index < executed.count else {
                    return failure(
                        "call \(index + 1) should be \(expected[index]) but the run made only \(counted(executed.count, "call")): \(actualList)",
                        step: executed.last?.step)
                }
                var end = index + 1
                while end < executed.count, executed[end].step == executed[index].step { end += 1 }
                let wanted = Array(index..<min(end, expected.count))
                let batch = Array(index..<end)
                if batch.count == 1 {
                    if !matches(index, index) {
                        let call = executed[index]
                        let why =
                            call.tool == expected[index].tool
                            ? (expected[index].arguments?.mismatch(arguments[index]) ?? "") : "\(call.tool) instead"
                        return failure(
                            "call \(index + 1) (\(call.id)) does not match \(expected[index]): \(why)", step: call.step, callId: call.id)
                    }
                } else {
                    let assignment = Assignment.maximum(left: wanted.count, right: batch.count) { matches(wanted[$0], batch[$1]) }
                    if let missing = assignment.firstIndex(where: { $0 == nil }) {
                        let ids = batch.map { "\(executed[$0].tool) (\(executed[$0].id))" }.joined(separator: ", ")
                        let used = Set(assignment.compactMap { $0 }.map { batch[$0] })
                        let unmatched = batch.first { !used.contains($0) }.map { executed[$0] }
                        return failure(
                            "call \(wanted[missing] + 1) should be \(expected[wanted[missing]]), but none of the calls proposed together at step "
                                + "\(executed[index].step) matches it (compared as a set: \(ids))",
                            step: executed[index].step, callId: unmatched?.id)
                    }
                    if batch.count > wanted.count {
                        let used = Set(assignment.compactMap { $0 }.map { batch[$0] })
                        let extra = batch.first { !used.contains($0) }.map { executed[$0] }
                        return failure(
                            "\(extra.map { "\($0.tool) (\($0.id))" } ?? "a call") is an extra call; executed: \(actualList)",
                            step: extra?.step,
                            callId: extra?.id)
                    }
                }
                index = end
            }
            return nil
        case .inOrder:
            var next = 0
            for (index, pattern) in expected.enumerated() {
                guard let found = (next..<executed.count).first(where: { matches(index, $0) }) else {
                    let after = next > 0 ? " after \(executed[next - 1].id)" : ""
                    return failure(
                        "no call matching \(pattern)\(after); executed: \(actualList)",
                        step: next > 0 ? executed[next - 1].step : executed.first?.step)
                }
                next = found + 1
            }
            return nil
        case .superset, .unordered:
            let assignment = Assignment.maximum(left: expected.count, right: executed.count, compatible: matches)
            if let missing = assignment.firstIndex(where: { $0 == nil }) {
                return failure(
                    "no call left to match \(expected[missing]) (each call matches one expected call); executed: \(actualList)",
                    step: executed.last?.step)
            }
            if sequence.mode == .unordered, executed.count > expected.count {
                let used = Set(assignment.compactMap { $0 })
                let extra = executed.indices.first { !used.contains($0) }.map { executed[$0] }
                return failure(
                    "\(extra.map { "\($0.tool) (\($0.id))" } ?? "a call") was not expected; executed: \(actualList)", step: extra?.step,
                    callId: extra?.id)
            }
            return nil
        case .subset:
            // Every executed call must be one of the expected ones (each expected call covers one).
            let assignment = Assignment.maximum(left: executed.count, right: expected.count) { matches($1, $0) }
            if let extra = assignment.firstIndex(where: { $0 == nil }) {
                let call = executed[extra]
                return failure(
                    "\(call.tool) (\(call.id)) is not among the expected calls; executed: \(actualList)", step: call.step, callId: call.id)
            }
            return nil
        }
    }
}
