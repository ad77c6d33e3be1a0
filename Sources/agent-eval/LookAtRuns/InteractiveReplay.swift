import Foundation
import Replay

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Interactive stepping through a log on a terminal: one step per screen, sized to the
/// terminal (80x24 works), read through the log's step table so any step shows at once.
///
/// Keys: n / → / Enter next step, p / ← previous, g then a number and Enter jumps, f the next
/// step with a failure (denied call, tool error, rejected reply, limit), v payloads in full,
/// j / k or ↓ / ↑ scroll a long step, q or Ctrl-C quits.
struct InteractiveReplay {
    let log: String
    let store: (any StepRecordStore)?

    func run() throws {
        let index: StepIndex
        do {
            index = try StepIndex.open(log: log, store: store).index
        } catch {
            throw diagnose(error)
        }
        guard index.stepCount > 0 else {
            throw diagnose(CommandError("nothing_to_replay", "\(log) has no events to replay"))
        }
        var terminal = RawTerminal()
        terminal.enable()
        defer { terminal.restore() }
        var navigator = StepNavigator(index: index)
        while let step = try navigator.step() {
            let (width, height) = RawTerminal.size()
            FileHandleStream(descriptor: 1).write(navigator.screen(for: step, width: width, height: height, safe: terminalSafe))
            var key = terminal.readKey()
            if key == .goTo("") {
                FileHandleStream(descriptor: 1).write("\u{1B}[\(height);1H\u{1B}[2Kgo to step: ")
                key = .goTo(terminal.readLine())
            }
            guard navigator.handle(key, shownStep: step.step, height: height) else {
                FileHandleStream(descriptor: 1).write("\u{1B}[\(height);1H\u{1B}[2K")
                return
            }
        }
    }
}

/// The terminal in raw mode (no line editing, no echo), restored on the way out.
struct RawTerminal {
    private var saved = termios()
    private var isRaw = false

    mutating func enable() {
        guard tcgetattr(0, &saved) == 0 else { return }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        isRaw = tcsetattr(0, TCSANOW, &raw) == 0
        FileHandleStream(descriptor: 1).write("\u{1B}[?25l")
    }

    func restore() {
        FileHandleStream(descriptor: 1).write("\u{1B}[?25h\r\n")
        if isRaw {
            var original = saved
            tcsetattr(0, TCSANOW, &original)
        }
    }

    static func size() -> (width: Int, height: Int) {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 {
            return (Int(size.ws_col), Int(size.ws_row))
        }
        return (80, 24)
    }

    func readByte() -> UInt8? {
        var byte: UInt8 = 0
        while true {
            let count = read(0, &byte, 1)
            if count == 1 { return byte }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }

    /// The key pressed, as the navigator takes it; `g` is `.goTo("")`, whose step the caller
    /// asks for (`readLine`).
    func readKey() -> StepNavigator.Key {
        guard let byte = readByte() else { return .quit }
        switch byte {
        case UInt8(ascii: "n"), UInt8(ascii: "l"), 0x0D, 0x0A: return .next
        case UInt8(ascii: "p"), UInt8(ascii: "h"): return .previous
        case UInt8(ascii: "j"): return .down
        case UInt8(ascii: "k"): return .up
        case UInt8(ascii: " "): return .pageDown
        case UInt8(ascii: "v"): return .toggleFull
        case UInt8(ascii: "f"): return .nextFailure
        case UInt8(ascii: "g"): return .goTo("")
        case UInt8(ascii: "q"), 0x03, 0x04: return .quit
        case 0x1B:
            guard readByte() == UInt8(ascii: "[") else { return .other }
            switch readByte() {
            case UInt8(ascii: "C"): return .next
            case UInt8(ascii: "D"): return .previous
            case UInt8(ascii: "A"): return .up
            case UInt8(ascii: "B"): return .down
            default: return .other
            }
        default: return .other
        }
    }

    /// A line typed at a prompt, echoed as typed; Enter ends it, Escape cancels.
    func readLine() -> String {
        var text = ""
        while let byte = readByte() {
            switch byte {
            case 0x0D, 0x0A: return text
            case 0x1B, 0x03: return ""
            case 0x7F, 0x08:
                if !text.isEmpty {
                    text.removeLast()
                    FileHandleStream(descriptor: 1).write("\u{8} \u{8}")
                }
            default:
                guard byte >= 0x20, byte < 0x7F else { continue }
                let character = Character(Unicode.Scalar(byte))
                text.append(character)
                FileHandleStream(descriptor: 1).write(String(character))
            }
        }
        return text
    }
}
