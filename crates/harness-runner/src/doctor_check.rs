//! One line of `harness doctor --json`: the shape is here, beside the functions doctor checks a
//! run with, so its JSON Schema is generated with the others (docs/schemas/doctor-check.json).

use serde::{Deserialize, Serialize};

/// One check of `harness doctor --json`, printed as one JSON object on one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "harness doctor --json line")]
pub struct DoctorCheck {
    /// What was checked (`install prefix`, `file bin/harness-gate`, `run.json`,
    /// `broker role.claim`, ...): the NAME of the text form's `ok NAME` and `FAIL NAME: reason`.
    pub name: String,
    /// True if and only if the check passed.
    pub ok: bool,
    /// Why the check failed; for a passing check, what doctor did that the operator must know
    /// (that it claimed the role, for one), or null.
    pub reason: Option<String>,
}
