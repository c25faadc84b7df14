//! `harness unslop ...`.

use std::path::Path;

use crate::Failure;

/// `harness unslop counts LOG`: the counts as pretty JSON on stdout.
pub(crate) fn counts(log: &Path) -> Result<(), Failure> {
    let counts =
        harness_unslop::unslop_counts(log).map_err(|error| Failure::Failed(chain(&error)))?;
    let text = serde_json::to_string_pretty(&counts)
        .map_err(|error| Failure::Failed(error.to_string()))?;
    println!("{text}");
    Ok(())
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
