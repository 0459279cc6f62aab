//! Building JSON objects by moving values in.
//!
//! `serde_json::json!` serializes every interpolated expression into a new `Value` (a deep copy
//! of a `Value` it is given); on the hot path that copied each upstream result three times.

use serde_json::{Map, Value};

/// An object of `entries`, in order, each value moved in.
pub fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut map = Map::new();
    for (key, value) in entries {
        map.insert(key.to_owned(), value);
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn builds_the_same_object_as_json() {
        let inner = json!({"deep": [1, {"x": "y"}]});
        assert_eq!(
            object([("a", Value::from(1)), ("b", inner.clone()), ("c", Value::Null)]),
            json!({"a": 1, "b": inner, "c": null})
        );
    }
}
