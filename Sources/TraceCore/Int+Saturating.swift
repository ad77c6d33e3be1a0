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
