import Testing
import TraceCore

/// Numbers from outside (a log, a header, a report) reach arithmetic that must not trap: totals
/// and conversions stop at the ends of `Int` instead.
@Suite("Saturating arithmetic")
struct SaturatingTests {
    @Test("sums, differences and products stop at Int.max and Int.min; in range they are exact")
    func arithmetic() {
        #expect(Int.max.addingSaturating(1) == .max && Int.min.addingSaturating(-1) == .min && 2.addingSaturating(3) == 5)
        #expect(Int.min.subtractingSaturating(1) == .min && Int.max.subtractingSaturating(-1) == .max && 2.subtractingSaturating(3) == -1)
        #expect(Int.max.multipliedSaturating(by: 20) == .max && Int.min.multipliedSaturating(by: 2) == .min)
        #expect(
            (-3).multipliedSaturating(by: Int.max) == .min && (-3).multipliedSaturating(by: Int.min) == .max
                && 4.multipliedSaturating(by: -5) == -20)
    }

    @Test(
        "a double becomes the nearest Int it holds, rounded toward zero; none for NaN",
        arguments: [
            (1e300, Int.max), (-1e300, Int.min), (Double.infinity, Int.max), (-Double.infinity, Int.min), (Double.nan, 0),
            (9.3e18, Int.max),
            (-2.7, -2), (2.7, 2), (-9.223372036854775808e18, Int.min),
        ])
    func fromDouble(value: Double, expected: Int) {
        #expect(Int(saturating: value) == expected)
    }
}
