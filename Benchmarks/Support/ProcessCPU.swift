#if canImport(Glibc)
    import Glibc
#endif

/// CPU time this process has used, all its threads, user and system, its children excluded:
/// what a shared machine's load changes least, so what the benchmarks compare per core.
public enum ProcessCPU {
    public static func seconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
