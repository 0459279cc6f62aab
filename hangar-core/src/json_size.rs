//! The length of a value's compact JSON, byte for byte what `serde_json::to_vec` would write,
//! counted without writing it. Every audited call records its arguments' and its result's sizes,
//! and serializing a result only to count it cost a call's path more than the rest of its audit
//! entry (docs/bench-log/2026.md, "Entries written where they are recorded").

use serde_json::{Number, Value};

/// The length of `value` as compact JSON.
pub fn of(value: &Value) -> u64 {
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number_len(number),
        Value::String(text) => of_str(text),
        // Brackets, and a comma between items.
        Value::Array(items) => 2 + items.iter().map(of).sum::<u64>() + items.len().saturating_sub(1) as u64,
        // Braces, a colon per member, and a comma between members.
        Value::Object(members) => {
            2 + members.iter().map(|(key, value)| of_str(key) + 1 + of(value)).sum::<u64>()
                + members.len().saturating_sub(1) as u64
        }
    }
}

fn number_len(number: &Number) -> u64 {
    if let Some(n) = number.as_u64() {
        digits(n)
    } else if let Some(n) = number.as_i64() {
        1 + digits(n.unsigned_abs())
    } else {
        // A float, written as serde_json writes it (the shortest round trip): rare in a call's
        // arguments, so formatted here rather than counted.
        number.to_string().len() as u64
    }
}

fn digits(n: u64) -> u64 {
    u64::from(n.checked_ilog10().unwrap_or(0)) + 1
}

/// The length of a JSON string, with its quotes and escapes: `\"`, `\\` and the short escapes of `\b`, `\f`, `\n`,
/// `\r` and `\t` take two bytes; any other control character six (`\u00XX`); everything else
/// (UTF-8 included) is written as it is. Sixteen bytes at a time: most texts escape nothing.
pub fn of_str(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(16);
    let mut extra = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 16];
        word.copy_from_slice(chunk);
        if may_escape(u128::from_le_bytes(word)) {
            extra += chunk.iter().map(|&byte| escape_extra(byte)).sum::<u64>();
        }
    }
    extra += chunks.remainder().iter().map(|&byte| escape_extra(byte)).sum::<u64>();
    2 + bytes.len() as u64 + extra
}

/// Whether any of sixteen bytes is below 0x20, a quote or a backslash (never false when one is).
fn may_escape(word: u128) -> bool {
    const ONES: u128 = u128::from_le_bytes([1; 16]);
    const HIGH_BITS: u128 = u128::from_le_bytes([0x80; 16]);
    // A byte below n sets its high bit in (x - n) & !x, for n <= 0x80 (a classic bit trick).
    let below = |x: u128, n: u128| x.wrapping_sub(ONES * n) & !x & HIGH_BITS;
    (below(word, 0x20) | below(word ^ (ONES * u128::from(b'"')), 1) | below(word ^ (ONES * u128::from(b'\\')), 1)) != 0
}

fn escape_extra(byte: u8) -> u64 {
    match byte {
        b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
        0..0x20 => 5,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn the_length_is_what_serde_json_writes() {
        let every_control: String = (0u8..0x20).map(char::from).collect();
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(9),
            json!(10),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(0.1),
            json!(-0.0),
            json!(1e300),
            json!(2.5e-8),
            json!(123456789.125),
            json!(""),
            json!("plain"),
            json!("quote \" backslash \\ slash / del \u{7f}"),
            json!(every_control),
            json!("ünïcödé ✓ 🚀"),
            json!([]),
            json!({}),
            json!([1, "two", [3.5, null], {"four": false}]),
            json!({"content": [{"type": "text", "text": "line\nline\t\"x\""}], "isError": false, "é\n": {}}),
        ];
        for value in values {
            assert_eq!(of(&value), serde_json::to_vec(&value).unwrap().len() as u64, "{value}");
        }
    }

    #[test]
    fn every_byte_is_counted_wherever_it_stands_in_a_string() {
        for byte in (0u8..0x80).chain([0xc3]) {
            for at in 0..40 {
                let mut text = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN".as_bytes().to_vec();
                text[at] = byte;
                // 0xc3 alone is no UTF-8: make it "é".
                if byte == 0xc3 {
                    text.insert(at + 1, 0xa9);
                }
                let value = Value::String(String::from_utf8(text).unwrap());
                assert_eq!(of(&value), serde_json::to_vec(&value).unwrap().len() as u64, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn every_power_of_ten_has_its_digits() {
        let mut n = 1u64;
        for len in 1..=19 {
            assert_eq!((digits(n - 1), digits(n), digits(n * 9)), (if len == 1 { 1 } else { len - 1 }, len, len));
            n *= 10;
        }
        assert_eq!(digits(u64::MAX), 20);
    }
}
