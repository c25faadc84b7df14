//! `cargo xtask bench`: runs every benchmark of the workspace and writes the one summary table.
//!
//! Each benchmark is a bench target of the crate it measures: in-process micro-benchmarks on
//! criterion, process-level ones as small bench binaries that time the release binaries against a
//! floor measured in the same run and print a Markdown report and one machine-readable line,
//! `bench-result KEY=VALUE ...`. This module only builds them, runs them one after another, reads
//! those lines (and criterion's estimates), judges each figure against its target in [`BENCHES`],
//! and writes `docs/performance.md`: the summary, then each bench's report between its markers.
//!
//! A missed target is printed as MISSED but does not fail the command: the machine is shared and
//! noisy, and the numbers are recorded as measured. A benchmark that cannot measure (a gate that
//! decides wrongly, a lost tool call, a runner left behind) fails it.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context as _, Result, bail, ensure};
use harness_benchkit::RUNS_ENV;

use crate::cargo::Cargo;
use crate::process;

const USAGE: &str =
    "usage: cargo xtask bench [--runs N] [--only gate|bundle|runner|unslop|tools|load]";
const DOC: &str = "docs/performance.md";
const DOC_HEADER: &str = "\
# Performance

Written by `cargo xtask bench` (`--only SECTION` rewrites one section's blocks): the summary of
the last full run, then each benchmark's own report between its `<!-- bench:NAME:start -->` and
`<!-- bench:NAME:end -->` markers. Rerun the command rather than editing inside them. Every
figure is a median compared with a floor measured in the same run; a target missed on this shared,
noisy machine is recorded as MISSED, not hidden.
";

/// How a figure is shown.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Ms,
    Us,
    /// KiB, shown in MiB.
    Kib,
}

impl Unit {
    fn show(self, value: f64) -> String {
        match self {
            Self::Ms => format!("{value:.3} ms"),
            Self::Us => format!("{value:.1} µs"),
            Self::Kib => format!("{:.2} MiB", value / 1024.0),
        }
    }
}

/// What a row must meet.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// The figure over its reference, at most.
    Ratio(f64),
    /// The figure itself, at most (in its unit).
    Max(f64),
    /// The figure minus its reference, at most (in its unit).
    Added(f64),
    /// Another figure of the same line (what, key, unit), at most.
    Other(&'static str, &'static str, Unit, f64),
    /// Another figure of the same line, a count that must be 0.
    Zero(&'static str),
}

/// One row of the summary: a figure of a bench's result line and its target.
#[derive(Debug)]
struct Spec {
    label: &'static str,
    key: &'static str,
    unit: Unit,
    /// What it is compared with, and that figure's key (same unit).
    reference: Option<(&'static str, &'static str)>,
    goal: Goal,
}

/// A bench target, the section of `--only` it belongs to, and its rows.
#[derive(Debug)]
struct Bench {
    section: &'static str,
    title: &'static str,
    package: &'static str,
    name: &'static str,
    /// For a criterion bench: the benchmark id whose median becomes the figure `key` in µs.
    criterion: Option<(&'static str, &'static str)>,
    rows: &'static [Spec],
}

const fn spec(
    label: &'static str,
    key: &'static str,
    unit: Unit,
    reference: Option<(&'static str, &'static str)>,
    goal: Goal,
) -> Spec {
    Spec { label, key, unit, reference, goal }
}

