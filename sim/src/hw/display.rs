//! The display objects of `main/display/` as far as MCP sees them: the class (OLED, LCD or the
//! `NoDisplay` fallback), its size, and the global LVGL theme registry with the current theme
//! (`lvgl_theme.cc`, `oled_display.cc`, `lcd_display.cc`; docs/reference/firmware.md §10.4).
//!
//! Knows nothing about MCP or NVS: the caller persists LCD themes.

use crate::board::{DisplayKind, DisplaySpec};

/// The constructed display.
#[derive(Clone, Debug)]
pub struct Display {
    kind: DisplayKind,
    width: u32,
    height: u32,
    themes: Vec<String>,
    current: Option<String>,
    persist_theme: bool,
    named: bool,
}

impl Display {
    /// 1.x `LcdDisplay::SetTheme`: `dark`/`DARK`/`light`/`LIGHT` switch the colours and are
    /// kept as given (so a status can report `LIGHT`); any other name changes nothing.
    fn set_theme_named(&mut self, name: &[u8]) -> Option<String> {
        if self.kind != DisplayKind::Lcd || !matches!(name, b"dark" | b"DARK" | b"light" | b"LIGHT") {
            return None;
        }
        let name = String::from_utf8_lossy(name).into_owned();
        self.current = Some(name.clone());
        Some(name)
    }

    /// The display keeps a theme *name* (1.x), not registered theme objects.
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// Constructs the board's display. `init_failed` models an OLED panel that does not answer:
    /// the board falls back to `NoDisplay` (no themes, not an LVGL display, 0×0).
    /// `stored_theme` is NVS `display/theme` for LCD boards.
    ///
    /// `named` is the 1.x theme model (`Display::current_theme_name_`, a string): only the LCD
    /// display has a theme name, loaded from NVS verbatim (default `light`); OLEDs have none.
    pub fn new(spec: &DisplaySpec, init_failed: bool, stored_theme: Option<&str>, named: bool) -> Self {
        if spec.kind == DisplayKind::None || init_failed {
            return Display {
                kind: DisplayKind::None,
                width: 0,
                height: 0,
                themes: Vec::new(),
                current: None,
                persist_theme: false,
                named,
            };
        }
        let current = if named {
            (spec.kind == DisplayKind::Lcd).then(|| {
                stored_theme
                    .map(str::to_string)
                    .or_else(|| spec.default_theme.clone())
                    .unwrap_or_else(|| "light".into())
            })
        } else if spec.persist_theme {
            stored_theme
                .filter(|t| spec.themes.iter().any(|x| x == t))
                .map(str::to_string)
                .or_else(|| spec.default_theme.clone())
        } else {
            spec.default_theme.clone()
        };
        Display {
            kind: spec.kind,
            width: spec.width,
            height: spec.height,
            themes: spec.themes.clone(),
            current,
            persist_theme: spec.persist_theme || (named && spec.kind == DisplayKind::Lcd),
            named,
        }
    }

    /// The display class (OLED, LCD, or `None` for the `NoDisplay` fallback).
    pub fn kind(&self) -> DisplayKind {
        self.kind
    }
    /// `dynamic_cast<LvglDisplay*>` succeeds (OLED or LCD; not the fallback, not the emote
    /// display).
    pub fn is_lvgl(&self) -> bool {
        matches!(self.kind, DisplayKind::Oled | DisplayKind::Lcd)
    }
    /// `dynamic_cast<OledDisplay*>` succeeds.
    pub fn is_monochrome(&self) -> bool {
        self.kind == DisplayKind::Oled
    }
    /// Width in pixels (0 for the fallback).
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Height in pixels (0 for the fallback).
    pub fn height(&self) -> u32 {
        self.height
    }
    /// `GetTheme()`.
    pub fn current_theme(&self) -> Option<&str> {
        self.current.as_deref()
    }
    /// Whether a successful `set_theme` is persisted to NVS `display/theme` (LCD boards).
    pub fn persists_theme(&self) -> bool {
        self.persist_theme
    }

    /// The `set_theme` tool: registry lookup (exact, case-sensitive), then `SetTheme`.
    /// Returns `None` for an unknown name; otherwise the theme applied. OLED displays re-apply
    /// their font but keep the current theme.
    pub fn set_theme(&mut self, name: &[u8]) -> Option<String> {
        if self.named {
            return self.set_theme_named(name);
        }
        let theme = self.themes.iter().find(|t| t.as_bytes() == name)?.clone();
        if self.kind == DisplayKind::Lcd {
            self.current = Some(theme.clone());
        }
        Some(theme)
    }
}
