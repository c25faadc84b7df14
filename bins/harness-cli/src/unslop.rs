//! `harness unslop ...`.

use std::path::Path;

use crate::Failure;

/// Runs `harness unslop ARGS`.
pub(crate) fn run(args: &[&str]) -> Result<(), Failure> {
    match args {
        ["counts", log] => {
            let counts = harness_unslop::unslop_counts(Path::new(log))
                .map_err(|error| Failure::Failed(chain(&error)))?;
            let text = serde_json::to_string_pretty(&counts)
                .map_err(|error| Failure::Failed(error.to_string()))?;
            println!("{text}");
            Ok(())
        }
        _ => Err(Failure::Usage(format!("unknown command line `unslop {}`", args.join(" ")))),
    }
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
