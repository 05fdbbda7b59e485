//! What a tool result becomes in a backend, as its personality says: the text its LLM is
//! handed, or what is spoken to the user (a failure xinnan-py speaks itself, an `action` JSON it
//! obeys), or nothing (docs/reference/backends.md §2).

use serde_json::Value;

use crate::backend::spec::{BackendSpec, Delivery, ResultToLlm};

/// What a reply becomes and where it goes (docs/reference/backends.md §2 items 6–7, §3–§7, §9); `None`
/// when this backend does nothing with it.
pub(crate) fn result_text(spec: &BackendSpec, payload: &Value) -> Option<(Delivery, String)> {
    let failed = spec.failure_delivery();
    if let Some(err) = payload.get("error") {
        let msg = err["message"].as_str();
        let text = match spec.result_to_llm {
            ResultToLlm::Text => format!("MCP错误: {}", msg.unwrap_or("未知错误")),
            ResultToLlm::ResultJson => format!("调用工具失败: {}", msg.unwrap_or_default()),
            ResultToLlm::JoinedText => format!("设备工具调用失败: {err}"),
            ResultToLlm::ContentJson => msg.unwrap_or_default().to_string(),
            ResultToLlm::Boolean => "null (HTTP 500)".to_string(),
            ResultToLlm::Generic => "MCP工具调用失败".to_string(),
        };
        return Some((failed, text));
    }
    let result = &payload["result"];
    let is_error = result["isError"] == Value::Bool(true);
    let first_text = result["content"][0]["text"].as_str();
    match spec.result_to_llm {
        ResultToLlm::Text if is_error => {
            let detail = result["error"]
                .as_str()
                .unwrap_or("工具调用返回错误，但未提供具体错误信息");
            return Some((failed, format!("工具调用错误: {detail}")));
        }
        ResultToLlm::Generic if is_error => return Some((failed, "MCP工具调用失败".into())),
        _ => {}
    }
    if spec.obeys_action_json
        && let Some(text) = first_text
        && let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(text)
        && let Some(action) = obj.get("action")
    {
        let response = obj.get("response").and_then(Value::as_str).unwrap_or_default();
        // `Action[name]`: an unknown name raises KeyError, spoken as its `str()`.
        return match action.as_str() {
            Some("RESPONSE" | "ERROR" | "NOTFOUND") => Some((Delivery::User, response.to_string())),
            Some("REQLLM") => Some((Delivery::Llm, String::new())),
            Some("NONE" | "RECORD") => None,
            Some(other) => Some((failed, format!("'{other}'"))),
            // `Action[x]` with a non-string key: `str()` of the KeyError / TypeError.
            None => Some((failed, python_key_error(action))),
        };
    }
    let first_text = first_text.unwrap_or_default();
    let text = match spec.result_to_llm {
        ResultToLlm::Text | ResultToLlm::Generic => first_text.to_string(),
        ResultToLlm::JoinedText => result["content"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
        ResultToLlm::ResultJson => {
            let mut r = result.clone();
            if r["isError"] == Value::Bool(false) {
                r.as_object_mut().map(|m| m.remove("isError"));
            }
            r.to_string()
        }
        ResultToLlm::ContentJson if result["isError"] == Value::Bool(false) => result["content"].to_string(),
        ResultToLlm::ContentJson => "null".to_string(),
        ResultToLlm::Boolean => match first_text {
            "true" => "true (boolean)".to_string(),
            "false" => "false (boolean)".to_string(),
            t => t.trim().to_string(),
        },
    };
    Some((spec.results_to, text))
}

/// What xinnan-py speaks when `Action[key]` fails for a key that is not a string: the `str()` of
/// its `KeyError` (the key's repr) or of the `TypeError` an unhashable key raises.
fn python_key_error(key: &Value) -> String {
    match key {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) => "unhashable type: 'list'".into(),
        Value::Object(_) => "unhashable type: 'dict'".into(),
        Value::String(t) => format!("'{t}'"),
    }
}
