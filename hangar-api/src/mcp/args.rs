//! Reading a tool's `arguments` object, with errors that name the argument.

use serde_json::{Map, Value};

use hangar_core::jsonrpc::RpcError;

pub struct Arguments {
    map: Map<String, Value>,
    /// Where these arguments sit, for messages about nested ones (`calls[2].`).
    prefix: String,
}

impl Arguments {
    /// Absent or null arguments are an empty object; anything else must be an object.
    pub fn new(arguments: Option<Value>) -> Result<Self, RpcError> {
        Arguments::nested(arguments, "", "arguments")
    }

    pub fn nested(value: Option<Value>, prefix: &str, what: &str) -> Result<Self, RpcError> {
        match value {
            None | Some(Value::Null) => Ok(Arguments { map: Map::new(), prefix: prefix.into() }),
            Some(Value::Object(map)) => Ok(Arguments { map, prefix: prefix.into() }),
            Some(_) => Err(RpcError::invalid_params(format!("Invalid arguments: `{what}` must be an object"))),
        }
    }

    /// The full name of an argument, for messages.
    pub fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Null counts as absent, as most clients send it for "not given".
    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|v| !v.is_null())
    }

    fn wrong_type(&self, key: &str, expected: &str) -> RpcError {
        RpcError::invalid_params(format!("Invalid arguments: `{}` must be {expected}", self.name(key)))
    }

    pub fn required_str(&self, key: &str) -> Result<String, RpcError> {
        match self.get(key) {
            None => Err(RpcError::invalid_params(format!(
                "Invalid arguments: missing required argument `{}`",
                self.name(key)
            ))),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(self.wrong_type(key, "a string")),
        }
    }

    pub fn optional_str(&self, key: &str) -> Result<Option<String>, RpcError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong_type(key, "a string")),
        }
    }

    pub fn optional_bool(&self, key: &str) -> Result<Option<bool>, RpcError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong_type(key, "a boolean")),
        }
    }

    /// An integer of at least 1.
    pub fn optional_count(&self, key: &str) -> Result<Option<u64>, RpcError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => {
                v.as_u64().filter(|n| *n >= 1).map(Some).ok_or_else(|| self.wrong_type(key, "an integer of at least 1"))
            }
        }
    }

    /// A number of seconds greater than zero.
    pub fn optional_seconds(&self, key: &str) -> Result<Option<f64>, RpcError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "a number of seconds greater than 0")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_argument() {
        let args = Arguments::new(Some(json!({"mcp_server": 3, "timeout": -1}))).unwrap();
        assert!(args.required_str("mcp_server").unwrap_err().message.contains("`mcp_server` must be a string"));
        assert!(args.required_str("tool").unwrap_err().message.contains("missing required argument `tool`"));
        assert!(args.optional_seconds("timeout").unwrap_err().message.contains("`timeout`"));
        let nested = Arguments::nested(Some(json!({})), "calls[2].", "calls[2]").unwrap();
        assert!(nested.required_str("tool").unwrap_err().message.contains("`calls[2].tool`"));
    }

    #[test]
    fn null_and_absent_are_the_same() {
        let args = Arguments::new(Some(json!({"state_filter": null}))).unwrap();
        assert_eq!(args.optional_str("state_filter").unwrap(), None);
        assert!(Arguments::new(None).is_ok());
        assert_eq!(Arguments::new(Some(json!([1]))).err().map(|e| e.code), Some(-32602));
    }
}
