//! Inspect's chat messages from an episode's turns: the system prompt,
//! the task and every feedback message as the model received them (user
//! messages: retrace sends execution outcomes as text, not tool results),
//! and each reply.

use serde_json::{json, Value};

use crate::model::Role;
use crate::report::episode::Turn;

/// One turn as Inspect's `ChatMessage`; `source` says whether it was
/// given (`input`) or generated.
pub(super) fn message(turn: &Turn) -> Value {
    let role = turn.role.name();
    let source = match turn.role {
        Role::Assistant => "generate",
        _ => "input",
    };
    let content = if turn.images.is_empty() {
        json!(turn.text)
    } else {
        let mut parts = vec![json!({ "type": "text", "text": turn.text })];
        parts.extend(turn.images.iter().map(
            |png| json!({ "type": "image", "image": format!("data:image/png;base64,{png}") }),
        ));
        Value::Array(parts)
    };
    json!({
        "role": role,
        "content": content,
        "source": source,
        "metadata": { "round": turn.round },
    })
}

/// Every turn, in order.
pub(super) fn messages<'a>(turns: impl IntoIterator<Item = &'a Turn<'a>>) -> Vec<Value> {
    turns.into_iter().map(message).collect()
}
