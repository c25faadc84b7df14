//! The argument check: every call's arguments against its row's parameters, before anything is
//! sent, with an error that names the field and the bound.

use serde_json::{Map, Value};

use crate::catalogue::{Kind, Param, ToolDef};

/// Why a call's arguments were refused. The field is a path such as `roles[2].count`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// The arguments were not a JSON object.
    #[error("the arguments must be a JSON object")]
    NotAnObject,
    /// A field the tool does not take.
    #[error("`{field}` is not an argument of this tool")]
    Unknown {
        /// The field.
        field: String,
    },
    /// A required field was left out.
    #[error("`{field}` is required")]
    Missing {
        /// The field.
        field: String,
    },
    /// A field of the wrong JSON type.
    #[error("`{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: String,
        /// What it must be.
        expected: &'static str,
    },
    /// A string of the wrong length (in characters) or a list of the wrong size (in entries).
    #[error("`{field}` must have {min} to {max} {unit}, got {actual}")]
    Size {
        /// The field.
        field: String,
        /// Fewest.
        min: usize,
        /// Most.
        max: usize,
        /// What it had.
        actual: usize,
        /// `characters` or `entries`.
        unit: &'static str,
    },
    /// An integer out of range.
    #[error("`{field}` must be {min} to {max}, got {actual}")]
    Range {
        /// The field.
        field: String,
        /// Smallest.
        min: i64,
        /// Largest.
        max: i64,
        /// What it was.
        actual: String,
    },
    /// A string that is none of the allowed values.
    #[error("`{field}` must be one of {allowed}")]
    NotOneOf {
        /// The field.
        field: String,
        /// The allowed values, comma-separated.
        allowed: String,
    },
    /// A rule of the tool beyond its fields' own.
    #[error("{0}")]
    Rule(String),
}

impl ArgError {
    /// Returns the stable code of every argument error.
    pub fn code(&self) -> &'static str {
        "bad-arguments"
    }
}

/// Checks `args` (JSON `null` counts as `{}`) against `tool`'s parameters and rules, and returns
/// the arguments to send: the caller's, plus the defaults the tool sends (list_tasks's
/// `done: false`, `limit: 50`, `descriptions: false`).
pub fn prepare_args(tool: &ToolDef, args: &Value) -> Result<Value, ArgError> {
    let mut map = match args {
        Value::Null => Map::new(),
        Value::Object(map) => map.clone(),
        _ => return Err(ArgError::NotAnObject),
    };
    check_record(tool.params, &map, "")?;
    if let Some(check) = tool.check {
        check(&map)?;
    }
    if let Some(fill) = tool.fill {
        fill(&mut map);
    }
    Ok(Value::Object(map))
}

fn field(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_owned() } else { format!("{prefix}.{name}") }
}

fn check_record(params: &[Param], map: &Map<String, Value>, prefix: &str) -> Result<(), ArgError> {
    // Unknown fields first, in a stable order, so the error does not depend on the map's order.
    let mut unknown: Vec<&String> =
        map.keys().filter(|key| !params.iter().any(|param| param.name == key.as_str())).collect();
    unknown.sort();
    if let Some(key) = unknown.first() {
        return Err(ArgError::Unknown { field: field(prefix, key) });
    }
    for param in params {
        match map.get(param.name) {
            Some(value) => check_kind(&param.kind, value, &field(prefix, param.name))?,
            None if param.required => {
                return Err(ArgError::Missing { field: field(prefix, param.name) });
            }
            None => {}
        }
    }
    Ok(())
}

fn check_kind(kind: &Kind, value: &Value, field: &str) -> Result<(), ArgError> {
    let wrong = |expected| ArgError::WrongType { field: field.to_owned(), expected };
    match kind {
        Kind::Str { min, max } => {
            let text = value.as_str().ok_or_else(|| wrong("a string"))?;
            // Counted as the spec's JavaScript counts a string's length: UTF-16 code units, so a
            // character outside the Basic Multilingual Plane counts two.
            size(text.encode_utf16().count(), *min, *max, field, "characters")
        }
        Kind::Int { min, max } => {
            let out_of_range = || ArgError::Range {
                field: field.to_owned(),
                min: *min,
                max: *max,
                actual: value.to_string(),
            };
            if !value.is_number() {
                return Err(wrong("an integer"));
            }
            let number = value
                .as_i64()
                .ok_or_else(|| if value.is_u64() { out_of_range() } else { wrong("an integer") })?;
            if (*min..=*max).contains(&number) { Ok(()) } else { Err(out_of_range()) }
        }
        Kind::Bool => value.as_bool().map(|_| ()).ok_or_else(|| wrong("true or false")),
        Kind::Enum(allowed) => {
            let text = value.as_str().ok_or_else(|| wrong("a string"))?;
            if allowed.contains(&text) {
                Ok(())
            } else {
                Err(ArgError::NotOneOf { field: field.to_owned(), allowed: allowed.join(", ") })
            }
        }
        Kind::Revision => match value {
            Value::String(text) if !text.is_empty() => Ok(()),
            Value::Number(number) if number.is_i64() || number.is_u64() => Ok(()),
            _ => Err(wrong("the revision organization_revision returned (a string or integer)")),
        },
        Kind::Object => value.as_object().map(|_| ()).ok_or_else(|| wrong("an object")),
        Kind::List { item, min, max } => {
            let items = value.as_array().ok_or_else(|| wrong("a list"))?;
            size(items.len(), *min, *max, field, "entries")?;
            items.iter().enumerate().try_for_each(|(index, value)| {
                check_kind(item, value, &format!("{field}[{index}]"))
            })
        }
        Kind::Record(params) => {
            let map = value.as_object().ok_or_else(|| wrong("an object"))?;
            check_record(params, map, field)
        }
        Kind::Nullable(inner) => {
            if value.is_null() {
                Ok(())
            } else {
                check_kind(inner, value, field)
            }
        }
    }
}

fn size(
    actual: usize,
    min: usize,
    max: usize,
    field: &str,
    unit: &'static str,
) -> Result<(), ArgError> {
    if (min..=max).contains(&actual) {
        Ok(())
    } else {
        Err(ArgError::Size { field: field.to_owned(), min, max, actual, unit })
    }
}
