//! `cargo xtask bench`: runs every benchmark of the workspace and writes the one summary table.
//!
//! Each benchmark is a bench target of the crate it measures: in-process micro-benchmarks on
//! criterion, process-level ones as small bench binaries that time the release binaries against a
//! floor measured in the same run, judge each figure against its target and print a Markdown
//! report and one `bench-row` line per figure (harness-benchkit's [`Row`]). This module only
//! builds them, runs them one after another, collects the rows (judging criterion's `decide`, which
//! prints none, itself), and writes `docs/performance.md`: the summary table, then each bench's
//! report between its markers.
//!
//! A missed target is printed as MISSED but does not fail the command: the machine is shared and
//! noisy, and the numbers are recorded as measured. A bench that cannot measure (a gate that
//! decides wrongly, a lost tool call, a runner left behind) fails it.

use std::fs;
use std::path::Path;

use anyhow::{Context as _, Result, bail, ensure};
use harness_benchkit::{RUNS_ENV, Row, Unit};

use crate::cargo::Cargo;
use crate::process;

const USAGE: &str =
    "usage: cargo xtask bench [--runs N] [--only gate|bundle|runner|git|unslop|tools|load]";
const DOC: &str = "docs/performance.md";
const DOC_HEADER: &str = "\
# Performance

Written by `cargo xtask bench` (`--only SECTION` rewrites that section's blocks only): the summary
of the last full run, then each bench target's own report between its `<!-- bench:NAME:start -->`
and `<!-- bench:NAME:end -->` markers; rerun the command rather than editing inside them. Every
figure is a median compared with a floor measured in the same run; a target missed on this shared,
noisy machine is recorded as MISSED, not hidden.
";

/// Every bench target, in the order a full run measures them: section, package, bench.
const BENCHES: [(&str, &str, &str); 10] = [
    ("gate", "harness-gate-cli", "hook"),
    ("gate", "harness-gate", "decide"),
    ("bundle", "harness-bundle", "build"),
    ("runner", "harness-runner-cli", "runner"),
    ("runner", "harness-runner-cli", "claim"),
    ("git", "harness-runner-cli", "git"),
    ("unslop", "harness-unslop-cli", "stop_hook"),
    ("tools", "harness-mcp-cli", "start"),
    ("tools", "harness-bus", "round_trip"),
    ("load", "harness-runner-cli", "load"),
];

/// Runs `cargo xtask bench ARGS`.
pub(crate) fn run(root: &Path, args: &[&str]) -> Result<()> {
    let (mut runs, mut only) = (None, None);
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--runs" => {
                let n: usize =
                    value.parse().with_context(|| format!("--runs {value:?}\n{USAGE}"))?;
                ensure!(n >= 10, "--runs must be at least 10 for a median and a p90 to mean much");
                runs = Some(*value);
            }
            "--only" if BENCHES.iter().any(|(section, ..)| section == value) => only = Some(*value),
            _ => bail!("unknown arguments `{}`\n{USAGE}", args.join(" ")),
        }
        rest = tail;
    }
    ensure!(rest.is_empty(), "unknown arguments `{}`\n{USAGE}", args.join(" "));
    let benches = BENCHES.iter().filter(|(section, ..)| only.is_none_or(|only| only == *section));

    let cargo = Cargo::locate(root)?;
    eprintln!(
        "bench: building the release binaries; each bench target builds what it measures ..."
    );
    // The install's binaries, built first: the runner's benches find the others beside it.
    cargo.build_install_binaries(true)?;

    let criterion = tempfile::Builder::new().prefix("harness-criterion-").tempdir()?;
    let (mut rows, mut sections) = (Vec::new(), Vec::new());
    for &(section, package, name) in benches {
        eprintln!("bench: `cargo bench -p {package} --bench {name}` ...");
        let load_before = load_average();
        let mut cmd = cargo.command(&["bench", "--quiet", "-p", package, "--bench", name]);
        cmd.env("CRITERION_HOME", criterion.path());
        if let Some(runs) = runs {
            cmd.env(RUNS_ENV, runs);
        }
        let stdout = process::stdout_of(&mut cmd)?;
        let (found, report): (Vec<&str>, Vec<&str>) =
            stdout.lines().partition(|line| Row::parse(line).is_some());
        let (mut found, mut report): (Vec<Row>, _) =
            (found.into_iter().filter_map(Row::parse).collect(), report.join("\n"));
        if name == "decide" {
            // Criterion prints no row: its median estimate is judged here, at most 20 µs.
            let median = criterion_median_us(&criterion.path().join("decide/read_inside"))?;
            let row = ("gate", "decide() in process, a Read");
            found.push(Row::at_most(row, Unit::Us, median, None, 20.0));
            report = format!("```text\n{}\n```", report.trim());
        }
        ensure!(!found.is_empty(), "`{}` printed no `bench-row` line", process::display(&cmd));
        rows.extend(found);
        sections.push((
            name,
            format!(
                "## {section}: `{name}`\n\n\
             Reproduce with `cargo xtask bench --only {section}` or \
             `cargo bench -p {package} --bench {name}`.\n\
             Measured {} on {}; the load average was {load_before} before and {} after.\n\n{}\n",
                jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
                machine(),
                load_average(),
                report.trim(),
            ),
        ));
    }

    let table = format!(
        "## Summary\n\n\
         The last `cargo xtask bench` run, one row per figure with a target; each section below has \
         the details, p90s and what was measured. Medians; ratios are median over the floor's \
         median measured in the same run.\n\n{}",
        Row::table(&rows)
    );
    println!("{table}");
    let missed: Vec<&str> = rows.iter().filter(|row| !row.met).map(|row| &*row.label).collect();
    let missed = if missed.is_empty() { "none".to_owned() } else { missed.join("; ") };
    eprintln!("bench: targets missed: {missed} (recorded as measured, not a failure)");
    let path = root.join(DOC);
    let mut doc = match only {
        Some(_) => {
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?
        }
        None => replace_block(DOC_HEADER, "summary", &table)?,
    };
    for (name, section) in &sections {
        doc = replace_block(&doc, name, section)?;
    }
    fs::write(&path, doc).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("bench: wrote {DOC}");
    Ok(())
}

