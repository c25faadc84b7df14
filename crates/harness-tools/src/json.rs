//! Reading the JSON the host writes (the bundle request, run.json) and the broker sends (a
//! message) so that an error names the field it is in: `session.workspace: invalid type: ...`.

/// A JSON document that did not read as its type.
#[derive(Debug, thiserror::Error)]
#[error("{}{source}", field.as_deref().map(|field| format!("{field}: ")).unwrap_or_default())]
pub struct JsonError {
    /// The field the error is in (`session.workspace`, `resolved.skills`), or none when the error
    /// is about the text (a syntax error, an early end, what follows the value) or the whole.
    pub field: Option<String>,
    /// serde_json's own error.
    #[source]
    pub source: serde_json::Error,
}

/// Reads `T` from JSON text, as `serde_json::from_slice` does (nothing but white space may
/// follow the value), naming the field an error is in.
pub fn from_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, JsonError> {
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let value = read(&mut json, "")?;
    json.end().map_err(|source| JsonError { field: None, source })?;
    Ok(value)
}

/// Reads `T` from a JSON value, naming the field an error is in under `root` (`resolved` gives
/// `resolved.skills`, and `resolved` itself for an error about the whole value).
pub fn from_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    root: &str,
) -> Result<T, JsonError> {
    read(value, root)
}

fn read<'de, T: serde::Deserialize<'de>>(
    deserializer: impl serde::Deserializer<'de, Error = serde_json::Error>,
    root: &str,
) -> Result<T, JsonError> {
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let source = error.into_inner();
        let text = matches!(
            source.classify(),
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof
        );
        let field = match (root, path.as_str()) {
            _ if text => None,
            ("", ".") => None,
            ("", path) => Some(path.to_owned()),
            (root, ".") => Some(root.to_owned()),
            (root, path) => Some(format!("{root}.{path}")),
        };
        JsonError { field, source }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[expect(dead_code, reason = "read to be checked, not used")]
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        #[expect(dead_code, reason = "read to be checked, not used")]
        count: u32,
    }

    #[test]
    fn an_error_names_its_field_and_a_syntax_error_none() {
        let error = from_slice::<Outer>(br#"{"inner": {"count": "7"}}"#).unwrap_err();
        assert_eq!(error.field.as_deref(), Some("inner.count"));
        assert!(error.to_string().starts_with("inner.count: invalid type: string \"7\""));
        let error = from_slice::<Outer>(br#"{"inner": {"count": "#).unwrap_err();
        assert_eq!(error.field, None, "{error}");
        let error = from_slice::<Outer>(br#"{"inner": {"count": 7}} {}"#).unwrap_err();
        assert!(error.to_string().starts_with("trailing characters"), "{error}");
        let error = from_slice::<Outer>(br#"{}"#).unwrap_err();
        assert_eq!(error.to_string(), "missing field `inner` at line 1 column 2");
        let value = serde_json::json!({"count": -1});
        let error = from_value::<Inner>(value, "inner").unwrap_err();
        assert!(error.to_string().starts_with("inner.count: invalid value"), "{error}");
        let error = from_value::<Inner>(serde_json::json!({}), "inner").unwrap_err();
        assert_eq!(error.to_string(), "inner: missing field `count`");
    }
}
