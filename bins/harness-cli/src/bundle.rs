//! `harness bundle build --request FILE --out DIR` and `harness bundle verify DIR [--digest D]`,
//! parsed in `main.rs`.

use std::path::Path;

use harness_bundle::{
    BundleError, Utf8Path, Utf8PathBuf, build_bundle, load_request, utf8_path, verify_bundle,
};

use crate::Failure;

/// The prefix this binary is installed under (`PREFIX/bin/harness`), the default install layout;
/// none if it is not UTF-8 (the request must then give `install.prefix`).
fn own_prefix() -> Option<Utf8PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Utf8PathBuf::from_path_buf(exe.parent()?.parent()?.to_path_buf()).ok()
}

pub(crate) fn build(request: &Utf8Path, out: &Utf8Path) -> Result<(), Failure> {
    let failed = |error: harness_bundle::BundleError| Failure::Failed(error.to_string());
    let loaded = load_request(request, own_prefix().as_deref()).map_err(failed)?;
    let built = build_bundle(&loaded.request(out_dir(out).map_err(failed)?)).map_err(failed)?;
    // The digest alone on stdout: the host puts it in run.json's bundleDigest.
    println!("{}", built.digest);
    Ok(())
}

/// `--out` as the bundle's path: relative to the working directory like `--request`, and under
/// its parent as the kernel resolves it (no `..`, no link on the way), since the bundle's files
/// name it. A parent that does not resolve is left as given, for the build to refuse naming it.
fn out_dir(out: &Utf8Path) -> Result<Utf8PathBuf, BundleError> {
    let absolute = std::path::absolute(out).map_err(|source| BundleError::Io {
        operation: "make absolute",
        path: out.into(),
        source,
    })?;
    let absolute = utf8_path("--out, made absolute", absolute)?;
    // `x/..`, `x/.`: no name for a bundle of its own.
    let (Some(parent), Some(name)) = (absolute.parent(), absolute.file_name()) else {
        return Err(BundleError::NotNormal { field: "--out", path: out.to_owned() });
    };
    if name == "." {
        return Err(BundleError::NotNormal { field: "--out", path: out.to_owned() });
    }
    match parent.canonicalize_utf8() {
        Ok(parent) => Ok(parent.join(name)),
        Err(_) => Ok(absolute),
    }
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
    if report.mismatches.iter().all(harness_bundle::Mismatch::is_install) {
        println!("{}", harness_bundle::INSTALL_HINT);
    }
    Err(Failure::Failed(format!(
        "{} of {} recorded digests do not match, or files are missing or unrecorded",
        report.mismatches.len(),
        report.checked
    )))
}
