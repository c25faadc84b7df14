//! A readable transcript of a [`SessionScenario`] after its turns ran, for `cargo xtask demo`
//! and for a test that wants to show what happened.

use std::fmt::Write as _;

use crate::session_scenario::{ScriptedTurn, SessionScenario};

/// `writeln!` into a String, which cannot fail.
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// Shortens `text` to one line of at most `max` characters.
fn line(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ⏎ ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max).collect::<String>())
    }
}

impl SessionScenario {
    /// Returns a readable transcript of the session after `turns` ran: each message, the tool
    /// calls the script made (`scripted`) or the typed calls the broker saw (a real model), what
    /// the gate blocked, whether the unslop notice reached the turn, and the RESULT sent back.
    pub fn transcript(&self, turns: &[ScriptedTurn], scripted: bool) -> String {
        let scenario = self;
        let mut out = String::new();
        let sends = scenario.broker().calls_of("message.send");
        let tasks = scenario.broker().calls_of("tasks");
        let calls = scenario.model().messages_calls();
        let results: Vec<_> = calls.iter().flat_map(|call| call.tool_results()).collect();
        // A turn got the notice if, in a request of that turn, it stands after the turn's message.
        let noticed: Vec<bool> = turns
            .iter()
            .map(|turn| {
                calls.iter().any(|call| {
                    let messages: Vec<String> =
                        call.messages().iter().map(ToString::to_string).collect();
                    let Some(at) = messages.iter().rposition(|m| m.contains(&turn.text)) else {
                        return false;
                    };
                    let later_turn = turns.iter().any(|other| {
                        other.id > turn.id && messages.iter().any(|m| m.contains(&other.text))
                    });
                    !later_turn
                        && messages[at..]
                            .iter()
                            .any(|m| m.contains("Correction notice from the unslop check"))
                })
            })
            .collect();
        for (index, turn) in turns.iter().enumerate() {
            w!(out, "\n[{}] acme-cos → the session: {}", turn.id, turn.text);
            // A real model chooses its own tool calls; the broker's log shows the typed ones.
            let runner_verbs =
                ["role.claim", "role.release", "message.read", "message.send", "state"];
            let broker_calls = scenario.broker().calls();
            let typed = broker_calls.iter().filter(|c| !runner_verbs.contains(&c.verb.as_str()));
            for call in typed.filter(|_| !scripted && index == 0) {
                w!(
                    out,
                    "     broker     {} {} (a typed tool call of the session)",
                    call.verb,
                    call.args
                );
            }
            for (id, tool, input) in turn.tool_calls.iter().filter(|_| scripted) {
                w!(out, "     tool call  {tool} {input}");
                if tool.ends_with("list_tasks") {
                    for call in &tasks {
                        w!(
                            out,
                            "       broker   {} {} (with the runner's capability, never the agent's)",
                            call.verb,
                            call.args
                        );
                    }
                }
                match results.iter().find(|result| &result.tool_use_id == id) {
                    Some(result)
                        if result.is_error && result.text.contains("harness-gate: blocked") =>
                    {
                        let reason = result
                            .text
                            .find("harness-gate: ")
                            .map_or(result.text.as_str(), |at| &result.text[at..]);
                        w!(
                            out,
                            "       gate     BLOCKED; the model is told: {}",
                            line(reason.trim(), 160)
                        );
                    }
                    Some(result) => w!(out, "       result   {}", line(&result.text, 120)),
                    None => w!(out, "       result   (none reached the model)"),
                }
            }
            if noticed.get(index).copied().unwrap_or(false) {
                w!(out, "     notice     this turn's request carried the unslop correction notice");
            }
            match sends.get(index) {
                Some(send) => {
                    let text = send.args["text"].as_str().unwrap_or_default();
                    let (answer, note) =
                        text.split_once("\n\nunslop: ").map_or((text, None), |(a, n)| (a, Some(n)));
                    w!(
                        out,
                        "     RESULT     → {}: {}",
                        send.args["to"].as_str().unwrap_or("?"),
                        line(answer, 160)
                    );
                    if let Some(note) = note {
                        w!(out, "     note       unslop: {}", line(note, 160));
                    }
                }
                None => w!(out, "     RESULT     (none sent)"),
            }
        }
        let log =
            std::fs::read_to_string(scenario.run_dir().join("unslop.jsonl")).unwrap_or_default();
        let count = |event: &str| log.matches(&format!("\"event\":\"{event}\"")).count();
        w!(
            out,
            "\nunslop log     {} checked, {} flagged, {} notice injected (run/unslop.jsonl)",
            count("checked"),
            count("flagged"),
            count("notice_injected")
        );
        out
    }
}
