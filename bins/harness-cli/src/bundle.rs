//! `harness bundle build --request FILE --out DIR` and `harness bundle verify DIR [--digest D]`,
//! parsed in `main.rs`.

use std::path::Path;

use harness_bundle::{Utf8PathBuf, build_bundle, load_request, utf8_path, verify_bundle};

use crate::Failure;

/// The prefix this binary is installed under (`PREFIX/bin/harness`), the default install layout;
/// none if it is not UTF-8 (the request must then give `install.prefix`).
fn own_prefix() -> Option<Utf8PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Utf8PathBuf::from_path_buf(exe.parent()?.parent()?.to_path_buf()).ok()
}

pub(crate) fn build(request: &Path, out: &Path) -> Result<(), Failure> {
    let failed = |error: harness_bundle::BundleError| Failure::Failed(error.to_string());
    let request = utf8_path("--request", request.to_path_buf()).map_err(failed)?;
    let out = utf8_path("--out", out.to_path_buf()).map_err(failed)?;
    let loaded = load_request(&request, own_prefix().as_deref()).map_err(failed)?;
    let built = build_bundle(&loaded.request(out)).map_err(failed)?;
    // The digest alone on stdout: the host puts it in run.json's bundleDigest.
    println!("{}", built.digest);
    Ok(())
}

pub(crate) fn verify(dir: &Path, digest: Option<&str>) -> Result<(), Failure> {
    let report = verify_bundle(dir, digest).map_err(|error| Failure::Failed(error.to_string()))?;
    if report.mismatches.is_empty() {
        let sealed = match digest {
            Some(_) => "the digest given",
            None => "no digest given: manifest.json's own fields are unchecked",
        };
        println!(
            "ok: {} files and assets match {} (sha256 {}; {sealed})",
            report.checked,
            dir.join("manifest.json").display(),
            report.digest
        );
        return Ok(());
    }
    for mismatch in &report.mismatches {
        println!("{mismatch}");
    }
    Err(Failure::Failed(format!(
        "{} of {} recorded digests do not match, or files are missing or unrecorded",
        report.mismatches.len(),
        report.checked
    )))
}
