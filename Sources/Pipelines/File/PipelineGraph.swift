import ConfigFile
import TraceCore

/// The checks on a pipeline's graph before anything runs: unknown tasks, cycles, fallbacks
/// that could not run, outputs that name nothing (errors); outputs nobody uses and tasks that
/// lead to no output (warnings). It also puts the tasks in plan order: a topological order
/// that keeps the file's order wherever the dependencies allow.
enum PipelineGraph {
    static func check(_ definition: inout PipelineDefinition, outputsLocation: SourceLocation, errors: inout ConfigErrors) {
        let ids = Set(definition.tasks.map(\.id))
        let fallbacks = definition.fallbackTasks
        for task in definition.tasks {
            for need in task.needs where !ids.contains(need) {
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "task \"\(task.id)\" needs \"\(need)\", which is not a task of this pipeline", at: task.location,
                        hint: ConfigNode.suggestion(for: need, among: Array(ids)).map { "did you mean \"\($0)\"?" }))
            }
            for need in task.needs where fallbacks.contains(need) {
                errors.errors.append(
                    ConfigError(
                        .invalidValue, "task \"\(task.id)\" needs \"\(need)\", which only runs as a fallback",
                        at: task.location, hint: "depend on the task it stands in for: its output becomes that task's"))
            }
        }
        for output in definition.outputs where !ids.contains(output) {
            errors.errors.append(ConfigError(.invalidValue, "outputs names \"\(output)\", which is not a task", at: outputsLocation))
        }
        guard errors.errors.isEmpty else { return }
        if let cycle = findCycle(definition.tasks), let task = definition.tasks.first(where: { $0.id == cycle[0] }) {
            errors.errors.append(
                ConfigError(
                    .invalidValue, "the tasks form a cycle: \((cycle + [cycle[0]]).joined(separator: " → "))", at: task.location,
                    hint: "a pipeline is a directed acyclic graph; remove one of these dependencies"))
            return
        }
        definition.tasks = topologicalOrder(definition.tasks)
        checkFallbacks(definition, errors: &errors)
        guard errors.errors.isEmpty else { return }
        if definition.outputs.isEmpty {
            let needed = Set(definition.tasks.flatMap(\.needs))
            definition.outputs = definition.tasks.map(\.id).filter { !needed.contains($0) && !fallbacks.contains($0) }
        }
        warn(&definition)
    }

    /// One cycle of task ids, if the graph has any. A depth-first walk with its own stack (one
    /// entry per task on the path): recursing, a file's chain of 200,000 tasks overflowed the
    /// thread's stack.
    static func findCycle(_ tasks: [PipelineTask]) -> [String]? {
        let needs = Dictionary(tasks.map { ($0.id, $0.needs) }, uniquingKeysWith: { first, _ in first })
        var state: [String: Int] = [:]  // 1 on the path, 2 done
        var path: [String] = []
        var stack: [(id: String, next: Int)] = []
        for task in tasks where state[task.id] != 2 {
            state[task.id] = 1
            path.append(task.id)
            stack.append((task.id, 0))
            while let top = stack.last {
                let list = needs[top.id] ?? []
                guard top.next < list.count else {
                    stack.removeLast()
                    path.removeLast()
                    state[top.id] = 2
                    continue
                }
                stack[stack.count - 1].next += 1
                let need = list[top.next]
                if state[need] == 2 { continue }
                if state[need] == 1, let start = path.firstIndex(of: need) { return path[start...].reversed() }
                state[need] = 1
                path.append(need)
                stack.append((need, 0))
            }
        }
        return nil
    }

    static func topologicalOrder(_ tasks: [PipelineTask]) -> [PipelineTask] {
        var placed: Set<String> = []
        var ordered: [PipelineTask] = []
        var rest = tasks
        // Called on an acyclic graph only, so some task is always ready.
        while let index = rest.firstIndex(where: { $0.needs.allSatisfy(placed.contains) }) {
            placed.insert(rest[index].id)
            ordered.append(rest.remove(at: index))
        }
        return ordered
    }

    static func checkFallbacks(_ definition: PipelineDefinition, errors: inout ConfigErrors) {
        for task in definition.tasks {
            for (errorClass, policy) in task.recovery.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
                guard let fallbackId = policy.fallback else { continue }
                guard let fallback = definition.task(fallbackId) else {
                    errors.errors.append(
                        ConfigError(
                            .invalidValue,
                            "on_error.\(errorClass.rawValue) of task \"\(task.id)\" falls back to \"\(fallbackId)\", which is not a task",
                            at: task.location))
                    continue
                }
                if fallback.id == task.id {
                    errors.errors.append(
                        ConfigError(.invalidValue, "task \"\(task.id)\" falls back to itself; use retry instead", at: task.location))
                    continue
                }
                if fallback.recovery.values.contains(where: { $0.then != .fail }) {
                    errors.errors.append(
                        ConfigError(
                            .invalidValue, "fallback task \"\(fallback.id)\" may retry or fail, not skip or fall back again",
                            at: fallback.location))
                }
                // What the fallback reads must be settled whenever the task it replaces ran.
                let available = ancestors(of: task.id, in: definition)
                for need in fallback.needs where !available.contains(need) {
                    errors.errors.append(
                        ConfigError(
                            .invalidValue,
                            "fallback task \"\(fallback.id)\" needs \"\(need)\", which is not upstream of \"\(task.id)\" it stands in for",
                            at: fallback.location))
                }
            }
        }
    }

    static func ancestors(of id: String, in definition: PipelineDefinition) -> Set<String> {
        var found: Set<String> = []
        var queue = definition.task(id)?.needs ?? []
        while let next = queue.popLast() {
            guard found.insert(next).inserted else { continue }
            queue += definition.task(next)?.needs ?? []
        }
        return found
    }

    static func warn(_ definition: inout PipelineDefinition) {
        let fallbacks = definition.fallbackTasks
        let consumed = Set(definition.tasks.flatMap { $0.inputs.compactMap(\.reference.task) })
        let outputs = Set(definition.outputs)
        var leadsToOutput = outputs
        for output in definition.outputs { leadsToOutput.formUnion(ancestors(of: output, in: definition)) }
        for task in definition.tasks where !fallbacks.contains(task.id) {
            if !leadsToOutput.contains(task.id) {
                definition.warnings.append(
                    ConfigError(
                        .invalidValue,
                        "task \"\(task.id)\" does not lead to any of the pipeline's outputs (\(definition.outputs.joined(separator: ", ")))",
                        at: task.location, hint: "add it to outputs, or remove it"))
            } else if !consumed.contains(task.id), !outputs.contains(task.id) {
                definition.warnings.append(
                    ConfigError(
                        .invalidValue,
                        "the output of task \"\(task.id)\" is not used: no task takes it as an input and it is not one of the outputs",
                        at: task.location))
            }
        }
    }
}
