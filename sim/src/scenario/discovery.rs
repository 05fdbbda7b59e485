//! Discovery as the scenario runner sees it: every `tools/list` page the device answers, read
//! back to tool names (fast path checked against `serde_json`), and how a tool was discoverable
//! (which page, default or `withUserTools` listing) for the acceptance record's first row.

use crate::board::BoardSpec;
use crate::device::Device;
use crate::mcp::{McpTool, ToolsPage};

/// The tool names of one `tools/list` result object (`{"tools":[{"name":…},…]}`), in order,
/// exactly as `serde_json` reads them; none when the bytes do not parse. `listed` is how many
/// tools the device put on the page, `registry` the tools it could have listed.
pub(super) fn page_names(result: &[u8], listed: usize, registry: &[McpTool]) -> Vec<String> {
    recognize_page(result, registry)
        .filter(|names| names.len() == listed)
        .unwrap_or_else(|| parse_page_names(result))
}

/// The general reading: the page through `serde_json`.
pub(super) fn parse_page_names(result: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(result).unwrap_or_default();
    v["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The fast reading of a page as the device prints it: each element of the `tools` array is
/// recognized as the exact JSON of a registered tool (whose name is then what a JSON reader
/// decodes from it, unless it holds a NUL, which the JSON cuts). `None` for anything else,
/// which then goes through [`parse_page_names`].
pub(super) fn recognize_page(result: &[u8], registry: &[McpTool]) -> Option<Vec<String>> {
    let mut rest = result.strip_prefix(br#"{"tools":["#)?;
    let mut names = Vec::new();
    if rest.first() == Some(&b']') {
        return Some(names);
    }
    loop {
        let tool = registry.iter().find(|t| rest.starts_with(t.json()))?;
        if tool.name().contains('\0') {
            return None;
        }
        names.push(tool.name().to_string());
        rest = &rest[tool.json().len()..];
        match rest.first()? {
            b',' => rest = &rest[1..],
            b']' => return Some(names),
            _ => return None,
        }
    }
}

/// What discovery found at boot: every page of both lists.
pub(super) struct Discovery {
    pub(super) default_pages: Vec<Vec<String>>,
    pub(super) user_pages: Vec<Vec<String>>,
    pub(super) registered: Vec<(String, bool)>,
}

impl Discovery {
    pub(super) fn of(device: &Device) -> Discovery {
        let Some(mcp) = device.mcp() else {
            return Discovery {
                default_pages: Vec::new(),
                user_pages: Vec::new(),
                registered: Vec::new(),
            };
        };
        // The device's own reply bytes, read without building a `serde_json::Value` per page:
        // the names are what a client sees.
        let pages = |with_user: bool| -> Vec<Vec<String>> {
            mcp.pages(with_user)
                .map_while(|page| match page {
                    ToolsPage::Page { result, tools, .. } => Some(page_names(&result, tools, mcp.tools())),
                    ToolsPage::Error { .. } => None,
                })
                .take(64)
                .collect()
        };
        Discovery {
            default_pages: pages(false),
            user_pages: pages(true),
            registered: mcp
                .tools()
                .iter()
                .map(|t| (t.name().to_string(), t.user_only()))
                .collect(),
        }
    }

    pub(super) fn describe(&self, tool: &str, board: &BoardSpec) -> String {
        let total: usize = self.default_pages.iter().map(Vec::len).sum();
        if let Some(p) = self
            .default_pages
            .iter()
            .position(|page| page.iter().any(|t| t == tool))
        {
            return format!(
                "listed on page {} of {} of the default tools/list ({} tools) of {} {}",
                p + 1,
                self.default_pages.len(),
                total,
                board.name,
                board.firmware.version
            );
        }
        match self.registered.iter().find(|(n, _)| n == tool) {
            Some((_, true)) => format!(
                "registered user-only: hidden from the default list, listed only with withUserTools:true (page {}); callable by name all the same",
                self.user_pages
                    .iter()
                    .position(|p| p.iter().any(|t| t == tool))
                    .map_or(0, |p| p + 1)
            ),
            Some((_, false)) => "registered but on no default page (the list failed)".to_string(),
            None => format!(
                "NOT registered on {} {}: the board facts do not create it (full list: {} tools, {} with user-only)",
                board.name,
                board.firmware.version,
                total,
                self.user_pages.iter().map(Vec::len).sum::<usize>()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::harness::Harness;
    use crate::mcp::ToolAction;
    use crate::world::WorldSpec;

    #[test]
    fn page_names_read_every_page_as_serde_json_does() {
        let check = |result: &[u8], listed: usize, registry: &[McpTool]| {
            assert_eq!(page_names(result, listed, registry), parse_page_names(result));
        };
        for file in [
            "bread-compact-wifi.yaml",
            "bread-compact-wifi-lcd.yaml",
            "bread-compact-wifi-s3cam.yaml",
            "otto-robot.yaml",
            "lckfb/szpi-esp32c3.yaml",
            "waveshare/esp32-s3-audio-board.yaml",
        ] {
            let path = format!("{}/../boards/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("shipped board");
            let board = Arc::new(BoardSpec::from_yaml(&path, &text).expect("board"));
            let mut h = Harness::new(Device::new(board, WorldSpec::conformance(), 1));
            h.power_on();
            let _ = h.run_until_idle();
            let mcp = h.device.mcp().expect("booted");
            for with_user in [false, true] {
                for page in mcp.pages(with_user) {
                    let ToolsPage::Page { result, tools, .. } = page else {
                        break;
                    };
                    let recognized = recognize_page(&result, mcp.tools());
                    assert_eq!(recognized.map(|n| n.len()), Some(tools), "{file}");
                    check(&result, tools, mcp.tools());
                }
            }
        }
        // Hand-made registries and pages: escapes, a NUL, duplicates, pages out of shape.
        let tool = |name: &str| McpTool::new(name, "d \"q\"", Vec::new(), false, ToolAction::Reboot);
        let registry = [tool("a\"b"), tool("c\\"), tool("x\u{0}y"), tool("\u{e9}\n")];
        let json = |i: usize| String::from_utf8(registry[i].json().to_vec()).expect("UTF-8");
        let pages = [
            format!(r#"{{"tools":[{},{},{}]}}"#, json(0), json(1), json(3)),
            format!(r#"{{"tools":[{}],"nextCursor":"z"}}"#, json(2)),
            format!(r#"{{"tools":[{},{}]}}"#, json(0), json(0)),
            format!(r#"{{"tools":[{}x]}}"#, json(1)),
            r#"{"tools":[{"name":"a","name":"b"}]}"#.to_string(),
            r#"{"tools":[{"name":1},{"name":"q"}]}"#.to_string(),
            r#"{"tools":[]}"#.to_string(),
            String::new(),
        ];
        for page in &pages {
            for listed in 0..4 {
                check(page.as_bytes(), listed, &registry);
            }
        }
        check(b"{\"tools\":[{\"name\":\"\xff\"}]}", 1, &registry);
        assert_eq!(
            page_names(pages[0].as_bytes(), 3, &registry),
            ["a\"b", "c\\", "\u{e9}\n"]
        );
        assert_eq!(page_names(pages[1].as_bytes(), 1, &registry), ["x"]);
    }
}
