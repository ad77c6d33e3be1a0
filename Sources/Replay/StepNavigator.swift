/// Where the interactive replay (`replay --interactive`) is in a log, and what each key does
/// there: the step shown, how far a long step is scrolled, whether payloads are shown in full,
/// and the message of the status line. The terminal itself (raw keys, writing the screen) is the
/// executable's; the rules are here, where tests drive them.
public struct StepNavigator {
    public enum Key: Sendable, Equatable {
        case next, previous, up, down, pageDown, toggleFull, nextFailure, quit, other
        /// Go to the step typed at the prompt.
        case goTo(String)
    }

    public let index: StepIndex
    /// The position (0-based, log order) of the step shown.
    public private(set) var position = 0
    /// Lines of the step scrolled past.
    public private(set) var scroll = 0
    public private(set) var isFull = false
    /// Said once on the status line, after a key that could not do what it asks.
    public private(set) var message = ""
    /// The last step loaded, kept while it is the one shown.
    private var loaded: (position: Int, step: ReplayStep)?

    public init(index: StepIndex) { self.index = index }

    /// The step shown, read through the log's step table (nil when it cannot be read).
    public mutating func step() throws -> ReplayStep? {
        if let loaded, loaded.position == position { return loaded.step }
        guard let record = index.record(at: position), let step = try index.replayStep(record.step) else { return nil }
        loaded = (position, step)
        return step
    }

    /// The whole screen for `step` on a terminal of `width` × `height`: its lines (made safe to
    /// print by `safe`) from the scroll position, and the status line in reverse video at the
    /// bottom. Clamps the scroll to the step's length. Clears the message once shown.
    public mutating func screen(for step: ReplayStep, width: Int, height: Int, safe: (String) -> String) -> String {
        var lines = StepRenderer(isFull: isFull, width: width).lines(for: step).map(safe)
        lines.append(contentsOf: step.problems.map { StepRenderer.cut(safe("  ! \($0.message)"), to: width) })
        let room = Self.room(height: height)
        scroll = max(0, min(scroll, max(0, lines.count - room)))
        var screen = "\u{1B}[H\u{1B}[2J"
        for line in lines.dropFirst(scroll).prefix(room) { screen += line + "\r\n" }
        let more = lines.count - scroll - room
        let status =
            "step \(step.step) (\(position + 1)/\(index.stepCount))" + (more > 0 ? " · \(more) more lines (j)" : "")
            + (message.isEmpty ? "" : " · \(message)") + " · n next p prev g goto f failure v full q quit"
        screen += "\u{1B}[\(height);1H\u{1B}[7m" + StepRenderer.cut(status, to: width) + "\u{1B}[0m"
        message = ""
        return screen
    }

    /// Lines of a step a terminal `height` lines high shows (the last is the status line).
    public static func room(height: Int) -> Int { max(1, height - 2) }

    /// Does what `key` asks with `shownStep` on a screen `height` lines high; false when it quits.
    public mutating func handle(_ key: Key, shownStep: Int, height: Int) -> Bool {
        switch key {
        case .next:
            if position + 1 < index.stepCount { show(position + 1) } else { message = "last step" }
        case .previous:
            if position > 0 { show(position - 1) } else { message = "first step" }
        case .down: scroll += 1
        case .up: scroll = max(0, scroll - 1)
        case .pageDown: scroll += Self.room(height: height)
        case .toggleFull:
            isFull.toggle()
            scroll = 0
        case .nextFailure:
            if let target = index.nextProblem(after: shownStep), let found = index.position(ofStep: target) {
                show(found)
            } else {
                message = "no failure after step \(shownStep)"
            }
        case .goTo(let text):
            if let number = Int(text), let found = index.position(ofStep: number) {
                show(found)
            } else {
                message = text.isEmpty ? "" : "no step \(text)"
            }
        case .quit: return false
        case .other: break
        }
        return true
    }

    private mutating func show(_ target: Int) {
        position = target
        scroll = 0
    }
}
