//! The catalogue: one row per typed tool. Adding a tool is adding a row.
//!
//! A row's [`Param`]s are the single source of both the JSON Schema the model reads
//! ([`ToolDef::input_schema`]) and the argument check ([`crate::prepare_args`]), so the two cannot
//! drift apart. Rules a schema cannot say (two fields together or neither, a path outside `spec/`)
//! are the row's `check`; defaults the tool sends when the caller leaves a field out are its
//! `fill`.

use serde_json::{Map, Value, json};

use crate::args::ArgError;

/// The keys `organization.set` takes besides `revision`: the broker's list, kept in
/// `fixtures/broker/organization-keys.json`; a test fails when the two differ.
pub const ORGANIZATION_KEYS: &[&str] = &["limits", "models", "instances", "assistants"];

/// The one definition an assistant thread instance may name (the schema enum of
/// `change_organization`'s `assistants[].definition`); kept with [`ORGANIZATION_KEYS`].
pub const THREAD_DEFINITION: &str = "assistant";

/// A verb of the broker protocol (docs/contracts.md, contract 4). The tools use some; the runner uses
/// `role.claim`, `message.read`, `message.send`, `state` and `role.release`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// The runner claims its role (runner).
    RoleClaim,
    /// The runner releases its role on a stop (runner).
    RoleRelease,
    /// The runner reads the next message (runner).
    MessageRead,
    /// The runner sends a RESULT (runner).
    MessageSend,
    /// The runner reads the current state before a turn (runner).
    State,
    /// list_tasks.
    Tasks,
    /// get_task.
    TaskGet,
    /// request_staff.
    StaffRequest,
    /// end_run.
    RoleRevoke,
    /// organization_revision.
    OrganizationRevision,
    /// change_organization.
    OrganizationSet,
    /// set_name.
    NameSet,
    /// request_review.
    ReviewRequest,
    /// review_verdict.
    ReviewVerdict,
    /// task_close.
    TaskClose,
    /// read_spec.
    SpecRead,
    /// write_record.
    RecordWrite,
    /// raise_decision.
    DecisionRaise,
}

impl Verb {
    /// Every verb, in the order `docs/protocol.md` lists them.
    pub const ALL: &'static [Verb] = &[
        Self::RoleClaim,
        Self::RoleRelease,
        Self::MessageRead,
        Self::MessageSend,
        Self::State,
        Self::Tasks,
        Self::TaskGet,
        Self::StaffRequest,
        Self::RoleRevoke,
        Self::OrganizationRevision,
        Self::OrganizationSet,
        Self::NameSet,
        Self::ReviewRequest,
        Self::ReviewVerdict,
        Self::TaskClose,
        Self::SpecRead,
        Self::RecordWrite,
        Self::DecisionRaise,
    ];

    /// Returns the verb as it goes on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RoleClaim => "role.claim",
            Self::RoleRelease => "role.release",
            Self::MessageRead => "message.read",
            Self::MessageSend => "message.send",
            Self::State => "state",
            Self::Tasks => "tasks",
            Self::TaskGet => "task.get",
            Self::StaffRequest => "staff.request",
            Self::RoleRevoke => "role.revoke",
            Self::OrganizationRevision => "organization.revision",
            Self::OrganizationSet => "organization.set",
            Self::NameSet => "name.set",
            Self::ReviewRequest => "review.request",
            Self::ReviewVerdict => "review.verdict",
            Self::TaskClose => "task.close",
            Self::SpecRead => "spec.read",
            Self::RecordWrite => "record.write",
            Self::DecisionRaise => "decision.raise",
        }
    }
}

/// A verb goes on the broker's wire as its name (`message.read`).
impl serde::Serialize for Verb {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The schema of a verb on the wire: one of the names [`Verb::ALL`] lists.
impl schemars::JsonSchema for Verb {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Verb".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = Self::ALL.iter().map(|verb| verb.as_str()).collect();
        schemars::json_schema!({
            "description": "A verb of the broker protocol (docs/protocol.md).",
            "type": "string",
            "enum": names,
        })
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request line on the host's git socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GitOp {
    /// push_working.
    Push,
    /// fetch_review.
    Fetch,
    /// land_work.
    Land,
}

impl GitOp {
    /// Returns the operation's verb name (`working.push`, `working.fetch`, `working.land`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "working.push",
            Self::Fetch => "working.fetch",
            Self::Land => "working.land",
        }
    }
}

