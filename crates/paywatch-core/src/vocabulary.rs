//! The spellings of core's vocabulary enums (states, methods, causes, kinds, rules), for
//! the messages that list what a value may be and the checks that documents list them.

use strum::VariantArray;

/// Every spelling of `T`, in declaration order, as stored and answered.
pub fn spellings<T: VariantArray + Copy + Into<&'static str>>() -> Vec<&'static str> {
    T::VARIANTS.iter().map(|v| (*v).into()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::EventKind;

    #[test]
    fn spells_each_variant_as_answered() {
        assert_eq!(
            spellings::<EventKind>(),
            ["payment_state", "review_state", "verification"]
        );
    }
}
