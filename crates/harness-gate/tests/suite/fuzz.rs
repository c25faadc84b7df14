//! The bounded slice of `cargo xtask fuzz`: the same generator and oracle
//! (`harness_gate::fuzz`), 20,000 calls on 20 trees, with a fixed seed so that it is the same
//! slice on every run. The million-call run is `cargo xtask fuzz` (docs/gate.md, "Fuzzing").

use harness_gate::fuzz::{self, FuzzConfig, Report};

/// The slice's seed; `cargo xtask fuzz --seed 8 --calls 20000` replays it.
const SEED: u64 = 8;
const CALLS: u64 = 20_000;

fn slice(seed: u64, calls: u64) -> Report {
    let scratch = tempfile::tempdir().unwrap();
    let config = FuzzConfig {
        seed,
        calls,
        calls_per_tree: 1000,
        scratch: scratch.path().to_path_buf(),
        threads: 2,
    };
    fuzz::run(&config, &mut |_| {}).unwrap()
}

#[test]
fn no_allowed_call_escapes_in_twenty_thousand() {
    let report = slice(SEED, CALLS);
    let escapes: Vec<String> = report.escapes.iter().map(ToString::to_string).collect();
    assert!(escapes.is_empty(), "{report}\n{}", escapes.join("\n\n"));
    assert_eq!(report.calls, CALLS, "{report}");
    // A gate that blocked everything would pass the property: the slice must also allow a fair
    // share of calls that open paths, and see every kind of block the generator aims at.
    assert!(report.allowed_with_opens * 5 > report.calls, "too few allowed calls:\n{report}");
    for rule in [
        "outside-workspace",
        "dangling-symlink",
        "symlink-loop",
        "bad-path",
        "bad-pattern",
        "climbs-out-of-absent",
        "through-proc",
        "tool-not-allowed",
        "git-metadata",
    ] {
        assert!(report.blocked.get(rule).is_some_and(|count| *count > 0), "no {rule}:\n{report}");
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let first = slice(81, 2000);
    let second = slice(81, 2000);
    assert_eq!(first.to_string(), second.to_string());
}
