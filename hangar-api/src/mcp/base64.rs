//! Strict standard Base64 (RFC 4648 §4, padded), for `=?base64?...?=` header values.
//!
//! Strict on purpose: a header value with bad padding or stray characters is malformed and
//! must be refused, not guessed at.

/// Decodes `text`, or says why it is not valid padded Base64.
pub fn decode(text: &str) -> Result<Vec<u8>, &'static str> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err("its length is not a multiple of 4");
    }
    let padding = bytes.iter().rev().take_while(|b| **b == b'=').count();
    if padding > 2 {
        return Err("it has too much padding");
    }
    let body = &bytes[..bytes.len() - padding];
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &b in body {
        let value = sextet(b).ok_or("it holds a character outside the Base64 alphabet")?;
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero, or the text is not what an encoder produces.
    if acc != 0 {
        return Err("its last character has stray bits");
    }
    Ok(out)
}

fn sextet(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn decodes_padded_text() {
        assert_eq!(decode("SGVsbG8=").unwrap(), b"Hello");
        assert_eq!(decode("SGk=").unwrap(), b"Hi");
        assert_eq!(decode("SGVs").unwrap(), b"Hel");
        assert_eq!(decode("").unwrap(), b"");
        assert_eq!(decode("5pel5pys6Kqe").unwrap(), "日本語".as_bytes());
    }

    #[test]
    fn refuses_bad_padding_and_characters() {
        assert!(decode("SGVsbG8").is_err(), "missing padding");
        assert!(decode("SGVs!!!bG8=").is_err(), "characters outside the alphabet");
        assert!(decode("S===").is_err());
        assert!(decode("SGV=sbG8").is_err(), "padding in the middle");
        assert!(decode("SGl=").is_err(), "stray bits");
    }
}
