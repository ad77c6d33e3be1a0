/// A growable byte buffer in raw memory, for zlib to write into without per-call copies.
final class ByteBuffer {
    private(set) var base: UnsafeMutableRawPointer
    private(set) var capacity: Int
    var count = 0
    /// The largest capacity this buffer has had: what the reader's memory bound is checked by.
    private(set) var peakCapacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
        peakCapacity = self.capacity
    }

    deinit { base.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
    var spare: Int { capacity - count }
    var end: UnsafeMutableRawPointer { base + count }

    /// Makes room for at least `extra` more bytes, doubling.
    func reserve(extra: Int) {
        guard spare < extra else { return }
        var newCapacity = capacity * 2
        while newCapacity - count < extra { newCapacity *= 2 }
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
        peakCapacity = max(peakCapacity, newCapacity)
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(extra: bytes.count)
        if let source = bytes.baseAddress { end.copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    /// Starts `peakCapacity` over from the capacity it has now (a buffer reused by another read).
    func resetPeak() { peakCapacity = capacity }

    /// Shrinks back to `capacity` when a huge event made it grow, so memory follows the
    /// current member, not the largest one ever read.
    func reset(keepingCapacity limit: Int) {
        count = 0
        guard capacity > limit * 4 else { return }
        base.deallocate()
        capacity = limit
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }
}
