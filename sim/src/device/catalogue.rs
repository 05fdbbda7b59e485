//! Tool registration at boot, by the firmware's rules (docs/reference/firmware.md §4.8, §7.1; `application.cc`
//! `Initialize`, `McpServer::AddCommonTools` / `AddUserOnlyTools`, `LampController`).
//!
//! Order: tools of the board constructor first (lamp, board-file tools), then `AddCommonTools`
//! puts the common tools *in front* of them (bypassing the duplicate check between the groups),
//! then the user-only tools. What is registered depends only on board facts (backlight, display
//! class and theme, camera, snapshot support), never on a per-board list.
//!
//! The built-in tools' definitions (name, description, schema, JSON) depend only on the
//! firmware's constants, so they are built once, never change, and every boot shares them.

use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use crate::board::{BoardSpec, BoardTool, DisplayKind};
use crate::firmware::{AssetsTool, CallPath, SnapshotTools, TakePhotoText, ThemeTool};
use crate::hw::display::Display;
use crate::mcp::property::{Property, PropertyType, PropertyValue};
use crate::mcp::{McpServer, McpTool, ToolAction, strings};
use crate::trace::LogLevel;

/// The objects the board constructed, as far as registration cares.
pub(crate) struct BoardObjects<'a> {
    /// The board file (board-constructor tools, snapshot support).
    pub spec: &'a BoardSpec,
    /// The display object, for its class and theme support.
    pub display: &'a Display,
    /// A backlight object exists (brightness tool).
    pub has_backlight: bool,
    /// A camera object exists (take-photo tool).
    pub has_camera: bool,
}

/// One registration attempt, for the boot log (`Add tool: …` / `Tool … already added`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The tool's name.
    pub name: String,
    /// Registered as user-only (`AddUserOnlyTool`).
    pub user_only: bool,
    /// False when refused as a duplicate (`Tool … already added`).
    pub added: bool,
}

fn add(server: &mut McpServer, log: &mut Vec<Registration>, tool: McpTool) {
    let name = tool.name().to_string();
    let user_only = tool.user_only();
    let added = server.add_tool(tool);
    log.push(Registration { name, user_only, added });
}

fn no_args(name: &str, description: &str, action: ToolAction) -> McpTool {
    McpTool::new(name, description, Vec::new(), false, action)
}

fn user(name: &str, description: &str, properties: Vec<Property>, action: ToolAction) -> McpTool {
    McpTool::new(name, description, properties, true, action)
}

fn ranged(name: &str, min: i32, max: i32) -> Property {
    Property::ranged(name, PropertyType::Integer, min, max).expect("built-in ranges are integer")
}

/// Every built-in tool, as the firmware constructs it. The lamp tools carry GPIO 0 here; the
/// board's pin is attached at registration.
struct Builtins {
    lamp_get_state: McpTool,
    lamp_turn_on: McpTool,
    lamp_turn_off: McpTool,
    get_device_status: McpTool,
    set_volume: McpTool,
    set_brightness: McpTool,
    set_theme: McpTool,
    take_photo: McpTool,
    take_photo_older: McpTool,
    get_system_info: McpTool,
    reboot: McpTool,
    upgrade_firmware: McpTool,
    screen_get_info: McpTool,
    screen_snapshot: McpTool,
    screen_preview_image: McpTool,
    assets_set_download_url: McpTool,
}

