//! Verifying a bundle: every digest the manifest records, recomputed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::BundleError;
use crate::staging::hex_sha256;

/// One difference between a bundle and its manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// A bundle file whose bytes no longer match the recorded sha256.
    Changed {
        /// The file, relative to the bundle (or the asset's path).
        file: String,
        /// What the manifest records.
        recorded: String,
        /// What the file hashes to now.
        actual: String,
    },
    /// A file the manifest records that is gone.
    Missing(String),
    /// A file in the bundle the manifest does not record.
    Unrecorded(String),
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Changed { file, recorded, actual } => {
                write!(f, "{file}: sha256 {actual}, the manifest records {recorded}")
            }
            Self::Missing(file) => write!(f, "{file}: missing"),
            Self::Unrecorded(file) => write!(f, "{file}: not in the manifest"),
        }
    }
}

/// What `verify_bundle` found: how many files and assets it checked, and every mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Bundle files and installed assets checked.
    pub checked: usize,
    /// Every difference found, bundle files first, in path order.
    pub mismatches: Vec<Mismatch>,
}

/// Recomputes the sha256 of every bundle file and every asset the manifest records, and names
/// each mismatch, each recorded file that is gone and each bundle file the manifest does not
/// record.
pub fn verify_bundle(dir: &Path) -> Result<Verification, BundleError> {
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read(&manifest_path).map_err(BundleError::io("read", &manifest_path))?;
    let manifest: Value = serde_json::from_slice(&text).map_err(|error| {
        BundleError::Invalid(format!("{} is not JSON: {error}", manifest_path.display()))
    })?;
    let files = manifest["files"].as_object().ok_or_else(|| {
        BundleError::Invalid(format!("{} has no files object", manifest_path.display()))
    })?;
    let mut checked = 0;
    let mut mismatches = Vec::new();
    let mut check = |label: String, path: PathBuf, recorded: &str| {
        checked += 1;
        match std::fs::read(&path) {
            Ok(bytes) => {
                let actual = hex_sha256(&bytes);
                if actual != recorded {
                    mismatches.push(Mismatch::Changed {
                        file: label,
                        recorded: recorded.to_owned(),
                        actual,
                    });
                }
            }
            Err(_) => mismatches.push(Mismatch::Missing(label)),
        }
    };
    for (rel, digest) in files {
        check(rel.clone(), dir.join(rel), digest.as_str().unwrap_or_default());
    }
    if let Some(assets) = manifest["assets"].as_object() {
        for (role, asset) in assets {
            let path = PathBuf::from(asset["path"].as_str().unwrap_or_default());
            let label = format!("{role} ({})", path.display());
            check(label, path, asset["sha256"].as_str().unwrap_or_default());
        }
    }
    let recorded: BTreeSet<&str> = files.keys().map(String::as_str).collect();
    let mut present = Vec::new();
    list_files(dir, dir, &mut present)?;
    for rel in present {
        if rel != "manifest.json" && !recorded.contains(rel.as_str()) {
            mismatches.push(Mismatch::Unrecorded(rel));
        }
    }
    Ok(Verification { checked, mismatches })
}

fn list_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), BundleError> {
    let entries = std::fs::read_dir(dir).map_err(BundleError::io("list", dir))?;
    for entry in entries {
        let entry = entry.map_err(BundleError::io("list", dir))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(BundleError::io("examine", &path))?;
        if file_type.is_dir() {
            list_files(root, &path, out)?;
        } else {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(())
}
