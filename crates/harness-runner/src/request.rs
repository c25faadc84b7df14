//! The request a turn gets: the state block, the message header, the message.

use harness_bus::{Message, MessageKind, OpenTask, StateResult};

/// Renders the state block from the `state` verb's result: at most `cap` open tasks, with the
/// total.
pub(crate) fn state_block(state: &StateResult, read_at: &str, cap: u32) -> String {
    let mut out = format!("Current state, read at {read_at}:\n");
    out.push_str(&format!(
        "- Launch: {} (set at {} by event {})\n",
        one_line(&state.launch.state),
        one_line(&state.launch.at),
        one_line(&state.launch.event)
    ));
    let shown: Vec<&OpenTask> = state.tasks.open.iter().take(cap as usize).collect();
    out.push_str(&format!("- Open tasks: {} in all", state.tasks.total));
    if shown.is_empty() {
        out.push('\n');
    } else {
        out.push_str(&format!(", {} listed:\n", shown.len()));
        for task in shown {
            out.push_str(&format!("  - {}: {}\n", one_line(&task.task_ref), one_line(&task.title)));
        }
    }
    out.push_str("This block is the truth over any older message.\n");
    out
}

/// The header before the message text.
pub(crate) fn header(message: &Message) -> String {
    let what = match message.kind {
        MessageKind::Message => "Message",
        MessageKind::Result => "RESULT",
    };
    format!("{what} from {}, sent at {}:\n", one_line(&message.from), one_line(&message.sent_at))
}

/// Keeps a broker-supplied value on one line of the block.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Now, as RFC 3339 UTC to the second.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// `at` as `YYYY-MM-DDTHH:MM:SSZ`, truncated to the second.
fn rfc3339(at: jiff::Timestamp) -> String {
    let second = jiff::Timestamp::from_second(at.as_second()).unwrap_or(at);
    format!("{second:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        let at = |second: i64| jiff::Timestamp::from_second(second).unwrap();
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(at(1_796_010_000)), "2026-11-30T03:40:00Z");
        let late = jiff::Timestamp::new(1_796_010_000, 999_999_999).unwrap();
        assert_eq!(rfc3339(late), "2026-11-30T03:40:00Z");
    }

    #[test]
    fn state_block_lists_up_to_the_cap_with_the_total() {
        let result = serde_json::json!({
            "launch": {"state": "running", "at": "2026-11-30T03:00:00Z", "event": "ev-12"},
            "tasks": {"open": [{"ref": "web-1", "title": "One"}, {"ref": "web-2", "title": "Two\nlines"}], "total": 9}
        });
        let result: StateResult = serde_json::from_value(result).unwrap();
        let block = state_block(&result, "2026-11-30T03:41:00Z", 1);
        assert_eq!(
            block,
            "Current state, read at 2026-11-30T03:41:00Z:\n- Launch: running (set at 2026-11-30T03:00:00Z by event ev-12)\n- Open tasks: 9 in all, 1 listed:\n  - web-1: One\nThis block is the truth over any older message.\n"
        );
    }
}
