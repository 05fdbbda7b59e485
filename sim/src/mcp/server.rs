//! `McpServer` of `main/mcp_server.cc`: the tool registry and everything that happens on the
//! receive task when an MCP payload arrives (docs/reference/firmware.md §4).
//!
//! `receive` is the synchronous part of `ParseMessage`: validation, `initialize`, `tools/list`,
//! argument coercion. It returns what the device must do next — drop, queue a 1-hop reply, or
//! queue the call for the main task. Knows nothing about hardware, scheduling or time.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::cjson::Item;
use crate::mcp::property::Arguments;
use crate::mcp::strings;
use crate::mcp::tool::{McpTool, ReturnValue, encode_result};
use crate::trace::{DropReason, LogLevel, LogRecord};

/// The camera settings an `initialize` carries (`capabilities.vision`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vision {
    /// `vision.url`: where `self.camera.take_photo` POSTs the photo.
    pub url: Vec<u8>,
    /// `vision.token`, or empty when absent or not a string (a repeated `initialize` clears it).
    pub token: Vec<u8>,
}

/// The outcome of the receive-task part of `ParseMessage`.
#[derive(Debug)]
pub enum Received {
    /// Nothing will ever be sent back.
    Dropped {
        /// Which validation step dropped it.
        reason: DropReason,
        /// The firmware's log line, if it logs one.
        log: Option<Box<LogRecord>>,
    },
    /// A reply built on the receive task (1 hop). `vision` is set by an `initialize` that
    /// configures the camera.
    Reply {
        /// The request id after `valueint` (may differ from the one sent).
        id: i32,
        /// The complete JSON-RPC reply to send.
        payload: Vec<u8>,
        /// Whether `payload` is an `error` reply.
        is_error: bool,
        /// The firmware's log line, if it logs one.
        log: Option<Box<LogRecord>>,
        /// The camera explain URL/token to set (camera boards only).
        vision: Option<Vision>,
    },
    /// An exception nothing catches left `ParseMessage` (the L1–L2 range error): `abort()`.
    Aborted {
        /// What was thrown (`std::invalid_argument` and its message).
        reason: String,
        /// The firmware's last log line (the C++ runtime's `terminate called …`).
        log: Box<LogRecord>,
    },
    /// A valid `tools/call`: run `tool` with `args` on the main task (2 hops), or — on a
    /// threaded server (1.7.5–1.9.1) — in a `tool_call` thread of `stack` bytes.
    Call {
        /// The request id after `valueint`.
        id: i32,
        /// Index of the tool in the registry ([`McpServer::tool`]).
        tool: usize,
        /// The coerced arguments, one per property in declaration order (defaults filled in).
        args: Arguments,
        /// The tool thread's stack size (`params.stackSize` after `valueint`, default 6144);
        /// `None` on servers that call on the main task.
        stack: Option<i32>,
    },
}

/// The registry plus the server identity.
#[derive(Clone, Debug)]
pub struct McpServer {
    tools: Vec<McpTool>,
    first_by_name: BTreeMap<Box<[u8]>, usize>,
    /// The first `tools/list` page without and with user tools, made when first asked for (the
    /// registry no longer changes by then; every change to it forgets them).
    first_pages: [OnceLock<ToolsPage>; 2],
    board_name: String,
    version: String,
    has_camera: bool,
    threaded: bool,
    range_errors_abort: bool,
}

