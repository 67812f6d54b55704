/// A point whose position `Ephemeris` computes: the ten classical planets, the lunar nodes, Chiron and the
/// mean lunar apogee (Black Moon Lilith).
///
/// Raw values are the names used in the NatalChart JSON (`"Sun"`…`"Pluto"`).
public enum CelestialBody: String, Sendable, CaseIterable, Codable {
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
    case meanNode = "MeanNode"
    case trueNode = "TrueNode"
    case chiron = "Chiron"
    case meanLilith = "MeanLilith"

    /// The Sun, the Moon and the eight planets, Mercury to Pluto, in that order.
    public static let planets: [CelestialBody] = [
        .sun, .moon, .mercury, .venus, .mars, .jupiter, .saturn, .uranus, .neptune, .pluto,
    ]
}

/// A house system; the raw values are the names used in jobs and the NatalChart JSON.
public enum HouseSystem: String, Sendable, CaseIterable, Codable {
    case placidus
    case koch
    case porphyry
    case regiomontanus
    case campanus
    case equal
    case wholeSign
}

/// A sidereal zodiac's ayanamsa (the offset of the sidereal from the tropical zodiac).
public enum Ayanamsa: String, Sendable, CaseIterable, Codable {
    case lahiri
    case faganBradley
    case raman
}

/// The zodiac longitudes are measured in.
public enum Zodiac: Sendable, Hashable {
    /// Measured from the vernal equinox of the date (the default).
    case tropical
    /// Measured from a fixed star-based origin, `Ayanamsa` degrees behind the tropical one.
    case sidereal(Ayanamsa)
}
