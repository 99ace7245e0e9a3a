//! Comparing what a caller expects of a payment (payer, pay_to, amount, asset) with what
//! the chain says, each mismatch with its reason code: the comparison a review provider
//! makes (review v1 check 3) and the lookup's `expect` form answers. Both sides are in the
//! network's canonical spelling.

use crate::Reason;

/// The four facts of a payment, as indexed or as expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymentFacts<'a> {
    /// Who paid.
    pub payer: &'a str,
    /// Who was paid.
    pub pay_to: &'a str,
    /// Exact amount in the asset's smallest unit.
    pub amount: &'a str,
    /// Token contract or mint.
    pub asset: &'a str,
}

/// What a caller expects; a fact left `None` is not compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpectedFacts<'a> {
    /// Expected payer.
    pub payer: Option<&'a str>,
    /// Expected pay_to.
    pub pay_to: Option<&'a str>,
    /// Expected amount.
    pub amount: Option<&'a str>,
    /// Expected asset.
    pub asset: Option<&'a str>,
}

/// One fact that differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Its reason code.
    pub reason: Reason,
    /// `payer`, `pay_to`, `amount` or `asset`.
    pub fact: &'static str,
    /// What the chain says.
    pub chain: String,
    /// What was expected.
    pub expected: String,
}

/// The facts that differ, in the order payer, pay_to, amount, asset.
pub fn mismatches(chain: &PaymentFacts<'_>, expected: &ExpectedFacts<'_>) -> Vec<Mismatch> {
    [
        (Reason::PayerMismatch, "payer", chain.payer, expected.payer),
        (Reason::V1PayToMismatch, "pay_to", chain.pay_to, expected.pay_to),
        (Reason::V1AmountMismatch, "amount", chain.amount, expected.amount),
        (Reason::V1AssetMismatch, "asset", chain.asset, expected.asset),
    ]
    .into_iter()
    .filter_map(|(reason, fact, ours, theirs)| {
        let theirs = theirs?;
        (ours != theirs).then(|| Mismatch {
            reason,
            fact,
            chain: ours.to_string(),
            expected: theirs.to_string(),
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: PaymentFacts<'static> = PaymentFacts {
        payer: "0xaa",
        pay_to: "0xbb",
        amount: "10000",
        asset: "0xcc",
    };

    #[test]
    fn compares_only_what_is_expected() {
        assert!(mismatches(&CHAIN, &ExpectedFacts::default()).is_empty());
        let expected = ExpectedFacts {
            pay_to: Some("0xbb"),
            amount: Some("9999"),
            ..ExpectedFacts::default()
        };
        let found = mismatches(&CHAIN, &expected);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].reason.code(), found[0].fact, found[0].chain.as_str()),
            ("v1_amount_mismatch", "amount", "10000")
        );
    }

    #[test]
    fn every_fact_has_its_code_in_order() {
        let expected = ExpectedFacts {
            payer: Some("0x01"),
            pay_to: Some("0x02"),
            amount: Some("1"),
            asset: Some("0x03"),
        };
        let codes: Vec<&str> = mismatches(&CHAIN, &expected)
            .iter()
            .map(|m| m.reason.code())
            .collect();
        assert_eq!(
            codes,
            [
                "payer_mismatch",
                "v1_pay_to_mismatch",
                "v1_amount_mismatch",
                "v1_asset_mismatch"
            ]
        );
    }
}
