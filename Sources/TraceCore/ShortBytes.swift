#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Comparisons of short runs of bytes — member names, event kinds, literals, keys — without a
/// call to `memcmp`, whose call and set-up cost more than comparing a few bytes in place. Runs
/// longer than 16 bytes (hashes, run ids) still go to `memcmp`.
enum ShortBytes {
    /// Whether the `count` bytes at `a` and at `b` are the same. Eight bytes or more are
    /// compared as two words that may overlap, four to seven as two half-words, fewer one by one:
    /// every load stays inside the runs.
    @inline(__always)
    static func equal(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        if count >= 8 {
            guard count <= 16 else { return memcmp(a, b, count) == 0 }
            return a.loadUnaligned(as: UInt64.self) == b.loadUnaligned(as: UInt64.self)
                && a.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                    == b.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        }
        if count >= 4 {
            return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
                && a.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
                    == b.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
        }
        var offset = 0
        while offset < count {
            guard a.load(fromByteOffset: offset, as: UInt8.self) == b.load(fromByteOffset: offset, as: UInt8.self) else { return false }
            offset += 1
        }
        return true
    }

    /// `memcmp`'s order of the first `count` bytes at `a` and at `b`: -1, 0 or 1.
    @inline(__always)
    static func compare(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Int {
        guard count <= 16 else {
            let order = memcmp(a, b, count)
            return order == 0 ? 0 : order < 0 ? -1 : 1
        }
        var offset = 0
        while offset < count {
            let (left, right) = (a.load(fromByteOffset: offset, as: UInt8.self), b.load(fromByteOffset: offset, as: UInt8.self))
            if left != right { return left < right ? -1 : 1 }
            offset += 1
        }
        return 0
    }
}