/// Reads criterion's median estimate, in ns, from `DIR/new/estimates.json`, and returns it in µs.
fn criterion_median_us(dir: &Path) -> Result<f64> {
    let path = dir.join("new/estimates.json");
    let text =
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let estimates: serde_json::Value = serde_json::from_str(&text)?;
    let ns = estimates["median"]["point_estimate"].as_f64();
    Ok(ns.with_context(|| format!("{} has no median", path.display()))? / 1e3)
}

/// Puts `body` between the markers of block `name` in `doc`, appending the block if it is new.
fn replace_block(doc: &str, name: &str, body: &str) -> Result<String> {
    let (start, end) =
        (format!("<!-- bench:{name}:start -->"), format!("<!-- bench:{name}:end -->"));
    let block = format!("{start}\n{}\n{end}", body.trim_end());
    Ok(match (doc.find(&start), doc.find(&end)) {
        (Some(from), Some(to)) if from < to => {
            format!("{}{block}{}", &doc[..from], &doc[to + end.len()..])
        }
        (None, None) => format!("{}\n\n{block}\n", doc.trim_end()),
        _ => bail!("{DOC} has a broken pair of {start} markers"),
    })
}

/// Returns the CPU model, the CPUs this process may use (as `nproc` counts them) and the kernel.
fn machine() -> String {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find(|line| line.starts_with("model name"));
    let model = model.and_then(|line| line.split_once(':')).map_or("?", |(_, name)| name.trim());
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{model}, {cpus} CPUs (`nproc`), Linux {}", kernel.trim())
}

/// Returns the 1-minute load average, or `?` where /proc/loadavg cannot be read.
fn load_average() -> String {
    let text = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_replaced_between_markers_only() {
        let doc = replace_block("# P\n", "a", "old").unwrap();
        let doc = replace_block(&doc, "b", "kept").unwrap();
        let doc = replace_block(&doc, "a", "new\n").unwrap();
        assert!(doc.contains("<!-- bench:a:start -->\nnew\n<!-- bench:a:end -->"), "{doc}");
        assert!(doc.starts_with("# P\n") && doc.contains("kept") && !doc.contains("old"), "{doc}");
        assert!(replace_block("<!-- bench:a:start -->", "a", "x").is_err());
    }
}