/// Where a tool call goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// To the broker, as this verb.
    Broker(Verb),
    /// To the host's launch socket.
    Launch,
    /// To the host's git socket, through the runner's git tools.
    Git(GitOp),
}

impl Route {
    /// Returns `broker`, `launch` or `git`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Broker(_) => "broker",
            Self::Launch => "launch",
            Self::Git(_) => "git",
        }
    }

    /// Returns the verb the call goes as (`tasks`, `launch`, `working.push`, …).
    pub fn verb(self) -> &'static str {
        match self {
            Self::Broker(verb) => verb.as_str(),
            Self::Launch => "launch",
            Self::Git(op) => op.as_str(),
        }
    }
}

/// What a resolved instance must hold to be offered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Every session: the reads and raise_decision.
    Everyone,
    /// A session whose instance names a tracker ("tracker holders").
    Tracker,
    /// A session holding this action, within-role or cross-role.
    Action(&'static str),
    /// A session holding this action that also has at least one clone.
    ActionWithClone(&'static str),
    /// A session holding this action whose definition is this one (request_staff: the pm's).
    ActionForDefinition {
        /// The action.
        action: &'static str,
        /// The role definition.
        definition: &'static str,
    },
    /// A session the broker's landHeld says holds an approved merge decision
    /// (action `git.merge.protected`), with or without a clone.
    LandHeld,
}

impl Grant {
    /// Returns the action that grants the tool, if an action does.
    pub fn action(self) -> Option<&'static str> {
        match self {
            Self::Everyone | Self::Tracker => None,
            Self::Action(action)
            | Self::ActionWithClone(action)
            | Self::ActionForDefinition { action, .. } => Some(action),
            Self::LandHeld => Some("git.merge.protected"),
        }
    }
}

/// What the model is told of a broker verb's result: the result as it is, but for
/// `organization.revision`, which the spec answers with `{revision}` alone. An error names what
/// the broker's result lacks.
pub fn shape_result(verb: Verb, result: serde_json::Value) -> Result<serde_json::Value, String> {
    match verb {
        Verb::OrganizationRevision => match result.get("revision") {
            Some(revision) if revision.is_string() || revision.is_i64() || revision.is_u64() => {
                Ok(serde_json::json!({"revision": revision}))
            }
            _ => Err("the broker's organization.revision result holds no revision".to_owned()),
        },
        _ => Ok(result),
    }
}

/// The type and bounds of one argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A string of `min..=max` characters, counted as JavaScript's `length` counts them (UTF-16
    /// code units), as the spec's bounds are.
    Str {
        /// Fewest characters.
        min: usize,
        /// Most characters.
        max: usize,
    },
    /// An integer in `min..=max`.
    Int {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// `true` or `false`.
    Bool,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// A revision as the broker returns it: a string or an integer.
    Revision,
    /// Any JSON object; the broker checks its inside.
    Object,
    /// A list of `min..=max` items of one kind.
    List {
        /// The kind of every item.
        item: &'static Kind,
        /// Fewest items.
        min: usize,
        /// Most items.
        max: usize,
    },
    /// An object with exactly these fields.
    Record(&'static [Param]),
    /// `null` or the inner kind.
    Nullable(&'static Kind),
}

/// One named argument of a tool.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Param {
    /// The argument's name.
    pub name: &'static str,
    /// Its type and bounds.
    pub kind: Kind,
    /// True if and only if the call must carry it.
    pub required: bool,
    /// What the model reads about it.
    pub description: &'static str,
}

/// Extra checks on a call's arguments, after the parameters' own.
pub(crate) type Check = fn(&Map<String, Value>) -> Result<(), ArgError>;
/// Defaults the tool sends when the caller leaves them out.
pub(crate) type Fill = fn(&mut Map<String, Value>);

/// One typed tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolDef {
    /// The tool's name (Claude Code shows it as `mcp__mosaic__NAME`).
    pub name: &'static str,
    /// The description the model reads.
    pub description: &'static str,
    /// The arguments.
    pub params: &'static [Param],
    /// What grants it.
    pub grant: Grant,
    /// Where a call goes.
    pub route: Route,
    pub(crate) check: Option<Check>,
    pub(crate) fill: Option<Fill>,
}

