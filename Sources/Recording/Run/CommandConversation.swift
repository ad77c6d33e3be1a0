import AgentRuntime
import Foundation
import TraceCore

/// A recorded command that talks with a simulated user (docs/conversations.md, "Command agents"):
/// the program is started once, with the user's first turn as its input; each later turn is one
/// line on its standard input, written when the agent has answered the one before (its model
/// replied without tool calls in its talk with the user); when the conversation ends (the user's
/// stop token, `maxTurns`) its standard input is closed and it has `endGraceMs` to exit.
enum CommandConversation {
    /// How long a program may take to exit once its standard input is closed at the end of a
    /// conversation, before it is stopped (the run keeps the conversation's ending).
    static let endGraceMs = 10_000

    /// How long a user still answering when the program exited by itself is waited for: its
    /// reply may end the conversation (then the run ends as the user ended it).
    static let userAfterEndMs = 30_000

    /// The user's first turn, before the program starts; a `SimulatorFault` when the user cannot
    /// open (nothing to say, a failed model, a stop at once).
    static func opening(of conversation: Conversation, runId: String) async throws -> UserTurn {
        var fold = RunState()
        fold.runId = runId
        var opening: UserTurn
        do {
            opening = try await conversation.user.reply(turn: 1, after: fold)
        } catch let fault as SimulatorFault {
            throw fault
        } catch {
            if error is CancellationError || Task.isCancelled { throw error }
            throw SimulatorFault("the user failed at turn 1: \((error as? any Diagnostic)?.message ?? "\(error)")")
        }
        opening.turn = 1
        opening.text = line(opening.text)
        if let ending = opening.ends {
            throw SimulatorFault(
                "the user ended the conversation (\(ending.rawValue)) in its first turn, before the agent answered anything")
        }
        return opening
    }

    /// Talks with the program until the conversation ends or the program does: after each of
    /// the agent's answers, asks the user for the next turn, records it, and writes it to the
    /// program's standard input.
    static func drive(
        _ conversation: Conversation, recorder: ExchangeRecorder, feed: ChildProcess.InputFeed, stopper: Stopper, timeoutMs: Int
    ) async {
        var handled = 0
        var isFault = false
        talk: while !Task.isCancelled {
            await recorder.waitForAnswer(after: handled, timeoutMs: timeoutMs)
            let progress = recorder.takeAnswers()
            // No new answer: the program ended (or no answer came in the run's time, and the
            // command's timeout ends it). An answer the program gave before it exited is still
            // answered by the user: its reply may end the conversation (`say`).
            guard !progress.isEnded, progress.answers > handled else { return }
            handled = progress.answers
            let number = progress.turnsSaid + 1
            guard progress.turnsSaid < conversation.maxTurns else {
                recorder.endConversation(
                    .maxTurns,
                    error: "the conversation reached its \(conversation.maxTurns) user turns (maxTurns) with the user not done")
                break talk
            }
            var said: UserTurn
            recorder.userAnswering(number)
            defer { recorder.userAnswering(nil) }
            do {
                said = try await conversation.user.reply(turn: number, after: progress.fold)
            } catch {
                // The program ended badly while the user was answering: nothing to say it to.
                if error is CancellationError || Task.isCancelled { return }
                let message = (error as? SimulatorFault)?.message ?? "the user failed at turn \(number): \(error)"
                recorder.endConversation(.blocked, error: "\(RunStopped.simulatorFaultPrefix) \(message)")
                isFault = true
                break talk
            }
            said.text = line(said.text)
            do {
                guard try recorder.say(said) else { return }
            } catch {
                // The log cannot be written: the run's end reports it (the attempt could not run).
                recorder.failedToRecord(error)
                isFault = true
                break talk
            }
            if let ending = said.ends {
                recorder.endConversation(ending.stopReason)
                break talk
            }
            guard feed.send(Array((said.text + "\n").utf8)) else {
                // The program closed its input: the turn never reached it, and is not recorded.
                recorder.unsay()
                return
            }
        }
        feed.close()
        // A simulator that failed stops the program at once; one that ended the talk gives it time to exit.
        if isFault {
            stopper.stop()
        } else if await !recorder.waitForProgramEnd(timeoutMs: endGraceMs) {
            stopper.stop()
        }
    }

    /// A turn as the program is given it: one line (line breaks within it become spaces), which
    /// is also what the log records.
    static func line(_ text: String) -> String {
        text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).joined(separator: " ")
    }
}
