//! What a live device's run leaves: the driver's counts and what its companions kept (the
//! report's record, the scripted user's actions), read by `connect`'s report and the fleets.

/// What happened to a live device (for reports and the fleet summary).
#[derive(Clone, Debug, Default)]
pub struct DeviceStats {
    pub connects: u64,
    pub connect_failures: u64,
    /// Server hellos received (frames whose `type` is `hello`).
    pub hellos: u64,
    pub frames_in: u64,
    pub frames_out: u64,
    pub binary_in: u64,
    pub binary_out: u64,
    pub boots: u32,
    pub closes: u64,
    /// With `record`: state transitions (ms, from, to).
    pub transitions: Vec<(f64, String, String)>,
    /// With `record`: `listen`/`abort` messages the device sent (ms, text).
    pub control_out: Vec<(f64, String)>,
    /// With `record`: MCP requests that arrived.
    pub requests_in: Vec<Request>,
    /// With `record`: MCP replies the device sent (ms, id, `content[0].text`).
    pub replies_out: Vec<(f64, Option<i64>, Option<String>)>,
    /// With a script: what the user did (ms, line, action).
    pub user: Vec<(f64, usize, String)>,
}

/// An MCP request that arrived at a live device.
#[derive(Clone, Debug)]
pub struct Request {
    pub at_ms: f64,
    pub method: String,
    /// `params.name` (`tools/call`).
    pub tool: Option<String>,
    pub arguments: Option<serde_json::Value>,
    pub id: Option<i64>,
}
