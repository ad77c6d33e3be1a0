/// The unbiased estimators over n runs of which c passed.
public enum PassEstimator {
    /// C(c, k) / C(n, k): all k sampled runs pass.
    public static func passHatK(n: Int, c: Int, k: Int) -> Double {
        guard n > 0, k > 0, k <= n else { return 0 }
        return ratio(top: c, bottom: n, k: k)
    }

    /// 1 - C(n - c, k) / C(n, k): at least one of k sampled runs passes.
    public static func passAtK(n: Int, c: Int, k: Int) -> Double {
        guard n > 0, k > 0, k <= n else { return 0 }
        return 1 - ratio(top: n - c, bottom: n, k: k)
    }

    /// C(top, k) / C(bottom, k) as a product, so large n does not overflow.
    static func ratio(top: Int, bottom: Int, k: Int) -> Double {
        guard top >= k else { return 0 }
        var value = 1.0
        for i in 0..<k { value *= Double(top - i) / Double(bottom - i) }
        return value
    }
}