impl Builtins {
    fn new() -> Self {
        let url_default = Property::with_default(
            "url",
            PropertyType::String,
            PropertyValue::Str(strings::DEFAULT_UPGRADE_URL.as_bytes().to_vec()),
        )
        .expect("string default");
        let quality =
            Property::ranged_with_default("quality", PropertyType::Integer, 80, 1, 100).expect("80 in 1..=100");
        Builtins {
            lamp_get_state: no_args(
                strings::TOOL_LAMP_GET_STATE,
                strings::DESC_LAMP_GET_STATE,
                ToolAction::LampGetState { gpio: 0 },
            ),
            lamp_turn_on: no_args(
                strings::TOOL_LAMP_TURN_ON,
                strings::DESC_LAMP_TURN_ON,
                ToolAction::LampTurnOn { gpio: 0 },
            ),
            lamp_turn_off: no_args(
                strings::TOOL_LAMP_TURN_OFF,
                strings::DESC_LAMP_TURN_OFF,
                ToolAction::LampTurnOff { gpio: 0 },
            ),
            get_device_status: no_args(
                strings::TOOL_GET_DEVICE_STATUS,
                strings::DESC_GET_DEVICE_STATUS,
                ToolAction::GetDeviceStatus,
            ),
            set_volume: McpTool::new(
                strings::TOOL_SET_VOLUME,
                strings::DESC_SET_VOLUME,
                vec![ranged("volume", 0, 100)],
                false,
                ToolAction::SetVolume,
            ),
            set_brightness: McpTool::new(
                strings::TOOL_SET_BRIGHTNESS,
                strings::DESC_SET_BRIGHTNESS,
                vec![ranged("brightness", 0, 100)],
                false,
                ToolAction::SetBrightness,
            ),
            set_theme: McpTool::new(
                strings::TOOL_SET_THEME,
                strings::DESC_SET_THEME,
                vec![Property::required("theme", PropertyType::String)],
                false,
                ToolAction::SetTheme,
            ),
            take_photo: McpTool::new(
                strings::TOOL_TAKE_PHOTO,
                strings::DESC_TAKE_PHOTO,
                vec![Property::required("question", PropertyType::String)],
                false,
                ToolAction::TakePhoto,
            ),
            take_photo_older: McpTool::new(
                strings::TOOL_TAKE_PHOTO,
                strings::DESC_TAKE_PHOTO_OLDER,
                vec![Property::required("question", PropertyType::String)],
                false,
                ToolAction::TakePhoto,
            ),
            get_system_info: user(
                strings::TOOL_GET_SYSTEM_INFO,
                strings::DESC_GET_SYSTEM_INFO,
                vec![],
                ToolAction::GetSystemInfo,
            ),
            reboot: user(strings::TOOL_REBOOT, strings::DESC_REBOOT, vec![], ToolAction::Reboot),
            upgrade_firmware: user(
                strings::TOOL_UPGRADE_FIRMWARE,
                strings::DESC_UPGRADE_FIRMWARE,
                vec![url_default],
                ToolAction::UpgradeFirmware,
            ),
            screen_get_info: user(
                strings::TOOL_SCREEN_GET_INFO,
                strings::DESC_SCREEN_GET_INFO,
                vec![],
                ToolAction::ScreenGetInfo,
            ),
            screen_snapshot: user(
                strings::TOOL_SCREEN_SNAPSHOT,
                strings::DESC_SCREEN_SNAPSHOT,
                vec![Property::required("url", PropertyType::String), quality],
                ToolAction::ScreenSnapshot,
            ),
            screen_preview_image: user(
                strings::TOOL_SCREEN_PREVIEW_IMAGE,
                strings::DESC_SCREEN_PREVIEW_IMAGE,
                vec![Property::required("url", PropertyType::String)],
                ToolAction::ScreenPreviewImage,
            ),
            assets_set_download_url: user(
                strings::TOOL_ASSETS_SET_DOWNLOAD_URL,
                strings::DESC_ASSETS_SET_DOWNLOAD_URL,
                vec![Property::required("url", PropertyType::String)],
                ToolAction::AssetsSetDownloadUrl,
            ),
        }
    }
}

/// Built on first use; immutable afterwards (a constant table, not state).
static BUILTINS: LazyLock<Builtins> = LazyLock::new(Builtins::new);

/// What registration produced at a boot: the registry, and the boot log lines in order
/// (`Add tool: …` / `Tool … already added`, with their log level).
#[derive(Debug)]
pub(crate) struct Catalogue {
    /// The registry, tools in registration order.
    pub server: Arc<McpServer>,
    /// Boot log lines with their level (`I` added, `W` duplicate).
    pub log: Vec<(LogLevel, Arc<str>)>,
}

/// Registration is a pure function of the board and four construction outcomes (backlight,
/// camera, a display theme, an LVGL display), so each [`Board`](crate::device::Board) keeps the result per outcome once
/// it has been built: every later boot of every device of that board shares it.
#[derive(Default)]
pub(crate) struct CatalogueCache([OnceLock<Arc<Catalogue>>; 16]);

impl fmt::Debug for CatalogueCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let built = self.0.iter().filter(|c| c.get().is_some()).count();
        write!(f, "CatalogueCache({built} built)")
    }
}

