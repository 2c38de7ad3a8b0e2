//! Exact big counts in JSON: a [`BigUint`] as a decimal string (a JSON number past 2^53 is
//! not read back exactly by every reader, and these pass 2^64).

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

#[cfg(test)]
mod tests {
    use num_bigint::BigUint;
    use serde::{Deserialize, Serialize};

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
