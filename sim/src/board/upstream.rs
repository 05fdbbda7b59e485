//! What a generated board file records about its upstream build (`boardgen`; docs/boards.md,
//! "Every upstream build"): where the facts were read, the classes the board constructs, and
//! what the twin does not model for it.

use serde::Deserialize;

/// Facts a generated board file records about its upstream build: where they were read, the
/// classes the board constructs, and what the twin does not model for it. Informational: the
/// simulation runs on the other fields.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// The upstream commit the generator read (`78/xiaozhi-esp32`).
    pub commit: String,
    /// The board folder under `main/boards/`.
    pub dir: String,
    /// The build's name in `config.json` (BOARD_NAME).
    pub build: String,
    /// The build's `sdkconfig_append` lines.
    #[serde(default)]
    pub sdkconfig_append: Vec<String>,
    /// The `CONFIG_BOARD_TYPE_*` symbol the build selects.
    #[serde(default)]
    pub board_symbol: String,
    /// The board class (`DECLARE_BOARD`) and the network board it derives from.
    #[serde(default)]
    pub board_class: String,
    /// `WifiBoard`, `Ml307Board`, `DualNetworkBoard`, …
    #[serde(default)]
    pub board_base: String,
    /// The codec class `GetAudioCodec()` constructs, where, and its constructor arguments
    /// (`name=value`, in order; macros resolved through `config.h`).
    #[serde(default)]
    pub codec: Option<UpstreamCodec>,
    /// The display class constructed, and where.
    #[serde(default)]
    pub display_class: String,
    /// The LED `GetLed()` returns.
    #[serde(default)]
    pub led: String,
    /// `BUILTIN_TEXT_FONT` of the board's CMake branch.
    #[serde(default)]
    pub text_font: String,
    /// What the generator could not read or the twin does not model for this board.
    #[serde(default)]
    pub unmodelled: Vec<String>,
}

/// The codec class a generated board constructs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamCodec {
    /// The class constructed (a board's own class or an upstream one).
    pub class: String,
    /// The upstream codec class it derives from (itself when it is one).
    #[serde(default)]
    pub base: String,
    /// `file:line` of the construction.
    #[serde(default)]
    pub at: String,
    /// Constructor arguments, `name=value`.
    #[serde(default)]
    pub params: Vec<String>,
}
