//! Where the binaries and assets a bundle points at are installed.

use camino::{Utf8Path, Utf8PathBuf};

/// The adapter scripts in the layout's `adapters` directory, one per harness.
const ADAPTER_SCRIPTS: [&str; 2] = ["pi.sh", "claude-code.sh"];

/// Every binary an install holds, as (binary name, the workspace package that builds it), in the
/// order of [`InstallLayout::files`]: the one list every build of the install's binaries (the demo,
/// the canary, `dist`, the benchmarks) is made from, so no build can leave one out.
pub const INSTALL_BINARIES: [(&str, &str); 5] = [
    ("harness-gate", "harness-gate-cli"),
    ("harness-mcp", "harness-mcp-cli"),
    ("harness-unslop", "harness-unslop-cli"),
    ("harness-runner", "harness-runner-cli"),
    ("harness", "harness-cli"),
];

/// The JSON Schemas of the contracts (the files of the checkout's `docs/schemas/`), which an
/// install carries under `PREFIX/share/harness/schemas/` for a host that validates what it
/// writes and reads ([`SchemaFiles`]).
pub const SCHEMA_FILES: [&str; 13] = [
    "broker-reply.json",
    "broker-request.json",
    "bundle-request.json",
    "doctor-check.json",
    "manifest.json",
    "message-read-result.json",
    "policy.json",
    "resolved-instance.json",
    "run.json",
    "state-result.json",
    "tool-reply.json",
    "tool-request.json",
    "tools.json",
];

/// Where the schemas of [`SCHEMA_FILES`] are: an install's `share/harness/schemas`, or a
/// checkout's `docs/schemas`. They are kept apart from [`InstallLayout::files`], which is what a
/// bundle build requires of an install: no session reads a schema, so a missing one is for
/// `harness doctor` to name, not a reason to refuse a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFiles {
    /// The directory holding them.
    pub dir: Utf8PathBuf,
}

impl SchemaFiles {
    /// The schemas of an install prefix.
    pub fn under(prefix: &Utf8Path) -> Self {
        Self { dir: prefix.join("share/harness/schemas") }
    }

    /// The schemas of a workspace checkout, the sources `cargo xtask dist` installs.
    pub fn from_checkout(workspace: &Utf8Path) -> Self {
        Self { dir: workspace.join("docs/schemas") }
    }

    /// Every schema file with the mode it is installed with (0644), in [`SCHEMA_FILES`] order.
    pub fn files(&self) -> Vec<(Utf8PathBuf, u32)> {
        SCHEMA_FILES.iter().map(|name| (self.dir.join(name), 0o644)).collect()
    }
}

/// The install layout (`cargo xtask dist --prefix PREFIX`):
///
/// ```text
/// PREFIX/bin/harness-gate, harness-mcp, harness-unslop, harness-runner, harness
/// PREFIX/share/harness/pi/extension.mjs          the Pi extension: gate, typed tools, turn marker
/// PREFIX/share/harness/pi/unslop-extension.mjs   Pi's second extension: the unslop check
/// PREFIX/share/harness/adapters/pi.sh, claude-code.sh
/// PREFIX/share/harness/unslop/lists.json
/// PREFIX/share/harness/schemas/*.json            the contracts' JSON Schemas (SchemaFiles)
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallLayout {
    /// `harness-gate`.
    pub gate: Utf8PathBuf,
    /// `harness-mcp`.
    pub mcp: Utf8PathBuf,
    /// `harness-unslop`.
    pub unslop: Utf8PathBuf,
    /// `harness-runner`, which the host starts once per session.
    pub runner: Utf8PathBuf,
    /// `harness`, the operator's command (`harness bundle build`, `harness unslop counts`).
    pub harness: Utf8PathBuf,
    /// The Pi extension: the gate on every tool call, the typed tools, the turn marker.
    pub pi_extension: Utf8PathBuf,
    /// Pi's unslop extension.
    pub pi_unslop_extension: Utf8PathBuf,
    /// The directory holding `pi.sh` and `claude-code.sh`.
    pub adapters: Utf8PathBuf,
    /// The unslop check's lists.json.
    pub unslop_lists: Utf8PathBuf,
}

