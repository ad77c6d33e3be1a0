/// One piece of a list in a delta packet: a run of the base packet's list, or an item of its
/// own (docs/log-format.md, `context_built`).
public enum ListEdit<Item: JSONRepresentable & Hashable>: JSONRepresentable, Hashable {
    /// The base list's items `start ..< start + count`, written `[start, count]`.
    case copy(start: Int, count: Int)
    /// An item, written as itself.
    case item(Item)

    public init(from scanner: inout JSONScanner) throws {
        guard scanner.nextIsArray else {
            self = .item(try Item(from: &scanner))
            return
        }
        let bounds = try scanner.readArray { try $0.readInt() }
        guard bounds.count == 2, bounds[0] >= 0, bounds[1] >= 1 else {
            throw TraceCoreError(
                .invalidField, "must be a copy [start, count] with start ≥ 0 and count ≥ 1, found \(bounds)", fieldPath: "")
        }
        self = .copy(start: bounds[0], count: bounds[1])
    }

    public var json: JSONValue {
        switch self {
        case .copy(let start, let count): return .array([.int(start), .int(count)])
        case .item(let item): return item.json
        }
    }

    public func write(to writer: inout JSONWriter) {
        switch self {
        case .copy(let start, let count):
            writer.append(UInt8(ascii: "["))
            writer.write(start)
            writer.append(UInt8(ascii: ","))
            writer.write(count)
            writer.append(UInt8(ascii: "]"))
        case .item(let item): item.write(to: &writer)
        }
    }

    /// Whether `start ..< start + count` lies within a list of `available` items (without
    /// overflowing on numbers a damaged line may hold).
    static func fits(start: Int, count: Int, in available: Int) -> Bool {
        start <= available && count <= available - start
    }

    /// The number of items this piece stands for.
    var itemCount: Int {
        switch self {
        case .copy(_, let count): return count
        case .item: return 1
        }
    }

    /// The edits that make `list` out of `base`: runs of `base` where `list` repeats them, its
    /// other items as they are. Finding runs is linear when `list` keeps `base`'s order (what
    /// a context builder does from one step to the next); the occasional item looked up
    /// elsewhere costs a scan, and many of those switch to a table.
    public static func edits(from base: [Item], to list: [Item]) -> [ListEdit<Item>] {
        guard !base.isEmpty else { return list.map { .item($0) } }
        var edits: [ListEdit<Item>] = []
        var table: [Item: Int]?
        var scans = 0
        var next = 0
        var index = 0
        func find(_ item: Item) -> Int? {
            if next < base.count, base[next] == item { return next }
            if table == nil, scans < 16 {
                scans += 1
                return base[next...].firstIndex(of: item) ?? base[..<next].firstIndex(of: item)
            }
            if table == nil {
                var built: [Item: Int] = [:]
                for (position, element) in base.enumerated().reversed() { built[element] = position }
                table = built
            }
            return table?[item]
        }
        while index < list.count {
            guard let start = find(list[index]) else {
                edits.append(.item(list[index]))
                index += 1
                continue
            }
            var count = 1
            while index + count < list.count, start + count < base.count, list[index + count] == base[start + count] { count += 1 }
            edits.append(.copy(start: start, count: count))
            index += count
            next = start + count
        }
        return edits
    }

    /// The list these edits make of `base`; `name` and the base's `sequence` word the error
    /// for a copy that reaches past the base list's end.
    public static func apply(_ edits: [ListEdit<Item>], to base: [Item], name: String, baseSequence: Int) throws -> [Item] {
        var total = 0
        for (position, edit) in edits.enumerated() {
            if case .copy(let start, let count) = edit, !fits(start: start, count: count, in: base.count) {
                throw ContextDelta.outOfRange(
                    name: name, position: position, start: start, count: count, sequence: baseSequence, available: base.count)
            }
            total += edit.itemCount
        }
        var list: [Item] = []
        list.reserveCapacity(total)
        for edit in edits {
            switch edit {
            case .item(let item): list.append(item)
            case .copy(let start, let count): list.append(contentsOf: base[start..<start + count])
            }
        }
        return list
    }
}

