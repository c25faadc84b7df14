//! Pi 0.85.1.

use camino::Utf8PathBuf;

use harness_contract::Harness;

use crate::{Asset, HarnessModule, InstallLayout, ModuleContext, S0Line};

/// The Pi module: built-in tools as `limits.tools` names them, typed tools under their own
/// names, no files of its own in the bundle (its extensions come from the install layout by `-e`).
#[derive(Debug, Clone, Copy)]
pub struct Pi;

impl HarnessModule for Pi {
    fn name(&self) -> &'static str {
        Harness::Pi.name()
    }

    fn version(&self) -> &'static str {
        "pi 0.85.1"
    }

    fn cli_version(&self) -> &'static str {
        "0.85.1"
    }

    fn cli_package(&self) -> &'static str {
        "@earendil-works/pi-coding-agent"
    }

    fn printed_version(&self, package_version: &str) -> String {
        package_version.to_owned()
    }

    fn builtin_tools(&self, limits: &[String]) -> Vec<String> {
        // harness-contract's table, the one the gate checks paths from: a limit that names no Pi
        // tool grants nothing (the gate would block it).
        harness_contract::granted(Harness::Pi, limits).into_iter().map(str::to_owned).collect()
    }

    fn typed_tool_name(&self, typed: &str) -> String {
        harness_contract::typed_tool_name(Harness::Pi, typed)
    }

    fn cli_tools(&self, builtin: &[String], typed: &[String]) -> Vec<String> {
        // Pi's --tools is an allowlist: the extension's tools must be named too (docs/clis.md).
        builtin.iter().chain(typed).cloned().collect()
    }

    fn turn_marker(&self) -> bool {
        true
    }

    fn files(
        &self,
        _cx: &ModuleContext<'_>,
    ) -> Result<Vec<(&'static str, Vec<u8>)>, serde_json::Error> {
        Ok(Vec::new())
    }

    fn relies_on(&self) -> [S0Line; 5] {
        S0Line::five([
            "tool_call handler returns a block",
            "a throw in the handler blocks",
            "a missing -e file refuses to start",
            "the runner's wall clock plus the agent_end marker",
            "limited only by the tool limit",
        ])
    }

    fn assets(&self, layout: &InstallLayout) -> Vec<Asset> {
        vec![
            Asset { role: "gate", path: layout.gate.clone() },
            Asset { role: "extension", path: layout.pi_extension.clone() },
            Asset { role: "unslopExtension", path: layout.pi_unslop_extension.clone() },
            Asset { role: "unslopBin", path: layout.unslop.clone() },
            Asset { role: "unslopLists", path: layout.unslop_lists.clone() },
        ]
    }

    fn adapter(&self, layout: &InstallLayout) -> Utf8PathBuf {
        layout.adapters.join("pi.sh")
    }
}