impl InstallLayout {
    /// The layout under an install prefix.
    pub fn under(prefix: &Utf8Path) -> Self {
        let share = prefix.join("share/harness");
        Self::with_binaries(
            &prefix.join("bin"),
            &share.join("pi"),
            share.join("adapters"),
            share.join("unslop/lists.json"),
        )
    }

    /// The binaries of [`INSTALL_BINARIES`] in `bin_dir`, the Pi extensions in `pi`.
    fn with_binaries(
        bin_dir: &Utf8Path,
        pi: &Utf8Path,
        adapters: Utf8PathBuf,
        unslop_lists: Utf8PathBuf,
    ) -> Self {
        let [gate, mcp, unslop, runner, harness] =
            INSTALL_BINARIES.map(|(binary, _)| bin_dir.join(binary));
        Self {
            gate,
            mcp,
            unslop,
            runner,
            harness,
            pi_extension: pi.join("extension.mjs"),
            pi_unslop_extension: pi.join("unslop-extension.mjs"),
            adapters,
            unslop_lists,
        }
    }

    /// The prefix this layout is [`InstallLayout::under`], if it is one (not a checkout's).
    pub fn prefix(&self) -> Option<&Utf8Path> {
        let prefix = self.gate.parent()?.parent()?;
        (Self::under(prefix) == *self).then_some(prefix)
    }

    /// The files of [`InstallLayout::files`] that are not there as regular files (a directory, a
    /// dangling link or nothing at all), in the same order.
    pub fn missing(&self) -> Vec<Utf8PathBuf> {
        let is_file = |path: &Utf8Path| std::fs::metadata(path).is_ok_and(|meta| meta.is_file());
        self.files().into_iter().map(|(path, _)| path).filter(|path| !is_file(path)).collect()
    }

    /// Every path of the layout with its request field name (`install.gate`, ...), in a fixed
    /// order: for the checks that go over all of them.
    pub fn paths(&self) -> [(&'static str, &Utf8Path); 9] {
        [
            ("install.gate", &self.gate),
            ("install.mcp", &self.mcp),
            ("install.unslop", &self.unslop),
            ("install.runner", &self.runner),
            ("install.harness", &self.harness),
            ("install.piExtension", &self.pi_extension),
            ("install.piUnslopExtension", &self.pi_unslop_extension),
            ("install.adapters", &self.adapters),
            ("install.unslopLists", &self.unslop_lists),
        ]
    }

    /// Every file an install holds, with the mode it is installed with (binaries 0755, assets
    /// 0644): what `cargo xtask dist` copies, so nothing of the layout can be left out.
    pub fn files(&self) -> Vec<(Utf8PathBuf, u32)> {
        // Destructured without `..`: a new field does not compile until it is listed here.
        let Self {
            gate,
            mcp,
            unslop,
            runner,
            harness,
            pi_extension,
            pi_unslop_extension,
            adapters,
            unslop_lists,
        } = self;
        let mut files: Vec<(Utf8PathBuf, u32)> =
            [gate, mcp, unslop, runner, harness].map(|binary| (binary.clone(), 0o755)).into();
        files.extend(
            [pi_extension, pi_unslop_extension, unslop_lists].map(|asset| (asset.clone(), 0o644)),
        );
        files.extend(ADAPTER_SCRIPTS.map(|script| (adapters.join(script), 0o644)));
        files
    }

    /// The layout of a workspace checkout: binaries from `bin_dir` (`target/debug`), assets from
    /// the sources. For tests and the demo, which run without `cargo xtask dist`.
    pub fn from_checkout(workspace: &Utf8Path, bin_dir: &Utf8Path) -> Self {
        let assets = workspace.join("crates/harness-adapters/assets");
        Self::with_binaries(
            bin_dir,
            &assets.join("pi"),
            assets.join("adapters"),
            workspace.join("crates/harness-unslop/assets/lists.json"),
        )
    }
}
