//! The capability: the secret that makes the runner's broker calls count.
//!
//! It is held by the runner (and the tool socket it hosts) and written onto the broker's wire,
//! nowhere else: [`Capability`] has no `Display`, its `Debug` prints a placeholder, it is not
//! `Serialize`, and the only way to its text is crate-private.

use std::fmt;

/// The longest capability accepted, in bytes.
const MAX_LEN: usize = 4096;

/// A capability the broker issued for one run. Its value never appears in `Debug` output, logs
/// or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Capability(String);

/// Why a capability was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// It was empty.
    #[error("the capability is empty")]
    Empty,
    /// It was longer than 4096 bytes.
    #[error("the capability is {0} bytes, over the limit of 4096")]
    TooLong(usize),
    /// It held whitespace or a control character (the value is not repeated).
    #[error("the capability holds whitespace or a control character")]
    BadCharacter,
}

impl Capability {
    /// Validates `value`: 1 to 4096 bytes, no whitespace, no control characters.
    pub fn new(value: impl Into<String>) -> Result<Self, CapabilityError> {
        let value = value.into();
        if value.is_empty() {
            return Err(CapabilityError::Empty);
        }
        if value.len() > MAX_LEN {
            return Err(CapabilityError::TooLong(value.len()));
        }
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(CapabilityError::BadCharacter);
        }
        Ok(Self(value))
    }

    /// Returns the secret, for the broker's wire only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Capability(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let cap = Capability::new("cap-s3cret").unwrap();
        assert_eq!(format!("{cap:?}"), "Capability(<redacted>)");
        assert_eq!(format!("{:?}", Some(&cap)), "Some(Capability(<redacted>))");
        assert_eq!(cap.expose(), "cap-s3cret");
    }

    #[test]
    fn bad_values_are_refused() {
        assert_eq!(Capability::new(""), Err(CapabilityError::Empty));
        assert_eq!(Capability::new("a b"), Err(CapabilityError::BadCharacter));
        assert_eq!(Capability::new("a\n"), Err(CapabilityError::BadCharacter));
        assert_eq!(Capability::new("x".repeat(4097)), Err(CapabilityError::TooLong(4097)));
    }
}