/// How many items each list of a context packet holds: what checking a delta against its base
/// needs, without the items.
public struct ContextShape: Sendable, Hashable {
    public var sequence: Int
    public var observations: Int
    public var toolsDisclosed: Int
    public var evidence: Int
    public var memory: Int
    public var omitted: Int

    public init(sequence: Int, of packet: borrowing ContextBuilt) {
        self.sequence = sequence
        observations = packet.observations.count
        toolsDisclosed = packet.toolsDisclosed.count
        evidence = packet.evidence.count
        memory = packet.memory.count
        omitted = packet.omitted.count
    }

    /// The shape of a packet at `sequence` whose lists' sizes are not known (it was not read,
    /// or it was damaged): every copy fits.
    public static func unknown(at sequence: Int) -> ContextShape {
        var shape = ContextShape(sequence: sequence, of: ContextBuilt(goal: "", stateSummary: "", tokenEstimate: 0))
        (shape.observations, shape.toolsDisclosed, shape.evidence, shape.memory, shape.omitted) = (.max, .max, .max, .max, .max)
        return shape
    }
}

/// A context packet written as what changed since the packet before it (format version 2):
/// each list as runs of the base packet's list and items of its own. The other members of the
/// packet are written whole.
public struct ContextDelta: Sendable, Hashable {
    /// The `seq` of the base: the log's previous `context_built`.
    public var baseSequence: Int
    public var observations: [ListEdit<ItemReference>]
    public var toolsDisclosed: [ListEdit<String>]
    public var evidence: [ListEdit<ItemReference>]
    public var memory: [ListEdit<ItemReference>]
    public var omitted: [ListEdit<OmittedItem>]

    public init(
        baseSequence: Int, observations: [ListEdit<ItemReference>] = [], toolsDisclosed: [ListEdit<String>] = [],
        evidence: [ListEdit<ItemReference>] = [], memory: [ListEdit<ItemReference>] = [], omitted: [ListEdit<OmittedItem>] = []
    ) {
        self.baseSequence = baseSequence
        self.observations = observations
        self.toolsDisclosed = toolsDisclosed
        self.evidence = evidence
        self.memory = memory
        self.omitted = omitted
    }

    /// The delta that makes `packet`'s lists out of `base`'s (the packet at `baseSequence`).
    public init(from base: ContextBuilt, at baseSequence: Int, to packet: ContextBuilt) {
        self.init(
            baseSequence: baseSequence, observations: ListEdit.edits(from: base.observations, to: packet.observations),
            toolsDisclosed: ListEdit.edits(from: base.toolsDisclosed, to: packet.toolsDisclosed),
            evidence: ListEdit.edits(from: base.evidence, to: packet.evidence),
            memory: ListEdit.edits(from: base.memory, to: packet.memory),
            omitted: ListEdit.edits(from: base.omitted, to: packet.omitted))
    }

    /// How many of the packet's items come from the base, and how many it has in all.
    public var copiedItems: (copied: Int, total: Int) {
        func count<Item>(_ edits: [ListEdit<Item>]) -> (Int, Int) {
            edits.reduce((0, 0)) { sum, edit in
                if case .copy(_, let count) = edit { return (sum.0 + count, sum.1 + count) }
                return (sum.0, sum.1 + 1)
            }
        }
        let counts = [count(observations), count(toolsDisclosed), count(evidence), count(memory), count(omitted)]
        return counts.reduce((0, 0)) { ($0.0 + $1.0, $0.1 + $1.1) }
    }

