/// One of the ten planets of a natal chart (the Sun and Moon count as planets, as in the seed).
///
/// Raw values are the seed enum's (`"Sun"` … `"Pluto"`). Only these ten take part in aspects;
/// the optional calculated points (lunar nodes, Chiron, Lilith) are a separate type, `ChartPoint`,
/// so that `planets` in the NatalChart JSON always holds exactly these ten names.
public enum PlanetName: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case sun = "Sun"
    case moon = "Moon"
    case mercury = "Mercury"
    case venus = "Venus"
    case mars = "Mars"
    case jupiter = "Jupiter"
    case saturn = "Saturn"
    case uranus = "Uranus"
    case neptune = "Neptune"
    case pluto = "Pluto"

    /// Position in the traditional order, Sun first (the order of `allCases`).
    public var index: Int { Self.allCases.firstIndex(of: self)! }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.index < rhs.index }
}

/// An optional calculated point a request may ask for, listed under `points` in the chart.
///
/// Kept apart from `PlanetName` on purpose: points take no part in aspects and are only in the
/// chart when requested. Raw values match the ephemeris' body names.
public enum ChartPoint: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case meanNode = "MeanNode"
    case trueNode = "TrueNode"
    case chiron = "Chiron"
    case meanLilith = "MeanLilith"

    /// Position in the order of `allCases`, the order points are listed in a chart.
    public var index: Int { Self.allCases.firstIndex(of: self)! }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.index < rhs.index }
}

/// A major (Ptolemaic) aspect with the seed's maximum orbs.
public enum AspectType: String, Sendable, Hashable, Codable, CaseIterable {
    case conjunction = "Conjunction"
    case opposition = "Opposition"
    case trine = "Trine"
    case square = "Square"
    case sextile = "Sextile"

    /// The exact angle of the aspect, in degrees.
    public var angle: Double {
        switch self {
        case .conjunction: 0
        case .opposition: 180
        case .trine: 120
        case .square: 90
        case .sextile: 60
        }
    }

    /// The largest orb at which the aspect still counts, in degrees (8/8/7/7/6, from the seed).
    /// An orb equal to this counts.
    public var maxOrb: Double {
        switch self {
        case .conjunction, .opposition: 8
        case .trine, .square: 7
        case .sextile: 6
        }
    }
}

/// A house system a chart can be asked for. Raw values are the wire names of CONTRACT.md.
public enum ChartHouseSystem: String, Sendable, Hashable, Codable, CaseIterable {
    case placidus
    case koch
    case porphyry
    case regiomontanus
    case campanus
    case equal
    case wholeSign

    /// The name for people (`"Placidus"`, `"Whole Sign"`).
    public var displayName: String {
        switch self {
        case .placidus: "Placidus"
        case .koch: "Koch"
        case .porphyry: "Porphyry"
        case .regiomontanus: "Regiomontanus"
        case .campanus: "Campanus"
        case .equal: "Equal"
        case .wholeSign: "Whole Sign"
        }
    }

    /// Placidus and Koch divide time arcs that do not exist where some ecliptic degrees never
    /// rise or set: they are undefined inside the polar circles.
    public var isUndefinedInsidePolarCircles: Bool { self == .placidus || self == .koch }
}

/// How a local birth time that falls in a clock change is read (`dstPolicy` of `chart.calculate`).
///
/// Both policies name the UTC offset used to read the wall time, in the order the offsets were in
/// force around the clock change:
/// - `earlier`: the offset in force *before* the change. In an overlap (the clocks went back, so
///   the time happened twice) this is the first occurrence. In a gap (the clocks jumped forward,
///   so the time never showed) it reads the time as if the clocks had not moved yet: Kyiv
///   2021-03-28 03:30 read at +02:00 is 01:30Z, which the new clocks show as 04:30.
/// - `later`: the offset in force *after* the change. In an overlap this is the second
///   occurrence. In a gap it reads the time with the new offset: Kyiv 2021-03-28 03:30 read at
///   +03:00 is 00:30Z, which the old clocks showed as 02:30.
///
/// A time that is neither in a gap nor in an overlap ignores the policy.
public enum DSTPolicy: String, Sendable, Hashable, Codable, CaseIterable {
    case earlier
    case later
}
