//! What a board's branch of upstream's `main/CMakeLists.txt` sets for its screen: the built-in
//! text and icon fonts and the default assets' emoji collection (docs/screen.md, "What the
//! screen draws with").

/// `(BUILTIN_TEXT_FONT, BUILTIN_ICON_FONT, DEFAULT_EMOJI_COLLECTION)` of a branch's `body`; the
/// fonts default as `main/CMakeLists.txt` sets them before its branches (14 px 1 bpp), the
/// collection to none (empty).
pub fn fonts(body: &str) -> (String, String, String) {
    let set = |var: &str| {
        body.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(&format!("set({var} "))
                    .map(|r| r.trim_end_matches(')').trim().to_string())
            })
            .unwrap_or_default()
    };
    let or = |v: String, default: &str| if v.is_empty() { default.to_string() } else { v };
    (
        or(set("BUILTIN_TEXT_FONT"), "font_noto_sans_basic_14_1"),
        or(set("BUILTIN_ICON_FONT"), "font_material_symbols_14_1"),
        set("DEFAULT_EMOJI_COLLECTION"),
    )
}