/// The catalogue this boot registers: built by [`register`] the first time these construction
/// outcomes occur on this board, shared afterwards.
pub(crate) fn catalogue(objects: &BoardObjects<'_>, cache: &CatalogueCache) -> Arc<Catalogue> {
    let key = usize::from(objects.has_backlight)
        | usize::from(objects.has_camera) << 1
        | usize::from(objects.display.current_theme().is_some()) << 2
        | usize::from(objects.display.is_lvgl()) << 3;
    cache.0[key]
        .get_or_init(|| {
            let (server, registrations) = register(objects);
            let log = registrations
                .into_iter()
                .map(|r| match (r.added, r.user_only) {
                    (true, user) => {
                        let line = format!("Add tool: {}{}", r.name, if user { " [user]" } else { "" });
                        (LogLevel::Info, Arc::from(line))
                    }
                    (false, _) => (LogLevel::Warn, Arc::from(format!("Tool {} already added", r.name))),
                })
                .collect();
            Arc::new(Catalogue {
                server: Arc::new(server),
                log,
            })
        })
        .clone()
}

/// Builds the registry exactly as the firmware's boot does.
pub(crate) fn register(objects: &BoardObjects<'_>) -> (McpServer, Vec<Registration>) {
    let spec = objects.spec;
    let builtins = &*BUILTINS;
    let fw = spec.firmware();
    let mut server = McpServer::new(&spec.name, fw.project_ver, objects.has_camera)
        .threaded(fw.call_path == CallPath::Thread)
        .range_errors_abort(fw.range_error_aborts);
    let mut log = Vec::new();

    // Board constructor (runs at the first Board::GetInstance()).
    for (index, tool) in spec.board_tools.iter().enumerate() {
        match tool {
            BoardTool::Lamp { gpio } => {
                let gpio = *gpio;
                for (tool, action) in [
                    (&builtins.lamp_get_state, ToolAction::LampGetState { gpio }),
                    (&builtins.lamp_turn_on, ToolAction::LampTurnOn { gpio }),
                    (&builtins.lamp_turn_off, ToolAction::LampTurnOff { gpio }),
                ] {
                    add(&mut server, &mut log, tool.with_action(action));
                }
            }
            BoardTool::Tool(t) => {
                let properties = t
                    .properties
                    .iter()
                    .map(|p| p.to_property().expect("validated when the board file was loaded"))
                    .collect();
                add(
                    &mut server,
                    &mut log,
                    McpTool::new(
                        &t.name,
                        &t.description,
                        properties,
                        t.user_only,
                        ToolAction::Board(index),
                    ),
                );
            }
        }
    }

    // Application::Initialize → AddCommonTools (in front of the board tools).
    let mut common_log = Vec::new();
    server.add_in_front(|s| {
        add(s, &mut common_log, builtins.get_device_status.clone());
        add(s, &mut common_log, builtins.set_volume.clone());
        if objects.has_backlight {
            add(s, &mut common_log, builtins.set_brightness.clone());
        }
        let theme_tool = match fw.theme_tool {
            // HAVE_LVGL is on for every modelled board (no emote message style).
            ThemeTool::Registered => objects.display.current_theme().is_some(),
            // 1.x `!display->GetTheme().empty()`: only the LCD display keeps a theme name.
            ThemeTool::Named => objects.display.kind() == DisplayKind::Lcd,
        };
        if theme_tool {
            add(s, &mut common_log, builtins.set_theme.clone());
        }
        if objects.has_camera {
            let take_photo = match fw.take_photo_text {
                TakePhotoText::Newer => &builtins.take_photo,
                TakePhotoText::Older => &builtins.take_photo_older,
            };
            add(s, &mut common_log, take_photo.clone());
        }
    });
    log.extend(common_log);

    // AddUserOnlyTools (2.x only).
    if !fw.user_only_tools {
        return (server, log);
    }
    add(&mut server, &mut log, builtins.get_system_info.clone());
    add(&mut server, &mut log, builtins.reboot.clone());
    add(&mut server, &mut log, builtins.upgrade_firmware.clone());
    if objects.display.is_lvgl() {
        add(&mut server, &mut log, builtins.screen_get_info.clone());
        let snapshot = match fw.snapshot_tools {
            SnapshotTools::Always => true,
            SnapshotTools::WithLvSnapshot => spec.target.lv_use_snapshot,
        };
        if snapshot {
            add(&mut server, &mut log, builtins.screen_snapshot.clone());
            add(&mut server, &mut log, builtins.screen_preview_image.clone());
        }
    }
    let assets = match fw.assets_tool {
        AssetsTool::Always => true,
        AssetsTool::WithAssetsPartition => spec.target.assets_partition_valid,
        AssetsTool::Absent => false,
    };
    if assets {
        add(&mut server, &mut log, builtins.assets_set_download_url.clone());
    }
    (server, log)
}
