//! prompt.md: the role contract, the generated "This session" section, then the skills.

use crate::request::BundleRequest;
use crate::skills::{self, Skill};

/// The line every role without the end_run tool keeps.
pub(crate) const HUMAN_STOPS_LINE: &str = "Only the human stops a run.";

/// The line a role.end holder gets instead: it names the tool (`end_run`, as the model sees it
/// in this harness), and says what it does since rows 139 and 155.
pub(crate) fn end_run_line(end_run: &str) -> String {
    format!(
        "You can stop a run with {end_run} (a role and a reason of 1 to 500 characters); \
it revokes that role's run and never makes a decision. The broker refuses ending your own run \
(role-end-refused). Ending the assistant revokes every assistant thread run."
    )
}

/// The line a land_work holder gets (the tool named as the model sees it): the landing's
/// outcome comes later.
pub(crate) fn land_line(land_work: &str) -> String {
    format!(
        "{land_work} starts a landing and answers at once with {{landing: \"started\", commit, base, reviewed, patch_id}}; \
the outcome comes later as a RESULT from the bus: the landing, or the refusal code."
    )
}

/// What the section lists, already named as the harness names them.
pub(crate) struct SessionTools<'a> {
    pub(crate) builtin: &'a [String],
    pub(crate) typed: &'a [String],
    /// The typed tools under their own names, to decide which lines apply.
    pub(crate) typed_raw: &'a [String],
}

fn list(names: &[String]) -> String {
    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
}

/// Renders prompt.md.
pub(crate) fn render(
    request: &BundleRequest<'_>,
    tools: &SessionTools<'_>,
    skills: &[Skill],
) -> String {
    let resolved = request.resolved;
    let mut out = request.contract.clone();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str("\n## This session\n\n");
    out.push_str(&format!("- Business: {}\n", resolved.business));
    let name = resolved.name.as_deref().map(|name| format!(", named {name}")).unwrap_or_default();
    out.push_str(&format!("- Instance: {} (role {}{name})\n", resolved.instance, resolved.role));
    out.push_str(&format!("- Run: {}\n", request.session.run));
    out.push_str(&format!("- Launched by: {}\n", request.session.launched_by));
    out.push_str(&format!("- Workspace: {}\n", request.session.workspace));
    if let Some(tracker) = &request.tracker {
        out.push_str(&format!("- Tracker: {tracker}\n"));
    }
    out.push_str(&format!("- Built-in tools: {}\n", list(tools.builtin)));
    out.push_str(&format!("- Typed tools: {}\n", list(tools.typed)));
    out.push('\n');
    out.push_str(
        "You act on the bus only through the typed tools. A tool being present is not permission: \
the broker decides every call, and a refusal reaches you as `refused: <code>`.\n",
    );
    let holds = |tool: &str| tools.typed_raw.iter().any(|name| name == tool);
    // The tools are named as the model sees them, which is the harness module's to say.
    let seen = |tool: &str| request.harness.typed_tool_name(tool);
    if holds("end_run") {
        out.push_str(&end_run_line(&seen("end_run")));
    } else {
        out.push_str(HUMAN_STOPS_LINE);
    }
    out.push('\n');
    if holds("land_work") {
        out.push_str(&land_line(&seen("land_work")));
        out.push('\n');
    }
    if !request.arbiter.is_empty() {
        let routes: Vec<String> = request
            .arbiter
            .iter()
            .map(|(domain, arbiter)| format!("{domain} to {arbiter}"))
            .collect();
        out.push_str(&format!(
            "A routed {} goes to the business arbiter for its domain: {}. Without a domain it is delivery.\n",
            seen("raise_decision"),
            routes.join(", ")
        ));
    }
    let section = skills::render_section(skills);
    if !section.is_empty() {
        out.push('\n');
        out.push_str(&section);
    }
    out
}