impl ToolDef {
    /// Returns the JSON Schema of the tool's input: an object with exactly its parameters.
    pub fn input_schema(&self) -> Value {
        record_schema(self.params)
    }
}

const fn p(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param { name, kind, required: true, description }
}

const fn opt(name: &'static str, kind: Kind, description: &'static str) -> Param {
    Param { name, kind, required: false, description }
}

const fn text(max: usize) -> Kind {
    Kind::Str { min: 1, max }
}

const NAME: Kind = text(200);
const TASK_REF: Param = p("task_ref", NAME, "The task's reference, as list_tasks returns it.");
const PROJECT: Param = p("project", NAME, "The project's name.");

const STAFF_ENTRY: Kind = Kind::Record(&[
    p("role", NAME, "The role to staff."),
    p("count", Kind::Int { min: 1, max: 20 }, "How many sessions of it, 1 to 20."),
]);
const ASSISTANT: Kind = Kind::Record(&[
    p("instance", NAME, "The assistant instance."),
    p("vars", Kind::Object, "The instance's vars."),
    p("tracker", Kind::Nullable(&NAME), "The tracker it uses, or null for none."),
    p("definition", Kind::Enum(&[THREAD_DEFINITION]), "The thread definition."),
]);

/// Every typed tool the spec names.
pub const CATALOGUE: &[ToolDef] = &[
    ToolDef {
        name: "list_tasks",
        description: "Lists the tracker's tasks, open ones unless you pass done, 50 at a time, \
            without descriptions (get_task has those). Filters: done, assignee, label, \
            requirement; page with limit and after.",
        params: &[
            opt("done", Kind::Bool, "true for closed tasks; open ones when left out."),
            opt("assignee", NAME, "Only tasks assigned to this role or instance."),
            opt("label", NAME, "Only tasks with this label."),
            opt("requirement", NAME, "Only tasks under this requirement."),
            opt("limit", Kind::Int { min: 1, max: 50 }, "At most this many, 1 to 50 (50)."),
            opt("after", NAME, "The last task_ref of the previous page."),
        ],
        grant: Grant::Tracker,
        route: Route::Broker(Verb::Tasks),
        check: None,
        fill: Some(fill_list_tasks),
    },
    ToolDef {
        name: "get_task",
        description: "Returns one task in full, description included.",
        params: &[TASK_REF],
        grant: Grant::Tracker,
        route: Route::Broker(Verb::TaskGet),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "request_staff",
        description: "Asks the chief of staff for role sessions for a task: 1 to 10 entries of \
            role and count (1 to 20 each), with an optional note.",
        params: &[
            TASK_REF,
            p("roles", Kind::List { item: &STAFF_ENTRY, min: 1, max: 10 }, "1 to 10 entries."),
            opt("note", text(2000), "A note for the chief of staff."),
        ],
        grant: Grant::ActionForDefinition { action: "message.send", definition: "pm" },
        route: Route::Broker(Verb::StaffRequest),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "end_run",
        description: "Ends the run of another role: sends role.revoke with the role and a reason \
            of 1 to 500 characters, never a decision. The broker refuses your own run with \
            role-end-refused. The chief of staff may end the assistant: that revokes every \
            assistant thread run.",
        params: &[
            p("role", NAME, "The role whose run ends."),
            p("reason", Kind::Str { min: 1, max: 500 }, "Why, 1 to 500 characters."),
        ],
        grant: Grant::Action("role.end"),
        route: Route::Broker(Verb::RoleRevoke),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "organization_revision",
        description: "Returns {revision}: the organization's current revision, the value \
            change_organization must send. A read; it never spends the grant.",
        params: &[],
        grant: Grant::Action("organization.change"),
        route: Route::Broker(Verb::OrganizationRevision),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "change_organization",
        description: "Changes the organization: sends organization.set with the revision and any \
            of limits, models, instances and assistants. Call organization_revision first for \
            the revision; the broker refuses a stale one with revision-conflict.",
        params: &[
            p("revision", Kind::Revision, "The revision organization_revision returned."),
            opt("limits", Kind::Object, "The organization's limits."),
            opt("models", Kind::Object, "The launch models."),
            opt("instances", Kind::Object, "The role instances."),
            opt(
                "assistants",
                Kind::List { item: &ASSISTANT, min: 0, max: 100 },
                "The assistant thread instances.",
            ),
        ],
        grant: Grant::Action("organization.change"),
        route: Route::Broker(Verb::OrganizationSet),
        check: Some(check_change_organization),
        fill: None,
    },
    ToolDef {
        name: "set_name",
        description: "Names an instance: sends name.set. The broker checks the grant and the \
            name, and refuses name-is-instance, name-is-role and name-taken.",
        params: &[p("instance", NAME, "The instance to name."), p("name", NAME, "The new name.")],
        grant: Grant::Action("instance.name"),
        route: Route::Broker(Verb::NameSet),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "push_working",
        description: "Pushes a local branch of one clone to the task's work branch in the \
            business's working repository (a fast-forward of what the task pushed before). \
            Returns {ref, commit, previous}.",
        params: &[
            TASK_REF,
            PROJECT,
            p("branch", NAME, "The local branch of the project's clone to push."),
        ],
        grant: Grant::ActionWithClone("git.push.working"),
        route: Route::Git(GitOp::Push),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "land_work",
        description: "Lands a task's reviewed work on the working repository's main under an \
            approved merge decision. Returns {landing: \"started\", commit, base, reviewed, \
            patch_id}; the outcome comes later as a RESULT from the bus: the landing, or the \
            refusal code. A second land_work while one runs refuses land-busy.",
        params: &[TASK_REF, p("decision", NAME, "The approved merge decision.")],
        grant: Grant::LandHeld,
        route: Route::Git(GitOp::Land),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "request_review",
        description: "Asks a reviewer role to review a commit the task pushed. The broker \
            refuses a commit that is not the task's latest push.",
        params: &[
            TASK_REF,
            p("commit", text(64), "The commit push_working returned."),
            p("reviewer", NAME, "The reviewer role."),
        ],
        grant: Grant::Action("review.request"),
        route: Route::Broker(Verb::ReviewRequest),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "fetch_review",
        description: "Fetches the commit a review request names into the clone of its project, \
            as refs/remotes/working/<work ref>. Nothing is merged or checked out.",
        params: &[p("request", NAME, "The review request's id.")],
        grant: Grant::ActionWithClone("review.verdict"),
        route: Route::Git(GitOp::Fetch),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "review_verdict",
        description: "Records a verdict on a review request, approve or changes, one per \
            request. Returns the verdict's id, which task_close cites.",
        params: &[
            p("request", NAME, "The review request's id."),
            p("verdict", Kind::Enum(&["approve", "changes"]), "approve or changes."),
            opt("note", text(4000), "What to change, or why it is approved."),
        ],
        grant: Grant::Action("review.verdict"),
        route: Route::Broker(Verb::ReviewVerdict),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "task_close",
        description: "Closes a task. For a task with pushed work, cite the id of an approve \
            verdict for its latest push.",
        params: &[
            TASK_REF,
            opt("verdict", NAME, "The verdict id review_verdict returned."),
            opt("note", text(2000), "A closing note."),
        ],
        grant: Grant::Action("task.close"),
        route: Route::Broker(Verb::TaskClose),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "launch",
        description: "Launches a session of one of the instances your launch block offers.",
        params: &[
            p("instance", NAME, "The instance to launch."),
            opt("task_ref", NAME, "The task the session is for."),
            opt("message", text(4000), "The first message the session gets."),
        ],
        grant: Grant::Action("role.launch"),
        route: Route::Launch,
        check: None,
        fill: None,
    },
    ToolDef {
        name: "read_spec",
        description: "Returns a project's committed north-star text and its path history, at \
            the confirmed commit unless you name one.",
        params: &[PROJECT, opt("commit", text(64), "The commit to read it at.")],
        grant: Grant::Everyone,
        route: Route::Broker(Verb::SpecRead),
        check: None,
        fill: None,
    },
    ToolDef {
        name: "write_record",
        description: "Commits a validated record under docs/requirements/ of a project, as your \
            bound instance; the broker supplies the author. spec/ is never written.",
        params: &[
            PROJECT,
            p("path", text(300), "The record's path, under docs/requirements/."),
            p("record", text(100_000), "The record's text."),
            opt("decision", NAME, "The decision the record carries out."),
        ],
        grant: Grant::Action("record.write"),
        route: Route::Broker(Verb::RecordWrite),
        check: Some(check_write_record),
        fill: None,
    },
    ToolDef {
        name: "raise_decision",
        description: "Raises a decision for a human. Cite a spec with spec_path and spec_commit \
            together (the confirmed commit read_spec returned, not the repository HEAD) or \
            neither; domain technical or delivery routes it to that arbiter (delivery when left \
            out).",
        params: &[
            p("question", text(2000), "The decision to take."),
            opt("context", text(8000), "What the decider needs to know."),
            opt("project", NAME, "The project it concerns."),
            opt("spec_path", text(300), "The spec file it cites."),
            opt("spec_commit", text(64), "The confirmed commit of that file."),
            opt("domain", Kind::Enum(&["technical", "delivery"]), "technical or delivery."),
        ],
        grant: Grant::Everyone,
        route: Route::Broker(Verb::DecisionRaise),
        check: Some(check_raise_decision),
        fill: None,
    },
];

