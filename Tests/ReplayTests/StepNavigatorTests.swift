import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

/// The interactive replay's keys (`replay --interactive`), driven without a terminal.
@Suite("The interactive replay's navigation")
struct StepNavigatorTests {
    static let log = FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path

    @Test("n and p walk the steps and stop at either end saying so; g goes to a step or says there is none")
    func walking() throws {
        let index = try StepIndex.open(log: Self.log, store: nil).index
        #expect(index.stepCount > 2)
        var navigator = StepNavigator(index: index)
        var (stays, page) = (true, "")
        let first = try navigator.step()
        var shown = try #require(first)
        stays = navigator.handle(.previous, shownStep: shown.step, height: 24)
        #expect(stays)
        #expect(navigator.position == 0 && navigator.message == "first step")
        // The message is said once, on the next screen.
        page = navigator.screen(for: shown, width: 80, height: 24, safe: { $0 })
        #expect(page.contains("first step"))
        #expect(navigator.message.isEmpty)
        var steps = [shown.step]
        while navigator.position + 1 < index.stepCount {
            stays = navigator.handle(.next, shownStep: shown.step, height: 24)
            #expect(stays)
            let next = try navigator.step()
            shown = try #require(next)
            steps.append(shown.step)
        }
        #expect(steps == (0..<index.stepCount).compactMap { index.record(at: $0)?.step })
        stays = navigator.handle(.next, shownStep: shown.step, height: 24)
        #expect(stays)
        #expect(navigator.position == index.stepCount - 1 && navigator.message == "last step")
        page = navigator.screen(for: shown, width: 80, height: 24, safe: { $0 })
        #expect(page.contains("last step"))

        let target = try #require(index.record(at: 1)).step
        stays = navigator.handle(.goTo(String(target)), shownStep: shown.step, height: 24)
        #expect(stays)
        #expect(navigator.position == 1 && navigator.message.isEmpty)
        let jumped = try navigator.step()
        #expect(jumped?.step == target)
        stays = navigator.handle(.goTo("999"), shownStep: target, height: 24)
        #expect(stays)
        #expect(navigator.position == 1 && navigator.message == "no step 999")
        stays = navigator.handle(.goTo(""), shownStep: target, height: 24)
        #expect(stays)
        #expect(navigator.message.isEmpty, "an empty answer (Escape) says nothing")
        stays = navigator.handle(.quit, shownStep: target, height: 24)
        #expect(!stays)
    }

    @Test("f goes to the next step with a problem, as the step table marks them, or says there is none", arguments: allFixtureLogs)
    func nextFailure(_ log: String) throws {
        let index = try StepIndex.open(log: log, store: nil).index
        var navigator = StepNavigator(index: index)
        var stays = true
        guard var shown = try navigator.step() else { return }
        var visited = 0
        while true {
            let expected = index.nextProblem(after: shown.step).flatMap(index.position(ofStep:))
            stays = navigator.handle(.nextFailure, shownStep: shown.step, height: 24)
            #expect(stays)
            guard let expected else {
                #expect(navigator.message == "no failure after step \(shown.step)")
                break
            }
            #expect(navigator.position == expected)
            let next = try navigator.step()
            shown = try #require(next)
            #expect(!shown.problems.isEmpty, "\(log) step \(shown.step)")
            visited += 1
        }
        #expect(visited <= index.stepCount)
    }

    @Test("a long step scrolls by line and by screen, never past its end; v shows payloads whole and scrolls back to the top")
    func scrolling() throws {
        let index = try StepIndex.open(log: Self.log, store: nil).index
        var navigator = StepNavigator(index: index)
        var (stays, page) = (true, "")
        let loaded = try navigator.step()
        let step = try #require(loaded)
        let height = 6
        let lines = StepRenderer(isFull: false, width: 40).lines(for: step).count + step.problems.count
        try #require(lines > StepNavigator.room(height: height), "the first step should not fit in \(height) lines")
        stays = navigator.handle(.pageDown, shownStep: step.step, height: height)
        #expect(stays)
        #expect(navigator.scroll == StepNavigator.room(height: height))
        for _ in 0..<(lines * 2) { _ = navigator.handle(.down, shownStep: step.step, height: height) }
        page = navigator.screen(for: step, width: 40, height: height, safe: { $0 })
        #expect(navigator.scroll == lines - StepNavigator.room(height: height), "clamped to the last screenful")
        #expect(!page.contains("more lines"))
        stays = navigator.handle(.up, shownStep: step.step, height: height)
        #expect(stays)
        page = navigator.screen(for: step, width: 40, height: height, safe: { $0 })
        #expect(page.contains("1 more lines (j)"))
        stays = navigator.handle(.toggleFull, shownStep: step.step, height: height)
        #expect(stays)
        #expect(navigator.isFull && navigator.scroll == 0)
        page = navigator.screen(for: step, width: 40, height: height, safe: { $0 })
        #expect(page.contains("step \(step.step) (1/\(index.stepCount))"))
    }
}
