#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A resource each thread makes on its first use and keeps for the thread's life — a read
/// buffer, a compressor's tables — freed by `free` when the thread exits. For hot paths that
/// run on many threads at once and would otherwise make (and fault in) the resource per call.
///
/// ```swift
/// static let buffers = PerThread(make: { UnsafeMutableRawPointer.allocate(byteCount: 16_384, alignment: 64) },
///                                free: { $0?.deallocate() })
/// let buffer = buffers.pointer  // this thread's
/// ```
public final class PerThread: Sendable {
    private let key: pthread_key_t
    private let make: @Sendable () -> UnsafeMutableRawPointer?

    /// `make` gives a thread its resource (nil when it cannot: `pointer` is then nil, and the
    /// next use tries again); `free` releases it when the thread exits.
    public init(
        make: @escaping @Sendable () -> UnsafeMutableRawPointer?, free: @escaping @convention(c) (UnsafeMutableRawPointer?) -> Void
    ) {
        var key = pthread_key_t()
        pthread_key_create(&key, free)
        self.key = key
        self.make = make
    }

    /// This thread's resource, made now if it has none yet.
    public var pointer: UnsafeMutableRawPointer? {
        if let existing = pthread_getspecific(key) { return existing }
        guard let made = make() else { return nil }
        pthread_setspecific(key, made)
        return made
    }
}

/// One object per thread, taken out while it is used and put back after: for resources a
/// call uses whole and leaves ready for the next one (a scan's buffers and inflaters), where a
/// call that runs inside another on the same thread must not share them. `take` empties the
/// thread's slot (a nested call finds it empty and makes its own); `put` fills an empty slot
/// and drops the object otherwise. What a thread holds is released when it exits.
final class ThreadSlot<Value: AnyObject>: Sendable {
    private let key: pthread_key_t

    init() {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
        }
        self.key = key
    }

    /// This thread's object, if it has one, leaving the slot empty.
    func take() -> Value? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        pthread_setspecific(key, nil)
        return Unmanaged<AnyObject>.fromOpaque(pointer).takeRetainedValue() as? Value
    }

    /// Keeps `value` for this thread's next `take`, unless the slot holds one already.
    func put(_ value: Value) {
        guard pthread_getspecific(key) == nil else { return }
        pthread_setspecific(key, Unmanaged<AnyObject>.passRetained(value).toOpaque())
    }
}
