import Testing
import TraceCore

@Suite("Diagnostics")
struct DiagnosticTests {
    static let cause = DiagnosticRecord(
        code: "log.corrupt_member", message: "the gzip member at byte 40 is damaged",
        place: SourceLocation(path: "a.jsonl.gz", memberOffset: 40, sequence: 3))
    static let error = DiagnosticRecord(
        code: "eval.bad_case", message: "case \"x\" cannot run", place: SourceLocation(path: "cases/x.yaml", line: 4, column: 7),
        hint: "fix the case", cause: cause)

    @Test("one terminal form for every error: error, where, hint, causes; a caller's hint replaces the library's")
    func terminal() {
        #expect(
            Self.error.lines() == [
                "error: case \"x\" cannot run", "  --> cases/x.yaml:4:7", "hint: fix the case",
                "caused by: a.jsonl.gz (gzip member at byte 40, seq 3): the gzip member at byte 40 is damaged",
            ])
        #expect(Self.error.lines(hint: "run `agent-eval check`")[2] == "hint: run `agent-eval check`")
        #expect(Self.cause.lines() == ["error: the gzip member at byte 40 is damaged", "  --> a.jsonl.gz (gzip member at byte 40, seq 3)"])
    }

    @Test("one JSON form, with the cause nested and the location's parts as fields")
    func json() {
        #expect(
            JSONWriter.encodeString(Self.error.json)
                == #"{"cause":{"code":"log.corrupt_member","location":{"member_offset":40,"path":"a.jsonl.gz","seq":3},"#
                + #""message":"the gzip member at byte 40 is damaged"},"code":"eval.bad_case","hint":"fix the case","#
                + #""location":{"column":7,"line":4,"path":"cases/x.yaml"},"message":"case \"x\" cannot run"}"#)
    }
}
