//! Where the binaries and assets a bundle points at are installed.

use std::path::{Path, PathBuf};

/// The install layout (`cargo xtask dist --prefix PREFIX`):
///
/// ```text
/// PREFIX/bin/harness-gate, harness-mcp, harness-unslop, harness-runner, harness
/// PREFIX/share/harness/pi/extension.mjs          the Pi extension: gate, typed tools, turn marker
/// PREFIX/share/harness/pi/unslop-extension.mjs   Pi's second extension: the unslop check
/// PREFIX/share/harness/adapters/pi.sh, claude-code.sh
/// PREFIX/share/harness/unslop/lists.json
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallLayout {
    /// `harness-gate`.
    pub gate: PathBuf,
    /// `harness-mcp`.
    pub mcp: PathBuf,
    /// `harness-unslop`.
    pub unslop: PathBuf,
    /// The Pi extension: the gate on every tool call, the typed tools, the turn marker.
    pub pi_extension: PathBuf,
    /// Pi's unslop extension.
    pub pi_unslop_extension: PathBuf,
    /// The directory holding `pi.sh` and `claude-code.sh`.
    pub adapters: PathBuf,
    /// The unslop check's lists.json.
    pub unslop_lists: PathBuf,
}

impl InstallLayout {
    /// The layout under an install prefix.
    pub fn under(prefix: &Path) -> Self {
        let share = prefix.join("share/harness");
        Self {
            gate: prefix.join("bin/harness-gate"),
            mcp: prefix.join("bin/harness-mcp"),
            unslop: prefix.join("bin/harness-unslop"),
            pi_extension: share.join("pi/extension.mjs"),
            pi_unslop_extension: share.join("pi/unslop-extension.mjs"),
            adapters: share.join("adapters"),
            unslop_lists: share.join("unslop/lists.json"),
        }
    }

    /// Every path of the layout with its request field name (`install.gate`, ...), in a fixed
    /// order: for the checks that go over all of them.
    pub fn paths(&self) -> [(&'static str, &Path); 7] {
        [
            ("install.gate", &self.gate),
            ("install.mcp", &self.mcp),
            ("install.unslop", &self.unslop),
            ("install.piExtension", &self.pi_extension),
            ("install.piUnslopExtension", &self.pi_unslop_extension),
            ("install.adapters", &self.adapters),
            ("install.unslopLists", &self.unslop_lists),
        ]
    }

    /// The layout of a workspace checkout: binaries from `bin_dir` (`target/debug`), assets from
    /// the sources. For tests and the demo, which run without `cargo xtask dist`.
    pub fn from_checkout(workspace: &Path, bin_dir: &Path) -> Self {
        let assets = workspace.join("crates/harness-adapters/assets");
        Self {
            gate: bin_dir.join("harness-gate"),
            mcp: bin_dir.join("harness-mcp"),
            unslop: bin_dir.join("harness-unslop"),
            pi_extension: assets.join("pi/extension.mjs"),
            pi_unslop_extension: assets.join("pi/unslop-extension.mjs"),
            adapters: assets.join("adapters"),
            unslop_lists: workspace.join("crates/harness-unslop/assets/lists.json"),
        }
    }
}
