//! Decimal digits of an integer without `fmt`: for the hot paths that write numbers as text
//! (a trace line's hash, a checkpoint's windows, a sweep's outcome digest), where `Display`
//! costs more than the rest.

/// The decimal text of an integer, as `Display` writes it (a '-' for a negative one, no
/// padding).
pub struct Decimal {
    digits: [u8; Decimal::DIGITS_MAX],
    start: usize,
}

impl Decimal {
    /// u128::MAX has 39 decimal digits; one more for the sign of an i128.
    const DIGITS_MAX: usize = 40;

    /// The text of a signed integer.
    pub fn signed(value: i128) -> Decimal {
        let mut decimal = Decimal::of(value.unsigned_abs());
        if value < 0 {
            assert!(decimal.start > 0, "an i128 has at most 39 digits");
            decimal.start -= 1;
            decimal.digits[decimal.start] = b'-';
        }
        decimal
    }

    pub fn of(value: u128) -> Decimal {
        let mut digits = [0u8; Decimal::DIGITS_MAX];
        let mut start = Decimal::DIGITS_MAX;
        // Division of a u128 is a call into a slow routine; nearly every number fits a u64.
        let mut high = value;
        let mut low = u64::try_from(value).ok();
        loop {
            assert!(start > 0, "at most 39 digits");
            start -= 1;
            let digit = match low.as_mut() {
                Some(rest) => {
                    let digit = *rest % 10;
                    *rest /= 10;
                    digit
                }
                None => {
                    let digit = (high % 10) as u64;
                    high /= 10;
                    low = u64::try_from(high).ok();
                    digit
                }
            };
            digits[start] = b'0' + digit as u8;
            if low == Some(0) {
                break;
            }
        }
        Decimal { digits, start }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("ASCII digits and a sign")
    }
}

#[cfg(test)]
mod tests {
    use super::Decimal;

    #[test]
    fn digits_are_what_display_writes() {
        for value in [
            0,
            1,
            9,
            10,
            99,
            100,
            12_345,
            u128::from(u64::MAX) - 1,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            u128::from(u64::MAX) * 10,
            u128::from(u64::MAX) * 10 + 9,
            u128::MAX / 10,
            u128::MAX,
        ] {
            assert_eq!(Decimal::of(value).as_bytes(), value.to_string().as_bytes());
        }
        for value in [0, 1, -1, -10, i128::from(i64::MIN), i128::MAX, i128::MIN] {
            assert_eq!(Decimal::signed(value).as_str(), value.to_string());
        }
    }
}