/// Every benchmark, in the order a full run measures them, with its targets.
const BENCHES: &[Bench] = &[
    Bench {
        section: "gate",
        title: "The gate: the PreToolUse hook per tool call",
        package: "harness-gate-cli",
        name: "hook",
        criterion: None,
        rows: &[
            spec(
                "the PreToolUse hook as settings.json runs it",
                "hook_ms",
                Unit::Ms,
                Some(("the same command with `/bin/true` as GATE", "floor_ms")),
                Goal::Ratio(1.3),
            ),
            spec(
                "peak RSS of the gate",
                "rss_kib",
                Unit::Kib,
                Some(("the floor", "floor_rss_kib")),
                Goal::Max(3.0 * 1024.0),
            ),
        ],
    },
    Bench {
        section: "gate",
        title: "The gate: decide() in process",
        package: "harness-gate",
        name: "decide",
        criterion: Some(("decide/read_inside", "decide_us")),
        rows: &[spec("decide() in process, a Read", "decide_us", Unit::Us, None, Goal::Max(20.0))],
    },
    Bench {
        section: "bundle",
        title: "The bundle",
        package: "harness-bundle",
        name: "build",
        criterion: None,
        rows: &[spec(
            "build_bundle, three skills",
            "bundle_build_us",
            Unit::Us,
            Some(("the same bytes with std::fs", "floor_us")),
            Goal::Ratio(1.5),
        )],
    },
    Bench {
        section: "runner",
        title: "The runner",
        package: "harness-runner-cli",
        name: "runner",
        criterion: None,
        rows: &[
            spec("idle RSS", "idle_rss_kib", Unit::Kib, None, Goal::Max(4.0 * 1024.0)),
            spec(
                "a typed tool call through tools.sock",
                "through_us",
                Unit::Us,
                Some(("the broker straight", "direct_us")),
                Goal::Added(200.0),
            ),
            spec(
                "100 runners started and stopped, each",
                "cycle_ms",
                Unit::Ms,
                None,
                Goal::Zero("leftovers"),
            ),
        ],
    },
    Bench {
        section: "unslop",
        title: "The unslop check",
        package: "harness-unslop-cli",
        name: "stop_hook",
        criterion: None,
        rows: &[spec(
            "the Stop hook on a 32 KiB flagged reply",
            "flagged_ms",
            Unit::Ms,
            Some(("`sh -c 'exec /bin/true < payload'`", "floor_ms")),
            Goal::Ratio(2.0),
        )],
    },
    Bench {
        section: "tools",
        title: "The typed tools: harness-mcp",
        package: "harness-mcp-cli",
        name: "start",
        criterion: None,
        rows: &[
            spec(
                "harness-mcp, spawn to the tools/list reply",
                "start_ms",
                Unit::Ms,
                Some(("`/bin/cat` echoing the handshake", "floor_ms")),
                Goal::Max(10.0),
            ),
            spec("peak RSS of harness-mcp", "rss_kib", Unit::Kib, None, Goal::Max(8.0 * 1024.0)),
        ],
    },
    Bench {
        section: "tools",
        title: "The typed tools: the tool socket",
        package: "harness-bus",
        name: "round_trip",
        criterion: None,
        rows: &[
            spec(
                "tool-socket round trip",
                "round_trip_us",
                Unit::Us,
                Some(("the broker straight", "direct_us")),
                Goal::Max(200.0),
            ),
            spec(
                "64 concurrent clients × 50 calls",
                "wall_ms",
                Unit::Ms,
                None,
                Goal::Zero("errors"),
            ),
        ],
    },
    Bench {
        section: "load",
        title: "Load",
        package: "harness-runner-cli",
        name: "load",
        criterion: None,
        rows: &[
            spec(
                "64 concurrent tool calls through one runner",
                "burst_ms",
                Unit::Ms,
                Some(("the same 64 in a row", "row_ms")),
                Goal::Ratio(1.0),
            ),
            spec(
                "10000 sequential tool calls, each",
                "sequential_us",
                Unit::Us,
                None,
                Goal::Other("VmRSS growth", "growth_kib", Unit::Kib, 512.0),
            ),
            spec(
                "50 runners live at once, until all poll",
                "all_polling_ms",
                Unit::Ms,
                None,
                Goal::Zero("leftovers"),
            ),
        ],
    },
];