/// Returns the catalogue row named `name`.
pub fn tool(name: &str) -> Option<&'static ToolDef> {
    CATALOGUE.iter().find(|tool| tool.name == name)
}

fn fill_list_tasks(args: &mut Map<String, Value>) {
    args.entry("done").or_insert(Value::Bool(false));
    args.entry("limit").or_insert(json!(50));
    args.insert("descriptions".to_owned(), Value::Bool(false));
}

fn check_change_organization(args: &Map<String, Value>) -> Result<(), ArgError> {
    if ORGANIZATION_KEYS.iter().any(|key| args.contains_key(*key)) {
        Ok(())
    } else {
        Err(ArgError::Rule(format!(
            "change_organization needs at least one of {}",
            ORGANIZATION_KEYS.join(", ")
        )))
    }
}

fn check_write_record(args: &Map<String, Value>) -> Result<(), ArgError> {
    let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
    let parts: Vec<&str> = path.split('/').collect();
    if path.starts_with('/') || parts.iter().any(|part| matches!(*part, "" | "." | "..")) {
        return Err(ArgError::Rule(format!("path {path:?} must be relative and plain")));
    }
    if parts.first() == Some(&"spec") {
        return Err(ArgError::Rule("spec/ is never written through write_record".to_owned()));
    }
    if !path.starts_with("docs/requirements/") {
        return Err(ArgError::Rule(format!("path {path:?} must be under docs/requirements/")));
    }
    Ok(())
}

