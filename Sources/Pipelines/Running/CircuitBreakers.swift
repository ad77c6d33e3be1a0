import TraceCore

/// The circuit breakers of one pipeline run, rebuilt from the log's events (live and on
/// resume alike): a breaker opens after `failures` failed attempts of its tasks within
/// `windowMs`; while open its tasks fail fast (`breaker_open`); after `openMs` the next task
/// is a half-open probe, whose success closes it and whose failure opens it again.
struct CircuitBreakers: Sendable {
    enum Admission: Equatable {
        case run
        /// Run as the half-open probe (record `breaker_changed` half_open first).
        case probe
        case failFast(String)
    }

    let settings: [String: BreakerSettings]
    private(set) var states: [String: BreakerChanged.State] = [:]
    private var failureTimes: [String: [Int]] = [:]
    private var openedAtUs: [String: Int] = [:]
    private var probes: [String: (task: String, attempt: Int)] = [:]
    /// Each task's breaker key.
    private let keys: [String: String]

    init(settings: [String: BreakerSettings], plan: [PipelineTaskPlan]) {
        self.settings = settings
        // A plan read from a log may name a task twice (a hostile log): the first one counts.
        keys = Dictionary(plan.compactMap { task in task.breaker.map { (task.id, $0) } }, uniquingKeysWith: { first, _ in first })
    }

    func key(of task: String) -> String? { keys[task] }

    /// Follows one recorded event.
    mutating func observe(_ event: Event) {
        guard case .pipeline(let payload) = event.payload else { return }
        switch payload {
        case .taskStarted(let started) where started.isProbe:
            if let key = keys[started.task] { probes[key] = (started.task, started.attempt) }
        case .taskFinished(let finished):
            guard let key = keys[finished.task] else { return }
            if let probe = probes[key], probe.task == finished.task, probe.attempt == finished.attempt { probes[key] = nil }
            if finished.status == .failed, let errorClass = finished.errorClass, errorClass != .breakerOpen, errorClass != .interrupted {
                failureTimes[key, default: []].append(event.timeUs)
            }
        case .breakerChanged(let changed):
            states[changed.breaker] = changed.state
            if changed.state == .open { openedAtUs[changed.breaker] = event.timeUs }
            if changed.state == .closed { failureTimes[changed.breaker] = [] }
        default:
            break
        }
    }

    /// Whether a task of breaker `key` may start at `nowUs`.
    func admission(_ key: String, nowUs: Int) -> Admission {
        guard let settings = settings[key] else { return .run }
        switch states[key] ?? .closed {
        case .closed:
            return .run
        case .halfOpen:
            return probes[key] == nil ? .probe : .failFast("breaker \(key) is half-open and its probe is running")
        case .open:
            let reopensAt = (openedAtUs[key] ?? nowUs) + settings.openMs * 1000
            if nowUs >= reopensAt { return .probe }
            return .failFast(
                "breaker \(key) is open (\(settings.failures) failures within \(settings.windowMs) ms); it lets a probe through in \((reopensAt - nowUs + 999) / 1000) ms"
            )
        }
    }

    /// The change that the end of an attempt of breaker `key` causes, if any (after `observe`
    /// saw its `task_finished`).
    func change(after finished: TaskFinished, key: String, nowUs: Int) -> BreakerChanged? {
        guard let settings = settings[key] else { return nil }
        let state = states[key] ?? .closed
        if finished.status == .succeeded {
            return state == .halfOpen
                ? BreakerChanged(breaker: key, state: .closed, failures: 0, reason: "the probe \(finished.task) succeeded") : nil
        }
        guard let errorClass = finished.errorClass, errorClass != .breakerOpen, errorClass != .interrupted else { return nil }
        if state == .halfOpen {
            return BreakerChanged(
                breaker: key, state: .open, failures: 1,
                reason: "the probe \(finished.task) failed: \(finished.error ?? errorClass.rawValue)")
        }
        let recent = (failureTimes[key] ?? []).filter { $0 >= nowUs - settings.windowMs * 1000 }
        guard state == .closed, recent.count >= settings.failures else { return nil }
        return BreakerChanged(
            breaker: key, state: .open, failures: recent.count,
            reason:
                "\(recent.count) failures within \(settings.windowMs) ms, the last in \(finished.task): \(finished.error ?? errorClass.rawValue)"
        )
    }
}
