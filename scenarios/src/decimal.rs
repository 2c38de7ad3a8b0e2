//! Exact big counts in JSON: a [`BigUint`] as a decimal string (a JSON number past 2^53 is
//! not read back exactly by every reader, and these pass 2^64), or with [`count`] as a JSON
//! number up to 2^53 and a decimal string beyond.

/// The largest count [`count`] writes as a JSON number: 2^53, the last integer every JSON
/// reader (a JavaScript one, a double) reads back exactly.
pub const JSON_NUMBER_EXACT_MAX: u64 = 1 << 53;

/// A [`BigUint`](num_bigint::BigUint) count as a JSON number up to [`JSON_NUMBER_EXACT_MAX`],
/// else as a decimal string; read back from either. For `#[serde(with = ...)]`.
pub mod count {
    use super::JSON_NUMBER_EXACT_MAX;
    use num_bigint::BigUint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &BigUint, serializer: S) -> Result<S::Ok, S::Error> {
        match u64::try_from(value) {
            Ok(small) if small <= JSON_NUMBER_EXACT_MAX => serializer.serialize_u64(small),
            _ => serializer.serialize_str(&value.to_string()),
        }
    }

    /// A count as JSON holds it: a number, or a decimal string.
    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum Written {
        Number(u64),
        Text(String),
    }

    impl Written {
        pub(super) fn count<E: serde::de::Error>(self) -> Result<BigUint, E> {
            match self {
                Written::Number(n) => Ok(BigUint::from(n)),
                Written::Text(text) => text
                    .parse::<BigUint>()
                    .map_err(|e| E::custom(format!("not a decimal count {text:?}: {e}"))),
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BigUint, D::Error> {
        Written::deserialize(deserializer)?.count()
    }
}

/// [`count`] of an `Option<BigUint>` (None: null).
pub mod optional_count {
    use super::count::Written;
    use num_bigint::BigUint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<BigUint>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => super::count::serialize(value, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<BigUint>, D::Error> {
        Option::<Written>::deserialize(deserializer)?
            .map(Written::count)
            .transpose()
    }
}

/// `Option<BigUint>` as an optional decimal string, for `#[serde(with = ...)]`.
pub mod optional {
    use num_bigint::BigUint;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<BigUint>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => serializer.serialize_str(&value.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<BigUint>, D::Error> {
        let text: Option<String> = Option::deserialize(deserializer)?;
        text.map(|text| {
            text.parse::<BigUint>()
                .map_err(|e| serde::de::Error::custom(format!("not a decimal count {text:?}: {e}")))
        })
        .transpose()
    }
}

/// `n` with a comma every three digits: 62208 -> "62,208".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A count written as a decimal number, for a text line: with thousands separators up to
/// 15 digits, else in scientific notation with three significant digits ("1.35e89"): a
/// class row's states pass 2^64 (JSON keeps every digit).
pub fn count_text(decimal: &str) -> String {
    const DIGITS_EXACT_MAX: usize = 15;
    assert!(!decimal.is_empty());
    assert!(decimal.bytes().all(|b| b.is_ascii_digit()));
    if decimal.len() <= DIGITS_EXACT_MAX {
        return thousands(decimal.parse().expect("at most 15 digits fit a u64"));
    }
    // Rounded to three significant digits, half up, carrying into the exponent.
    let digits: Vec<u32> = decimal.bytes().map(|b| u32::from(b - b'0')).collect();
    let mut mantissa = digits[0] * 100 + digits[1] * 10 + digits[2] + u32::from(digits[3] >= 5);
    let mut exponent = decimal.len() - 1;
    if mantissa == 1000 {
        mantissa = 100;
        exponent += 1;
    }
    format!("{}.{:02}e{exponent}", mantissa / 100, mantissa % 100)
}

#[cfg(test)]
mod tests {
    use num_bigint::BigUint;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Count {
        #[serde(with = "super::count")]
        count: BigUint,
    }

    /// Writes `count`, checks the JSON, reads it back.
    fn check(count: BigUint, json: &str) {
        let written = serde_json::to_string(&Count {
            count: count.clone(),
        })
        .unwrap();
        assert_eq!(written, json, "{count}");
        assert_eq!(serde_json::from_str::<Count>(json).unwrap().count, count);
    }

    #[test]
    fn a_count_is_a_json_number_up_to_two_to_the_53_and_a_decimal_string_beyond() {
        check(BigUint::from(0u32), "{\"count\":0}");
        check(BigUint::from(1u64 << 53), "{\"count\":9007199254740992}");
        check(
            BigUint::from((1u64 << 53) + 1),
            "{\"count\":\"9007199254740993\"}",
        );
        let huge = BigUint::from(3u32).pow(200);
        check(huge.clone(), &format!("{{\"count\":\"{huge}\"}}"));
        // A small count written as a string (by hand) reads back too.
        assert_eq!(
            serde_json::from_str::<Count>("{\"count\":\"12\"}")
                .unwrap()
                .count,
            BigUint::from(12u32)
        );
        assert!(serde_json::from_str::<Count>("{\"count\":\"1x\"}").is_err());
        assert!(serde_json::from_str::<Count>("{\"count\":null}").is_err());
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "super::optional"
        )]
        count: Option<BigUint>,
    }

    #[test]
    fn a_count_past_two_to_the_64_round_trips_as_a_decimal_string() {
        let count = BigUint::from(3u32).pow(200);
        let json = serde_json::to_string(&Holder {
            count: Some(count.clone()),
        })
        .unwrap();
        assert_eq!(json, format!("{{\"count\":\"{count}\"}}"));
        assert_eq!(
            serde_json::from_str::<Holder>(&json).unwrap().count,
            Some(count)
        );
        assert_eq!(
            serde_json::to_string(&Holder { count: None }).unwrap(),
            "{}"
        );
        assert_eq!(serde_json::from_str::<Holder>("{}").unwrap().count, None);
        let error = serde_json::from_str::<Holder>("{\"count\":\"12x\"}").unwrap_err();
        assert!(
            error.to_string().contains("not a decimal count \"12x\""),
            "{error}"
        );
    }
}

#[cfg(test)]
mod count_text_tests {
    use super::count_text;

    #[test]
    fn big_counts_read_in_scientific_notation_small_ones_exactly() {
        for (decimal, text) in [
            ("0", "0"),
            ("483", "483"),
            ("999999999999999", "999,999,999,999,999"),
            ("1000000000000000", "1.00e15"),
            ("13500000000000000000", "1.35e19"),
            ("13549999999999999999", "1.35e19"),
            ("13550000000000000000", "1.36e19"),
            ("99950000000000000000", "1.00e20"),
        ] {
            assert_eq!(count_text(decimal), text, "{decimal}");
        }
        assert_eq!(count_text(&"7".repeat(90)), "7.78e89");
    }
}