fn check_raise_decision(args: &Map<String, Value>) -> Result<(), ArgError> {
    match (args.contains_key("spec_path"), args.contains_key("spec_commit")) {
        (true, false) | (false, true) => Err(ArgError::Rule(
            "spec_path and spec_commit go together: cite both or neither".to_owned(),
        )),
        _ => Ok(()),
    }
}

fn record_schema(params: &[Param]) -> Value {
    let properties: Map<String, Value> =
        params.iter().map(|param| (param.name.to_owned(), param_schema(param))).collect();
    let required: Vec<&str> =
        params.iter().filter(|param| param.required).map(|param| param.name).collect();
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema["additionalProperties"] = Value::Bool(false);
    schema
}

fn param_schema(param: &Param) -> Value {
    let mut schema = kind_schema(&param.kind);
    schema["description"] = Value::String(param.description.to_owned());
    schema
}

fn kind_schema(kind: &Kind) -> Value {
    match kind {
        Kind::Str { min, max } => json!({"type": "string", "minLength": min, "maxLength": max}),
        Kind::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Enum(values) => json!({"type": "string", "enum": values}),
        Kind::Revision => json!({"type": ["string", "integer"]}),
        Kind::Object => json!({"type": "object"}),
        Kind::List { item, min, max } => {
            json!({"type": "array", "items": kind_schema(item), "minItems": min, "maxItems": max})
        }
        Kind::Record(params) => record_schema(params),
        Kind::Nullable(inner) => {
            let mut schema = kind_schema(inner);
            let inner_type = schema["type"].clone();
            schema["type"] = json!([inner_type, "null"]);
            schema
        }
    }
}