/// How one `tools/list` request turned out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolsPage {
    /// The `result` object, maybe with `nextCursor`.
    Page {
        /// The `result` object bytes: `{"tools":[…]}`, maybe with `nextCursor`.
        result: Vec<u8>,
        /// The name of the first tool that did not fit, if any (the next page starts with it).
        next_cursor: Option<String>,
        /// How many tools this page lists.
        tools: usize,
    },
    /// Nothing fit (or nothing matched): the error message.
    Error {
        /// `Failed to add tool <next_cursor> because of payload size limit`, unescaped.
        message: Vec<u8>,
    },
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl McpServer {
    /// An empty registry for `BOARD_NAME` `board_name` at app version `version`; `has_camera`
    /// decides whether `initialize` may set the camera's explain URL.
    pub fn new(board_name: &str, version: &str, has_camera: bool) -> Self {
        McpServer {
            tools: Vec::new(),
            first_by_name: BTreeMap::new(),
            first_pages: Default::default(),
            board_name: board_name.to_string(),
            version: version.to_string(),
            has_camera,
            threaded: false,
            range_errors_abort: false,
        }
    }

    /// The L1–L2 argument walk: a range error is thrown past every handler (the device aborts).
    pub fn range_errors_abort(mut self, abort: bool) -> Self {
        self.range_errors_abort = abort;
        self
    }

    /// The server of 1.7.5–1.9.1: `tools/call` checks `params.stackSize` and runs the tool in a
    /// thread of its own (docs/reference/firmware-versions.md L3).
    pub fn threaded(mut self, threaded: bool) -> Self {
        self.threaded = threaded;
        self
    }

    /// `McpServer::AddTool`: refuses a name already in the *current* list (returns false).
    pub fn add_tool(&mut self, tool: McpTool) -> bool {
        // The index holds exactly the names of the current list.
        if self.first_by_name.contains_key(tool.name().as_bytes()) {
            return false;
        }
        self.first_by_name
            .insert(tool.name().as_bytes().into(), self.tools.len());
        self.tools.push(tool);
        self.first_pages = Default::default();
        true
    }

    /// `AddCommonTools`' list juggling: the tools registered so far are moved aside, `register`
    /// adds the common tools to an empty list, then the moved-aside tools are appended — so the
    /// duplicate check is bypassed between the two groups (docs/reference/firmware.md §4.8).
    pub fn add_in_front(&mut self, register: impl FnOnce(&mut McpServer)) {
        let original = std::mem::take(&mut self.tools);
        self.reindex();
        register(self);
        self.tools.extend(original);
        self.reindex();
    }

    fn reindex(&mut self) {
        self.first_pages = Default::default();
        self.first_by_name.clear();
        for (i, t) in self.tools.iter().enumerate() {
            self.first_by_name.entry(t.name().as_bytes().into()).or_insert(i);
        }
    }

    /// The registry in `tools/list` order.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// The tool at `index` (panics if out of range).
    pub fn tool(&self, index: usize) -> &McpTool {
        &self.tools[index]
    }

    /// The first tool with exactly this name (byte compare, case-sensitive).
    pub fn find(&self, name: &[u8]) -> Option<usize> {
        self.first_by_name.get(name).copied()
    }

    /// `BOARD_NAME`, sent as `serverInfo.name`.
    pub fn board_name(&self) -> &str {
        &self.board_name
    }

    /// The app version, sent as `serverInfo.version`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The synchronous part of `McpServer::ParseMessage(const cJSON*)`.
    pub fn receive(&self, json: Item<'_>) -> Received {
        let version = json.get(b"jsonrpc");
        match version.and_then(|v| v.c_string()) {
            Some(v) if v == strings::JSONRPC_VERSION => {}
            other => {
                let shown = match (version, other) {
                    (_, Some(v)) => lossy(v),
                    (Some(_), None) => "(null)".to_string(),
                    (None, None) => "null".to_string(),
                };
                return Received::Dropped {
                    reason: DropReason::InvalidVersion,
                    log: Some(LogRecord::mcp_error(format!("Invalid JSONRPC version: {shown}"))),
                };
            }
        }
        let Some(method) = json.get(b"method").and_then(|m| m.c_string()) else {
            return Received::Dropped {
                reason: DropReason::MissingMethod,
                log: Some(LogRecord::mcp_error("Missing method".to_string())),
            };
        };
        if method.starts_with(strings::NOTIFICATIONS_PREFIX) {
            return Received::Dropped {
                reason: DropReason::Notification,
                log: None,
            };
        }
        let params = json.get(b"params");
        if params.is_some_and(|p| !p.is_object()) {
            return Received::Dropped {
                reason: DropReason::InvalidParams,
                log: Some(LogRecord::mcp_error(format!(
                    "Invalid params for method: {}",
                    lossy(method)
                ))),
            };
        }
        let Some(id) = json.get(b"id").filter(Item::is_number) else {
            return Received::Dropped {
                reason: DropReason::InvalidId,
                log: Some(LogRecord::mcp_error(format!(
                    "Invalid id for method: {}",
                    lossy(method)
                ))),
            };
        };
        let id = id.valueint();

        match method {
            strings::METHOD_INITIALIZE => self.initialize(id, params),
            strings::METHOD_TOOLS_LIST => {
                let mut cursor: &[u8] = b"";
                let mut with_user_tools = false;
                if let Some(p) = params {
                    if let Some(c) = p.get(b"cursor").and_then(|c| c.c_string()) {
                        cursor = c;
                    }
                    if let Some(w) = p.get(b"withUserTools").filter(Item::is_bool) {
                        with_user_tools = w.valueint() == 1;
                    }
                }
                let other_page;
                let page = if cursor.is_empty() {
                    self.first_page(with_user_tools)
                } else {
                    other_page = self.tools_list(cursor, with_user_tools);
                    &other_page
                };
                match page {
                    ToolsPage::Page { result, .. } => reply(id, strings::reply_result(id, result), false, None),
                    ToolsPage::Error { message } => {
                        let log = LogRecord::mcp_error(format!("tools/list: {}", lossy(message)));
                        reply(id, strings::reply_error(id, message), true, Some(log))
                    }
                }
            }
            strings::METHOD_TOOLS_CALL => self.tools_call(id, params),
            _ => {
                let message = strings::concat(strings::ERR_METHOD_NOT_IMPLEMENTED, method);
                let log = LogRecord::mcp_error(lossy(&message));
                reply(id, strings::reply_error(id, &message), true, Some(log))
            }
        }
    }

    fn initialize(&self, id: i32, params: Option<Item<'_>>) -> Received {
        let vision = params
            .and_then(|p| p.get(b"capabilities"))
            .filter(Item::is_object)
            .and_then(|c| c.get(b"vision"))
            .filter(Item::is_object)
            .and_then(|v| {
                let url = v.get(b"url").and_then(|u| u.c_string())?;
                let token = v.get(b"token").and_then(|t| t.c_string()).unwrap_or_default();
                Some(Vision {
                    url: url.to_vec(),
                    token: token.to_vec(),
                })
            })
            .filter(|_| self.has_camera);
        let result = strings::initialize_result(&self.board_name, &self.version);
        Received::Reply {
            id,
            payload: strings::reply_result(id, &result),
            is_error: false,
            log: None,
            vision,
        }
    }

    /// Every page a client gets by starting without a cursor and following `nextCursor`, in
    /// order; a failing page is the last item.
    pub fn pages(&self, with_user_tools: bool) -> Pages<'_> {
        Pages {
            server: self,
            with_user_tools,
            cursor: Some(String::new()),
        }
    }

    /// [`McpServer::tools_list`] without a cursor, remembered: what nearly every client asks for.
    fn first_page(&self, with_user_tools: bool) -> &ToolsPage {
        self.first_pages[usize::from(with_user_tools)].get_or_init(|| self.tools_list(b"", with_user_tools))
    }

    /// `McpServer::GetToolsList` — the exact paging algorithm of docs/reference/firmware.md §4.4.
    pub fn tools_list(&self, cursor: &[u8], with_user_tools: bool) -> ToolsPage {
        let mut out = Vec::with_capacity(2048);
        out.extend_from_slice(b"{\"tools\":[");
        let mut found = cursor.is_empty();
        let mut next_cursor: Option<&str> = None;
        let mut count = 0;
        for tool in &self.tools {
            if !found {
                if tool.name().as_bytes() == cursor {
                    found = true;
                } else {
                    continue;
                }
            }
            if !with_user_tools && tool.user_only() {
                continue;
            }
            let piece = tool.json().len() + 1;
            if out.len() + piece + strings::TOOLS_LIST_MARGIN > strings::TOOLS_LIST_BUDGET {
                next_cursor = Some(tool.name());
                break;
            }
            out.extend_from_slice(tool.json());
            out.push(b',');
            count += 1;
        }
        if out.last() == Some(&b',') {
            out.pop();
        }
        if out.last() == Some(&b'[') && !self.tools.is_empty() {
            let mut message = strings::ERR_PAYLOAD_SIZE_LIMIT_HEAD.as_bytes().to_vec();
            message.extend_from_slice(next_cursor.unwrap_or("").as_bytes());
            message.extend_from_slice(strings::ERR_PAYLOAD_SIZE_LIMIT_TAIL.as_bytes());
            return ToolsPage::Error { message };
        }
        match next_cursor {
            None => out.extend_from_slice(b"]}"),
            Some(name) => {
                out.extend_from_slice(b"],\"nextCursor\":\"");
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\"}");
            }
        }
        ToolsPage::Page {
            result: out,
            next_cursor: next_cursor.map(str::to_string),
            tools: count,
        }
    }

    fn tools_call(&self, id: i32, params: Option<Item<'_>>) -> Received {
        let error = |message: Vec<u8>| {
            let log = LogRecord::mcp_error(format!("tools/call: {}", lossy(&message)));
            reply(id, strings::reply_error(id, &message), true, Some(log))
        };
        let Some(params) = params.filter(Item::is_object) else {
            return error(strings::ERR_MISSING_PARAMS.into());
        };
        let Some(name) = params.get(b"name").and_then(|n| n.c_string()) else {
            return error(strings::ERR_MISSING_NAME.into());
        };
        let arguments = params.get(b"arguments");
        if arguments.is_some_and(|a| !a.is_object()) {
            return error(strings::ERR_INVALID_ARGUMENTS.into());
        }
        let stack = if self.threaded {
            match params.get(b"stackSize") {
                None => Some(strings::DEFAULT_TOOLCALL_STACK_SIZE),
                Some(s) if s.is_number() => Some(s.valueint()),
                Some(_) => return error(strings::ERR_INVALID_STACK_SIZE.into()),
            }
        } else {
            None
        };
        let Some(tool) = self.find(name) else {
            return error(strings::concat(strings::ERR_UNKNOWN_TOOL, name));
        };
        let properties = self.tools[tool].properties();
        let mut args = Arguments::new();
        for p in properties {
            match p.coerce(arguments) {
                Ok(v) => args.push(v),
                Err(message) if self.range_errors_abort && strings::is_range_error(&message) => {
                    let what = lossy(&message);
                    return Received::Aborted {
                        reason: format!("uncaught std::invalid_argument: {what}"),
                        // Shown under the `App` tag, as the twin has always shown it (the real
                        // runtime prints it with no ESP_LOG prefix).
                        log: Box::new(LogRecord {
                            level: LogLevel::Error,
                            tag: "App",
                            text: format!(
                                "terminate called after throwing an instance of 'std::invalid_argument' what(): {what}"
                            ),
                        }),
                    };
                }
                Err(message) => return error(message),
            }
        }
        Received::Call { id, tool, args, stack }
    }
}

