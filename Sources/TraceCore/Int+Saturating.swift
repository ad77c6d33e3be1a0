extension Int {
    /// `value` rounded toward zero, or the nearest `Int` when it holds no such value: `Int.max`
    /// above the range (infinity included), `Int.min` below, 0 for NaN. For numbers that come
    /// from outside (a log, a header, an imported file), where `Int(_:)` would trap.
    public init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 9_223_372_036_854_775_807.0 {
            self = .max
        } else if value < -9_223_372_036_854_775_808.0 {
            self = .min
        } else {
            self = Int(value)
        }
    }
}

extension Int {
    /// `self + other`, or `Int.max` (`Int.min`) where the sum would overflow: for totals of
    /// numbers from outside (a log's token counts, a report's durations), which must not trap.
    public func addingSaturating(_ other: Int) -> Int {
        let (sum, overflows) = addingReportingOverflow(other)
        return overflows ? (other > 0 ? .max : .min) : sum
    }

    /// `self - other`, or `Int.max` (`Int.min`) where the difference would overflow.
    public func subtractingSaturating(_ other: Int) -> Int {
        let (difference, overflows) = subtractingReportingOverflow(other)
        return overflows ? (other < 0 ? .max : .min) : difference
    }

    /// `self * other`, or `Int.max` (`Int.min`) where the product would overflow.
    public func multipliedSaturating(by other: Int) -> Int {
        let (product, overflows) = multipliedReportingOverflow(by: other)
        return overflows ? ((self < 0) == (other < 0) ? .max : .min) : product
    }
}