/// The packages whose binaries the runner benches find beside harness-runner.
const SIBLINGS: [&str; 3] = ["harness-gate-cli", "harness-mcp-cli", "harness-unslop-cli"];

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
            "--only" if BENCHES.iter().any(|bench| bench.section == *value) => only = Some(*value),
            _ => bail!("unknown arguments `{}`\n{USAGE}", args.join(" ")),
        }
        rest = tail;
    }
    ensure!(rest.is_empty(), "unknown arguments `{}`\n{USAGE}", args.join(" "));
    let benches: Vec<&Bench> =
        BENCHES.iter().filter(|bench| only.is_none_or(|only| only == bench.section)).collect();

    let cargo = Cargo::locate(root)?;
    eprintln!("bench: building the bench targets and the release binaries they measure ...");
    let mut build = cargo.command(&["bench", "--no-run"]);
    for package in benches.iter().map(|bench| bench.package).chain(SIBLINGS) {
        build.args(["-p", package]);
    }
    process::run_visible(&mut build)?;

    let criterion = tempfile::Builder::new().prefix("harness-criterion-").tempdir()?;
    let mut rows = Vec::new();
    let mut sections = Vec::new();
    for bench in benches {
        eprintln!(
            "bench: {} (`cargo bench -p {} --bench {}`) ...",
            bench.title, bench.package, bench.name
        );
        let load_before = load_average();
        let mut cmd =
            cargo.command(&["bench", "--quiet", "-p", bench.package, "--bench", bench.name]);
        cmd.env("CRITERION_HOME", criterion.path());
        if let Some(runs) = runs {
            cmd.env(RUNS_ENV, runs);
        }
        let stdout = process::stdout_of(&mut cmd)?;
        let (mut figures, report) = parse(&stdout);
        if let Some((id, key)) = bench.criterion {
            figures.insert(key.to_owned(), criterion_median_us(&criterion.path().join(id))?);
        }
        for spec in bench.rows {
            rows.push(Row::judge(bench, spec, &figures).with_context(|| {
                format!("`{}` printed no usable result line:\n{stdout}", process::display(&cmd))
            })?);
        }
        let report =
            if bench.criterion.is_some() { format!("```text\n{report}\n```") } else { report };
        sections.push((bench.name, format!(
            "## {}\n\nReproduce with `cargo xtask bench --only {}` or `cargo bench -p {} --bench {}`.\n\
             Measured {} on {}; the load average was {load_before} before and {} after.\n\n{}\n",
            bench.title, bench.section, bench.package, bench.name, utc_now(), machine(),
            load_average(), report.trim_end(),
        )));
    }

    let table = summary(&rows);
    println!("{table}");
    let missed: Vec<&str> = rows.iter().filter(|row| !row.met).map(|row| row.bench).collect();
    if missed.is_empty() {
        eprintln!("bench: every target met");
    } else {
        eprintln!("bench: MISSED: {} (recorded as measured; not a failure)", missed.join("; "));
    }
    let path = root.join(DOC);
    let mut doc = if only.is_some() {
        fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?
    } else {
        let mut doc = format!("{DOC_HEADER}\n{}\n", block("summary", ""));
        for (name, _) in &sections {
            doc.push_str(&format!("\n{}\n", block(name, "")));
        }
        doc
    };
    if only.is_none() {
        doc = replace_block(&doc, "summary", &table)?;
    }
    for (name, section) in &sections {
        doc = replace_block(&doc, name, section)?;
    }
    fs::write(&path, doc).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("bench: wrote {DOC}");
    Ok(())
}

/// Splits a bench's stdout into the figures of its `bench-result` line and the rest, its report.
fn parse(stdout: &str) -> (BTreeMap<String, f64>, String) {
    let mut figures = BTreeMap::new();
    let mut report = Vec::new();
    for line in stdout.lines() {
        match line.strip_prefix("bench-result ") {
            Some(rest) => figures.extend(rest.split_whitespace().filter_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                Some((key.to_owned(), value.parse().ok()?))
            })),
            None => report.push(line),
        }
    }
    (figures, report.join("\n"))
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

/// One line of the summary table.
#[derive(Debug)]
struct Row {
    section: &'static str,
    bench: &'static str,
    median: String,
    reference: String,
    ratio: String,
    target: String,
    met: bool,
}

impl Row {
    /// Judges `spec` on `figures`; `None` when a figure it needs is missing.
    fn judge(bench: &Bench, spec: &Spec, figures: &BTreeMap<String, f64>) -> Option<Self> {
        let figure = |key: &str| figures.get(key).copied();
        let value = figure(spec.key)?;
        let reference = match spec.reference {
            Some((what, key)) => Some((what, figure(key)?)),
            None => None,
        };
        let show = |value| spec.unit.show(value);
        let ratio = reference.map(|(_, floor)| value / floor);
        let (ratio_text, target, met) = match spec.goal {
            Goal::Ratio(max) => {
                let ratio = ratio?;
                (format!("{ratio:.2}×"), format!("≤ {max}×"), ratio <= max)
            }
            Goal::Max(max) => (
                ratio.map(|ratio| format!("{ratio:.2}×")).unwrap_or_default(),
                format!("≤ {}", show(max)),
                value <= max,
            ),
            Goal::Added(max) => {
                let added = value - reference?.1;
                (format!("+{}", show(added)), format!("≤ +{}", show(max)), added <= max)
            }
            Goal::Other(what, key, unit, max) => {
                let other = figure(key)?;
                (
                    format!("{what} +{}", unit.show(other)),
                    format!("≤ +{}", unit.show(max)),
                    other <= max,
                )
            }
            Goal::Zero(key) => {
                let count = figure(key)?;
                (format!("{count} {key}"), format!("0 {key}"), count == 0.0)
            }
        };
        Some(Self {
            section: bench.section,
            bench: spec.label,
            median: show(value),
            reference: reference
                .map(|(what, floor)| format!("{what} {}", show(floor)))
                .unwrap_or_default(),
            ratio: ratio_text,
            target,
            met,
        })
    }
}

