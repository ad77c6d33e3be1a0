import EvalEngine
import Foundation
import Testing
import TraceCore

/// The exact tests and intervals behind "the pass rate fell", against scipy's answers for the
/// same inputs (Fixtures/statistics/exact_tests.json, written once by
/// scripts/exact_test_goldens.py).
@Suite("Pass-rate statistics")
struct StatisticsTests {
    static let goldens: JSONValue = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/statistics/exact_tests.json")
        // A missing file fails every test below with the parse error's message.
        return (try? JSONParser.parse(Array((try? Data(contentsOf: url)) ?? Data()))) ?? .null
    }()

    static func counts(_ pair: JSONValue?) -> PassCounts {
        PassCounts(passes: pair?.arrayValue?.first?.intValue ?? -1, attempts: pair?.arrayValue?.last?.intValue ?? -1)
    }

    @Test("Fisher's one-sided exact test gives scipy's p-value on every table")
    func fisherMatchesScipy() throws {
        let tables = try #require(Self.goldens["tables"]?.arrayValue)
        #expect(tables.count >= 20)
        for row in tables {
            let (baseline, current) = (Self.counts(row["baseline"]), Self.counts(row["current"]))
            let expected = try #require(row["fisher"]?.doubleValue)
            let got = PassRateTest.fisher.pValue(baseline: baseline, current: current)
            #expect(abs(got - expected) <= 1e-12 + 1e-9 * expected, "\(baseline.fraction) vs \(current.fraction): \(got) ≠ \(expected)")
        }
    }

    @Test("Barnard's one-sided exact test gives scipy's p-value on every table")
    func barnardMatchesScipy() throws {
        let tables = try #require(Self.goldens["tables"]?.arrayValue)
        for row in tables {
            let (baseline, current) = (Self.counts(row["baseline"]), Self.counts(row["current"]))
            let expected = try #require(row["barnard"]?.doubleValue)
            let got = PassRateTest.barnard.pValue(baseline: baseline, current: current)
            // scipy maximises over π with a global optimiser: the same supremum to 6 digits.
            #expect(abs(got - expected) <= 1e-9 + 1e-6 * expected, "\(baseline.fraction) vs \(current.fraction): \(got) ≠ \(expected)")
        }
    }

    @Test("A pass rate that did not fall is never significant, and a side with no attempts tells nothing")
    func noFallNoSignal() throws {
        let tables = try #require(Self.goldens["tables"]?.arrayValue)
        for row in tables {
            let (baseline, current) = (Self.counts(row["baseline"]), Self.counts(row["current"]))
            let fisher = PassRateTest.fisher.pValue(baseline: baseline, current: current)
            let barnard = PassRateTest.barnard.pValue(baseline: baseline, current: current)
            if current.rate >= baseline.rate {
                #expect(
                    fisher > 0.4 && barnard > 0.4, "\(baseline.fraction) vs \(current.fraction): no fall, yet p = \(fisher), \(barnard)")
            }
        }
        // A side with no attempts tells nothing.
        #expect(PassRateTest.fisher.pValue(baseline: PassCounts(passes: 0, attempts: 0), current: PassCounts(passes: 0, attempts: 5)) == 1)
    }

    @Test("Wilson intervals are scipy's at 95% and 90%")
    func wilsonMatchesScipy() throws {
        let rows = try #require(Self.goldens["wilson"]?.arrayValue)
        #expect(rows.count >= 10)
        for row in rows {
            let counts = PassCounts(passes: row["passes"]?.intValue ?? -1, attempts: row["attempts"]?.intValue ?? -1)
            let alpha = 1 - (row["confidence"]?.doubleValue ?? 0)
            let interval = counts.wilsonInterval(alpha: alpha)
            let lower = try #require(row["lower"]?.doubleValue)
            let upper = try #require(row["upper"]?.doubleValue)
            #expect(abs(interval.lower - lower) < 1e-12, "\(counts.fraction) at \(1 - alpha): lower \(interval.lower) ≠ \(lower)")
            #expect(abs(interval.upper - upper) < 1e-12, "\(counts.fraction) at \(1 - alpha): upper \(interval.upper) ≠ \(upper)")
        }
    }
}