/// The pages of one `tools/list` walk ([`McpServer::pages`]).
pub struct Pages<'a> {
    server: &'a McpServer,
    with_user_tools: bool,
    /// The cursor of the next request; `None` once the walk is over.
    cursor: Option<String>,
}

impl Iterator for Pages<'_> {
    type Item = ToolsPage;

    fn next(&mut self) -> Option<ToolsPage> {
        let cursor = self.cursor.take()?;
        let page = self.server.tools_list(cursor.as_bytes(), self.with_user_tools);
        if let ToolsPage::Page { next_cursor, .. } = &page {
            self.cursor = next_cursor.clone();
        }
        Some(page)
    }
}

fn reply(id: i32, payload: Vec<u8>, is_error: bool, log: Option<Box<LogRecord>>) -> Received {
    Received::Reply {
        id,
        payload,
        is_error,
        log,
        vision: None,
    }
}

/// `ReplyResult` for a finished callback: `{"jsonrpc":"2.0","id":N,"result":{"content":…}}`,
/// the result encoded straight into the reply.
pub fn call_result_payload(id: i32, value: &ReturnValue) -> Vec<u8> {
    let text_len = match value {
        ReturnValue::Text(s) | ReturnValue::Json(s) => s.len(),
        ReturnValue::Image { data, .. } => data.len(),
        ReturnValue::Bool(_) | ReturnValue::Int(_) => 0,
    };
    // Escaping rarely doubles a text; the vector grows if it does.
    strings::reply_result_with(id, 64 + 2 * text_len, |out| encode_result(value, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::ToolAction;

    fn tiny(name: &str, desc_len: usize, user_only: bool) -> McpTool {
        McpTool::new(
            name,
            &"x".repeat(desc_len),
            vec![],
            user_only,
            ToolAction::GetDeviceStatus,
        )
    }

    #[test]
    fn common_tools_go_in_front_and_bypass_the_duplicate_check() {
        let mut s = McpServer::new("b", "1", false);
        assert!(s.add_tool(tiny("board.a", 1, false)));
        assert!(s.add_tool(tiny("dup", 1, false)));
        assert!(!s.add_tool(tiny("dup", 2, false)), "same list: refused");
        s.add_in_front(|s| {
            assert!(s.add_tool(tiny("common", 1, false)));
            assert!(s.add_tool(tiny("dup", 3, false)));
        });
        let names: Vec<_> = s.tools().iter().map(|t| t.name().to_string()).collect();
        assert_eq!(names, ["common", "dup", "board.a", "dup"]);
        assert_eq!(
            s.tool(s.find(b"dup").unwrap()).description(),
            "xxx",
            "the common one is found first"
        );
    }

    #[test]
    fn the_remembered_first_page_follows_the_registry() {
        let list = |s: &McpServer| {
            let request = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":""}}"#;
            crate::cjson::with_parsed(request, crate::cjson::Terminator::Length, |r| {
                match s.receive(r.unwrap()) {
                    Received::Reply { payload, .. } => payload,
                    other => panic!("{other:?}"),
                }
            })
        };
        let mut s = McpServer::new("b", "1", false);
        s.add_tool(tiny("a", 1, false));
        let before = list(&s);
        s.add_tool(tiny("b", 1, false));
        let after = list(&s);
        assert_ne!(before, after, "a tool added after the first listing is listed");
        let ToolsPage::Page { result, .. } = s.tools_list(b"", false) else {
            panic!("fits")
        };
        assert_eq!(after, strings::reply_result(1, &result));
        s.add_in_front(|s| {
            s.add_tool(tiny("c", 1, false));
        });
        assert!(list(&s).starts_with(br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"c""#));
    }

    #[test]
    fn the_largest_listable_tool_is_7959_bytes() {
        // {"name":"t","description":"…","inputSchema":{"type":"object","properties":{}}} = 78 + len
        let overhead = tiny("t", 0, false).json().len();
        let mut s = McpServer::new("b", "1", false);
        s.add_tool(tiny("t", 7959 - overhead, false));
        assert!(matches!(s.tools_list(b"", false), ToolsPage::Page { .. }));
        let mut s = McpServer::new("b", "1", false);
        s.add_tool(tiny("t", 7960 - overhead, false));
        assert_eq!(
            s.tools_list(b"", false),
            ToolsPage::Error {
                message: b"Failed to add tool t because of payload size limit".to_vec()
            }
        );
    }

    #[test]
    fn unknown_cursor_gives_the_empty_name_error() {
        let mut s = McpServer::new("b", "1", false);
        s.add_tool(tiny("a", 1, false));
        s.add_tool(tiny("u", 1, true));
        let empty = ToolsPage::Error {
            message: b"Failed to add tool  because of payload size limit".to_vec(),
        };
        assert_eq!(s.tools_list(b"nope", false), empty);
        assert_eq!(
            s.tools_list(b"u", false),
            empty,
            "cursor found, everything after it filtered"
        );
        assert!(matches!(s.tools_list(b"u", true), ToolsPage::Page { tools: 1, .. }));
        assert_eq!(
            McpServer::new("b", "1", false).tools_list(b"", false),
            ToolsPage::Page {
                result: b"{\"tools\":[]}".to_vec(),
                next_cursor: None,
                tools: 0
            }
        );
    }
}