/// The summary of one run: one table of every benchmark's median, floor, ratio and target.
fn summary(rows: &[Row]) -> String {
    let mut out = String::from(
        "## Summary\n\n\
         The last `cargo xtask bench` run, one row per figure with a target; each section below has \
         the details, p90s and what was measured. Medians; ratios are median over the floor's \
         median measured in the same run.\n\n\
         | section | benchmark | median | floor / reference | ratio | target | result |\n\
         | --- | --- | ---: | --- | ---: | --- | --- |\n",
    );
    for row in rows {
        let verdict = if row.met { "pass" } else { "**MISSED**" };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {verdict} |\n",
            row.section, row.bench, row.median, row.reference, row.ratio, row.target
        ));
    }
    out
}

fn block(name: &str, body: &str) -> String {
    format!("<!-- bench:{name}:start -->\n{body}<!-- bench:{name}:end -->")
}

/// Puts `body` between the markers of block `name` in `doc`, appending the block if it is new.
fn replace_block(doc: &str, name: &str, body: &str) -> Result<String> {
    let (start, end) =
        (format!("<!-- bench:{name}:start -->"), format!("<!-- bench:{name}:end -->"));
    let body = format!("{}\n", body.trim_end());
    Ok(match (doc.find(&start), doc.find(&end)) {
        (Some(from), Some(to)) if from < to => {
            format!("{}{}{}", &doc[..from], block(name, &body), &doc[to + end.len()..])
        }
        (None, None) => format!("{}\n\n{}\n", doc.trim_end(), block(name, &body)),
        _ => bail!("{DOC} has a broken pair of {start} markers"),
    })
}

/// Returns the current UTC date and time as `YYYY-MM-DD HH:MM UTC`.
fn utc_now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string()
}

/// Returns the CPU model, the CPUs this process may use (as `nproc` counts them) and the kernel.
fn machine() -> String {
    let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info
        .lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map_or("an unknown CPU", |(_, name)| name.trim());
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
    fn result_lines_and_reports_are_split() {
        let (figures, report) = parse("| a |\nbench-result hook_ms=1.5 floor_ms=1.0 junk\ntext");
        assert_eq!(figures.get("hook_ms"), Some(&1.5));
        assert_eq!(figures.len(), 2);
        assert_eq!(report, "| a |\ntext");
    }

    #[test]
    fn rows_are_judged_against_their_goals() {
        let figures: BTreeMap<String, f64> =
            [("hook_ms", 1.5), ("floor_ms", 1.0), ("rss_kib", 2048.0), ("floor_rss_kib", 1024.0)]
                .map(|(key, value)| (key.to_owned(), value))
                .into();
        let gate = &BENCHES[0];
        let ratio = Row::judge(gate, &gate.rows[0], &figures).unwrap();
        assert_eq!((ratio.ratio.as_str(), ratio.met), ("1.50×", false));
        let rss = Row::judge(gate, &gate.rows[1], &figures).unwrap();
        assert!(rss.met && rss.median == "2.00 MiB" && rss.reference == "the floor 1.00 MiB");
        let runner = BENCHES.iter().find(|bench| bench.name == "runner").unwrap();
        let added: BTreeMap<String, f64> = [("through_us", 450.0), ("direct_us", 200.0)]
            .map(|(key, value)| (key.to_owned(), value))
            .into();
        let row = Row::judge(runner, &runner.rows[1], &added).unwrap();
        assert_eq!((row.ratio.as_str(), row.met), ("+250.0 µs", false));
        assert!(Row::judge(runner, &runner.rows[2], &added).is_none(), "no cycle_ms figure");
    }

    #[test]
    fn blocks_are_replaced_between_markers_only() {
        let doc = format!("# P\n\n{}\n\n{}\n", block("a", "old\n"), block("b", "kept\n"));
        let doc = replace_block(&doc, "a", "new").unwrap();
        assert!(doc.contains("<!-- bench:a:start -->\nnew\n<!-- bench:a:end -->"), "{doc}");
        assert!(doc.contains("kept") && !doc.contains("old"), "{doc}");
        let doc = replace_block(&doc, "c", "added").unwrap();
        assert!(doc.ends_with("<!-- bench:c:end -->\n"), "{doc}");
        assert!(replace_block("<!-- bench:a:start -->", "a", "x").is_err());
    }

    #[test]
    fn dates_come_out_as_utc_minutes() {
        let now = utc_now();
        assert_eq!(now.len(), "2026-11-30 04:40 UTC".len(), "{now}");
        assert!(now.ends_with(" UTC") && now.starts_with("20"), "{now}");
    }
}
