//! The bundle benchmark of `cargo xtask bench`: `build_bundle` with three skills, per build,
//! against its floor measured in the same run (the same files and bytes written with plain
//! `std::fs` calls), by harness-bundle's `build` bench target. Target: at most 1.5× the floor.

use std::path::Path;

use anyhow::{Context as _, Result};

use crate::bench::{Row, write_section};
use crate::process;

const RESULT: &str = "bench-result bundle_build_us=";
const TARGET_RATIO: f64 = 1.5;

pub(crate) fn run(root: &Path) -> Result<Vec<Row>> {
    eprintln!("bench: build_bundle against writing the same bytes ...");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = process::command(cargo);
    cmd.current_dir(root).args(["bench", "--quiet", "-p", "harness-bundle", "--bench", "build"]);
    let output = process::run_captured(&mut cmd, std::time::Duration::from_secs(600))?;
    let (build, floor, ratio) = output
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT))
        .and_then(parse)
        .with_context(|| format!("the build bench printed no result line:\n{}", output.stdout))?;
    let verdict = if ratio <= TARGET_RATIO { "pass" } else { "MISSED" };
    let readable = output.stdout.lines().next().unwrap_or_default();
    let section = format!(
        "## The bundle\n\n\
         Reproduce with `cargo xtask bench` (or `cargo bench -p harness-bundle --bench build` alone).\n\
         {readable}\n\n\
         | benchmark | median | floor | ratio | target | result |\n\
         | --- | ---: | ---: | ---: | --- | --- |\n\
         | `build_bundle`, the pm fixture with three skills | {build:.1} µs | {floor:.1} µs | {ratio:.2}× | ≤ {TARGET_RATIO}× | {verdict} |\n\n\
         Each round builds one bundle (skills read with `O_NOFOLLOW`, copies, prompt, policy, tools, manifest with every digest, \
         the temporary sibling renamed into place) and, taking turns going first, writes the same files with the same bytes \
         with `std::fs::create_dir_all` and `std::fs::write`: the floor. 300 rounds after 20 warm-up; the ratio is the median over the rounds of each round's build over its own floor (the two measured back to back, so a load that comes and goes on a shared machine moves both alike); the times are medians. \
         The install's asset digests are cached by file identity (device, inode, size, times), as a host building many \
         bundles from one install would; the first build of a process hashes them. \
         The ratio depends on the file system of the temporary directory: the floor is mostly the cost of creating files. \
         On a tmpfs (`TMPDIR=/dev/shm`), where creating a file costs little, the build's own work (reading the skills, \
         serializing, hashing, resolving the workspace) weighs more and the ratio is well above the target.\n"
    );
    eprintln!(
        "bench: build_bundle {build:.1} µs, floor {floor:.1} µs, ratio {ratio:.2} ({verdict})"
    );
    write_section(&root.join("docs/performance.md"), "bundle", &section)?;
    Ok(vec![Row::new(
        "bundle",
        "build_bundle, three skills",
        format!("{build:.1} µs"),
        format!("the same bytes with std::fs {floor:.1} µs"),
        format!("{ratio:.2}×"),
        format!("≤ {TARGET_RATIO}×"),
        ratio <= TARGET_RATIO,
    )])
}

/// `B floor_us=F ratio=R`: the medians of the build and the floor, and the median of the rounds'
/// ratios (each round's build over its own floor).
fn parse(rest: &str) -> Option<(f64, f64, f64)> {
    let (build, rest) = rest.split_once(" floor_us=")?;
    let (floor, ratio) = rest.split_once(" ratio=")?;
    Some((build.trim().parse().ok()?, floor.trim().parse().ok()?, ratio.trim().parse().ok()?))
}