    /// The lists' sizes this delta gives over a base of `base`'s sizes; throws for a copy past
    /// the end of a base list.
    public func shape(over base: ContextShape, at sequence: Int) throws -> ContextShape {
        func count<Item>(_ edits: [ListEdit<Item>], _ name: String, _ available: Int) throws -> Int {
            var total = 0
            for (position, edit) in edits.enumerated() {
                if case .copy(let start, let count) = edit, !ListEdit<Item>.fits(start: start, count: count, in: available) {
                    throw Self.outOfRange(
                        name: name, position: position, start: start, count: count, sequence: base.sequence, available: available)
                }
                let (sum, overflow) = total.addingReportingOverflow(edit.itemCount)
                guard !overflow else {
                    throw TraceCoreError(.invalidField, "copies more items than a list can hold", fieldPath: "data.\(name)[\(position)]")
                }
                total = sum
            }
            return total
        }
        var shape = base
        shape.sequence = sequence
        shape.observations = try count(observations, "observations", base.observations)
        shape.toolsDisclosed = try count(toolsDisclosed, "tools_disclosed", base.toolsDisclosed)
        shape.evidence = try count(evidence, "evidence", base.evidence)
        shape.memory = try count(memory, "memory", base.memory)
        shape.omitted = try count(omitted, "omitted", base.omitted)
        return shape
    }

    /// `packet` with the lists this delta makes of `base`'s, and no delta.
    public func resolved(_ packet: ContextBuilt, over base: ContextBuilt) throws -> ContextBuilt {
        var whole = packet
        whole.delta = nil
        whole.observations = try ListEdit.apply(observations, to: base.observations, name: "observations", baseSequence: baseSequence)
        whole.toolsDisclosed = try ListEdit.apply(
            toolsDisclosed, to: base.toolsDisclosed, name: "tools_disclosed", baseSequence: baseSequence)
        whole.evidence = try ListEdit.apply(evidence, to: base.evidence, name: "evidence", baseSequence: baseSequence)
        whole.memory = try ListEdit.apply(memory, to: base.memory, name: "memory", baseSequence: baseSequence)
        whole.omitted = try ListEdit.apply(omitted, to: base.omitted, name: "omitted", baseSequence: baseSequence)
        return whole
    }

    static func outOfRange(name: String, position: Int, start: Int, count: Int, sequence: Int, available: Int) -> TraceCoreError {
        TraceCoreError(
            .invalidField,
            "copies \(count) item\(count == 1 ? "" : "s") from item \(start) of the base packet (seq \(sequence)), which holds only \(available) item\(available == 1 ? "" : "s") in \(name)",
            fieldPath: "data.\(name)[\(position)]")
    }
}

/// Turns the context packets of one log, read in order, back into whole packets: keeps the
/// last whole packet and applies each delta to it. Every other event passes through.
///
/// A read that starts in the middle of a log is handed the resolver as it was there
/// (`LogReader.Position.packets`): the last whole packet before it.
public struct ContextPacketResolver: Sendable, Hashable {
    private var lastSequence: Int?
    private var lastPacket: ContextBuilt?
    private var passesEarlyDeltas: Bool

    /// `startsMidLog`: reading begins in the middle of a log, so deltas before the first whole
    /// packet build on packets not read; they pass through as they are.
    public init(startsMidLog: Bool = false) {
        passesEarlyDeltas = startsMidLog
    }

    /// The shape of the last packet made whole (what a delta after it may copy), if any.
    public var lastShape: ContextShape? {
        guard let lastSequence, let lastPacket else { return nil }
        return ContextShape(sequence: lastSequence, of: lastPacket)
    }

    /// `event` with a delta packet made whole; throws (naming the field) for a delta whose
    /// base is not the packet before it, or that copies past the end of a base list.
    public mutating func resolve(_ event: Event) throws -> Event {
        guard case .contextBuilt(let packet) = event.payload else { return event }
        var resolved = event
        if let delta = packet.delta {
            if lastPacket == nil, passesEarlyDeltas { return event }
            guard let lastSequence, let lastPacket, lastSequence == delta.baseSequence else {
                let found = lastSequence.map { "the packet before it is seq \($0)" } ?? "no packet before it was read"
                throw TraceCoreError(
                    .invalidField, "is \(delta.baseSequence), but \(found): a delta packet builds on the log's previous context_built",
                    fieldPath: "data.base_seq")
            }
            resolved.payload = .contextBuilt(try delta.resolved(packet, over: lastPacket))
        }
        if case .contextBuilt(let whole) = resolved.payload {
            lastSequence = event.sequence
            lastPacket = whole
        }
        return resolved
    }
}
