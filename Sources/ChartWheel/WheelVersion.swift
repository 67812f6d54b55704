extension ChartWheel {
    /// The version of the drawing rules (layout, themes, glyphs, text). Anything cached from a
    /// rendering (an HTTP `ETag`, a stored wheel's content-derived id) names it, so a change to
    /// what the same input draws must change this value.
    public static let version = "chart-wheel/1"
}
