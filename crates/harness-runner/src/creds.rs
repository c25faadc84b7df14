//! The founder-credential stop (REQ-CRED-2): the runner refuses to claim a role while a founder's
//! credential is within reach of the session, or while a service the role needs has no usable
//! role token.

use std::path::Path;

use serde::Deserialize;

use crate::env::Environment;
use crate::error::RunError;

/// Environment variables that hold a founder's (a human's) credentials, never a role's. Any of
/// them set and non-empty stops the run before the claim (exit 20).
pub const FOUNDER_ENV: &[&str] = &[
    "GITEA_TOKEN",
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GPG_AGENT_INFO",
    "VIKUNJA_TOKEN",
    "MOSAIC_TOKEN",
    "MOSAIC_FOUNDER_TOKEN",
    "NPM_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DOCKER_AUTH_CONFIG",
];

/// The prefix of a role token's variable: the token for service `gitea` is in
/// `MOSAIC_ROLE_TOKEN_GITEA`.
pub const ROLE_TOKEN_PREFIX: &str = "MOSAIC_ROLE_TOKEN_";

#[derive(Deserialize)]
struct Policy {
    #[serde(default)]
    services: Vec<String>,
    #[serde(default)]
    credentials: Vec<Credential>,
}

#[derive(Deserialize)]
struct Credential {
    service: String,
    status: String,
}

/// The variable a service's role token is in.
pub fn role_token_var(service: &str) -> String {
    let upper: String = service
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' })
        .collect();
    format!("{ROLE_TOKEN_PREFIX}{upper}")
}

/// Checks `env` (the runner's environment, as bytes) against the bundle's policy.json text.
pub(crate) fn check(env: &Environment, policy: &[u8], policy_path: &Path) -> Result<(), RunError> {
    // A value that is not UTF-8 counts as set: it is checked as bytes, never dropped.
    if let Some(name) = FOUNDER_ENV.iter().find(|name| env.is_set(name)) {
        return Err(RunError::FounderCredential { variable: (*name).to_owned() });
    }
    let policy: Policy = harness_tools::json::from_slice(policy)
        .map_err(|source| RunError::Json { path: policy_path.to_owned(), source })?;
    for service in &policy.services {
        let usable = policy
            .credentials
            .iter()
            .any(|credential| &credential.service == service && credential.status == "usable");
        if !usable {
            return Err(RunError::NoRoleToken {
                service: service.clone(),
                reason: "the broker reported no usable role token for it".to_owned(),
            });
        }
        let var = role_token_var(service);
        if !env.is_set(&var) {
            return Err(RunError::NoRoleToken {
                service: service.clone(),
                reason: format!("{var} holds no role token"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Environment {
        Environment::from_pairs(pairs.iter().copied())
    }

    const POLICY: &[u8] =
        br#"{"services":["gitea"],"credentials":[{"service":"gitea","status":"usable"}]}"#;

    fn check(env: &Environment, policy: &[u8]) -> Result<(), RunError> {
        super::check(env, policy, Path::new("policy.json"))
    }

    #[test]
    fn founder_variables_stop_the_run() {
        let error = check(&env(&[("GH_TOKEN", "x"), ("MOSAIC_ROLE_TOKEN_GITEA", "t")]), POLICY)
            .unwrap_err();
        assert_eq!(error.exit_code(), 20);
        assert!(error.to_string().contains("GH_TOKEN"));
        // An empty variable is not a credential.
        check(&env(&[("GH_TOKEN", ""), ("MOSAIC_ROLE_TOKEN_GITEA", "t")]), POLICY).unwrap();
    }

    #[test]
    fn a_founder_variable_that_is_not_utf8_still_stops_the_run() {
        let bad = Environment::from_pairs([
            (
                OsString::from("SSH_AUTH_SOCK"),
                OsString::from_vec(b"/tmp/ssh-\xe9/agent.1".to_vec()),
            ),
            (OsString::from("MOSAIC_ROLE_TOKEN_GITEA"), OsString::from("t")),
        ]);
        assert_eq!(check(&bad, POLICY).unwrap_err().exit_code(), 20);
    }

    #[test]
    fn a_needed_service_without_a_usable_token_stops_the_run() {
        let error = check(&env(&[]), POLICY).unwrap_err();
        assert!(error.to_string().contains("MOSAIC_ROLE_TOKEN_GITEA"), "{error}");
        let expired =
            br#"{"services":["gitea"],"credentials":[{"service":"gitea","status":"expired"}]}"#;
        let error = check(&env(&[("MOSAIC_ROLE_TOKEN_GITEA", "t")]), expired).unwrap_err();
        assert!(error.to_string().contains("no usable role token"), "{error}");
        check(&env(&[]), br#"{"services":[]}"#).unwrap();
    }
}
