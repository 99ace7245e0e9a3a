//! Pure decoding of one `getTransaction` answer (`jsonParsed`) into paywatch's rows: the
//! SPL Token and Token-2022 `transfer`, `transferChecked` and `transferCheckedWithFee`
//! instructions, top-level and inner (CPI), with token accounts mapped to their owners
//! and amounts cross-checked against the transaction's pre/post token balances.
//!
//! A `transferCheckedWithFee` counts what its destination received: the amount less the
//! Token-2022 fee withheld there.
//!
//! Every row is numbered by its transfer's position among the transaction's token
//! transfers in execution order, whatever the mint or the owners: a property of the
//! transaction, never of which wallets or mints paywatch is configured to watch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use alloy_primitives::U256;
use paywatch_core::PaymentMethod;
use paywatch_core::records::{EventPosition, PaymentRecord, TransferRecord};
use serde_json::Value;
use solana_transaction_status_client_types::{
    EncodedConfirmedTransactionWithStatusMeta, EncodedTransaction, UiInstruction, UiMessage,
    UiParsedInstruction, UiTransactionTokenBalance, option_serializer::OptionSerializer,
};

/// The SPL Token program.
pub const TOKEN_PROGRAM: &str = "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA";
/// The Token-2022 program.
pub const TOKEN_2022_PROGRAM: &str = "TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb";
/// The SPL Memo programs (v2 and v1).
const MEMO_PROGRAMS: [&str; 2] = [
    "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr",
    "Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo",
];

/// An answer no correct node could give: the worker refuses it and retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transaction {signature}: {detail}")]
pub struct BadAnswer {
    /// The transaction's signature (as asked for).
    pub signature: String,
    /// What is wrong.
    pub detail: String,
}

/// What to keep from a transaction.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    /// Mints whose transfers count, each from the slot its `start_block` names (0: all).
    pub mints: BTreeMap<String, u64>,
    /// Wallets (token account owners) paid to.
    pub pay_to: BTreeSet<String>,
    /// Fee payers of x402 facilitators: in a transaction one of them paid the fee for,
    /// every transfer of a watched mint between two owners is a payment.
    pub facilitators: BTreeSet<String>,
}

/// One decoded transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecodedTransaction {
    /// `meta.err` was set: nothing in it moved, nothing counts.
    pub failed: bool,
    /// Transfers of watched mints from or to a watched wallet, in execution order.
    pub transfers: Vec<TransferRecord>,
    /// The transfers into a watched wallet from another wallet: the payments.
    pub payments: Vec<PaymentRecord>,
}

/// One `transfer`/`transferChecked`/`transferCheckedWithFee` as the parsed instruction
/// states it.
struct RawTransfer {
    source: String,
    destination: String,
    mint: Option<String>,
    /// What leaves the source (what the payer signed for).
    amount: U256,
    /// The Token-2022 transfer fee withheld in the destination; it receives `amount - fee`.
    fee: U256,
    /// Whether the instruction may withhold a fee it does not state: a Token-2022
    /// `transfer` or `transferChecked` of a mint with a transfer fee.
    fee_unstated: bool,
}

/// A token account as the token balances describe it.
struct TokenAccount {
    mint: String,
    owner: String,
}

/// Decodes `tx` (asked for by `signature`) at block hash `block_hash`.
pub fn decode_transaction(
    signature: &str,
    tx: &EncodedConfirmedTransactionWithStatusMeta,
    block_hash: &str,
    watched: &Watched,
) -> Result<DecodedTransaction, BadAnswer> {
    let bad = |detail: String| BadAnswer {
        signature: signature.to_string(),
        detail,
    };
    let EncodedTransaction::Json(ui) = &tx.transaction.transaction else {
        return Err(bad("not jsonParsed: ask with encoding jsonParsed".to_string()));
    };
    if ui.signatures.first().map(String::as_str) != Some(signature) {
        return Err(bad(format!(
            "the node answered transaction {:?} instead",
            ui.signatures.first()
        )));
    }
    let UiMessage::Parsed(message) = &ui.message else {
        return Err(bad(
            "the message is not parsed: ask with encoding jsonParsed".to_string()
        ));
    };
    let meta = tx
        .transaction
        .meta
        .as_ref()
        .ok_or_else(|| bad("no status meta: the node cannot tell whether it succeeded".to_string()))?;
    if meta.err.is_some() {
        return Ok(DecodedTransaction {
            failed: true,
            ..DecodedTransaction::default()
        });
    }

    let pre = balances(&meta.pre_token_balances);
    let post = balances(&meta.post_token_balances);
    let key_of = |index: u8| {
        message
            .account_keys
            .get(usize::from(index))
            .map(|k| k.pubkey.clone())
    };
    let mut accounts: HashMap<String, TokenAccount> = HashMap::new();
    for balance in pre.iter().chain(post.iter()) {
        let Some(address) = key_of(balance.account_index) else {
            return Err(bad(format!(
                "a token balance names account index {} of {}",
                balance.account_index,
                message.account_keys.len()
            )));
        };
        if let OptionSerializer::Some(owner) = &balance.owner {
            accounts.insert(
                address,
                TokenAccount {
                    mint: balance.mint.clone(),
                    owner: owner.clone(),
                },
            );
        }
    }

    // Execution order: each top-level instruction, then the instructions it invoked.
    let inner: HashMap<u8, &Vec<UiInstruction>> = match &meta.inner_instructions {
        OptionSerializer::Some(sets) => sets.iter().map(|s| (s.index, &s.instructions)).collect(),
        _ => HashMap::new(),
    };
    let mut ordered = Vec::new();
    for (i, outer) in message.instructions.iter().enumerate() {
        ordered.push(outer);
        if let Some(invoked) = u8::try_from(i).ok().and_then(|i| inner.get(&i)) {
            ordered.extend(invoked.iter());
        }
    }

    let mut raw = Vec::new();
    let mut memo = None;
    let mut touched_otherwise = BTreeSet::new();
    for instruction in ordered {
        let UiInstruction::Parsed(UiParsedInstruction::Parsed(parsed)) = instruction else {
            continue;
        };
        if MEMO_PROGRAMS.contains(&parsed.program_id.as_str()) {
            if let Value::String(text) = &parsed.parsed {
                memo.get_or_insert_with(|| text.clone());
            }
            continue;
        }
        if parsed.program_id != TOKEN_PROGRAM && parsed.program_id != TOKEN_2022_PROGRAM {
            continue;
        }
        let kind = parsed
            .parsed
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let info = parsed.parsed.get("info").cloned().unwrap_or(Value::Null);
        match kind {
            "transfer" | "transferChecked" | "transferCheckedWithFee" => {
                let mut transfer = raw_transfer(kind, &info).map_err(&bad)?;
                transfer.fee_unstated =
                    parsed.program_id == TOKEN_2022_PROGRAM && kind != "transferCheckedWithFee";
                raw.push(transfer);
            }
            _ => {
                // Mints, burns, closes, fee transfers…: their accounts' balances move for
                // other reasons, so the cross-check below skips them.
                if let Value::Object(fields) = &info {
                    touched_otherwise.extend(fields.values().filter_map(Value::as_str).map(str::to_string));
                }
            }
        }
    }

    read_unstated_fees(&mut raw, &pre, &post, &key_of, &touched_otherwise);
    cross_check(&raw, &pre, &post, &key_of, &touched_otherwise).map_err(&bad)?;

    // The fee payer signs first: in an x402 settlement, the facilitator.
    let fee_payer = message.account_keys.first().map(|k| k.pubkey.clone());
    let facilitated = fee_payer
        .as_ref()
        .is_some_and(|f| watched.facilitators.contains(f));
    let mut decoded = DecodedTransaction::default();
    for (index, transfer) in raw.iter().enumerate() {
        let (Some(source), Some(destination)) = (
            accounts.get(&transfer.source),
            accounts.get(&transfer.destination),
        ) else {
            return Err(bad(format!(
                "transfer {} → {} moves between accounts the token balances do not describe",
                transfer.source, transfer.destination
            )));
        };
        if source.mint != destination.mint || transfer.mint.as_ref().is_some_and(|m| *m != source.mint) {
            return Err(bad(format!(
                "transfer {} → {} mixes mints",
                transfer.source, transfer.destination
            )));
        }
        let counted_from = watched.mints.get(&source.mint);
        if counted_from.is_none_or(|from| tx.slot < *from)
            || !(facilitated
                || watched.pay_to.contains(&source.owner)
                || watched.pay_to.contains(&destination.owner))
        {
            continue;
        }
        let position = EventPosition {
            tx_id: signature.to_string(),
            event_index: index as u64,
            block_number: tx.slot,
            block_hash: block_hash.to_string(),
            block_time: tx.block_time,
        };
        let record = TransferRecord {
            position: position.clone(),
            token: source.mint.clone(),
            from: source.owner.clone(),
            to: destination.owner.clone(),
            value: transfer.amount - transfer.fee,
            memo: memo.clone(),
        };
        if (facilitated || watched.pay_to.contains(&destination.owner)) && source.owner != destination.owner {
            decoded.payments.push(PaymentRecord {
                payment_id: signature.to_string(),
                index_in_tx: u32::try_from(index).map_err(|_| bad("more than 2^32 transfers".to_string()))?,
                transfer: position,
                payer: source.owner.clone(),
                pay_to: destination.owner.clone(),
                amount: transfer.amount - transfer.fee,
                asset: source.mint.clone(),
                method: PaymentMethod::Spl,
                nonce: None,
                max_amount: None,
                memo: memo.clone(),
                facilitator: fee_payer.clone(),
                fee_amount: (!transfer.fee.is_zero()).then_some(transfer.fee),
            });
        }
        decoded.transfers.push(record);
    }
    Ok(decoded)
}

fn balances(field: &OptionSerializer<Vec<UiTransactionTokenBalance>>) -> Vec<UiTransactionTokenBalance> {
    match field {
        OptionSerializer::Some(list) => list.clone(),
        _ => Vec::new(),
    }
}

fn string_field(info: &Value, key: &str) -> Result<String, String> {
    info.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("a parsed transfer has no `{key}`"))
}

fn parse_amount(text: &str) -> Result<U256, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("amount `{text}` is not a decimal integer"));
    }
    U256::from_str_radix(text, 10).map_err(|_| format!("amount `{text}` is out of range"))
}

fn raw_transfer(kind: &str, info: &Value) -> Result<RawTransfer, String> {
    let token_amount = |field: &str| -> Result<String, String> {
        info.get(field)
            .and_then(|a| a.get("amount"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("a parsed {kind} has no `{field}.amount`"))
    };
    let (mint, amount, fee) = match kind {
        "transferChecked" => (
            Some(string_field(info, "mint")?),
            token_amount("tokenAmount")?,
            None,
        ),
        "transferCheckedWithFee" => (
            Some(string_field(info, "mint")?),
            token_amount("tokenAmount")?,
            Some(token_amount("feeAmount")?),
        ),
        _ => (None, string_field(info, "amount")?, None),
    };
    let amount = parse_amount(&amount)?;
    let fee = fee.as_deref().map(parse_amount).transpose()?.unwrap_or_default();
    if fee > amount {
        return Err(format!(
            "a {kind} withholds a fee of {fee}, more than its amount {amount}"
        ));
    }
    Ok(RawTransfer {
        source: string_field(info, "source")?,
        destination: string_field(info, "destination")?,
        mint,
        amount,
        fee,
        fee_unstated: false,
    })
}

/// The balance of token `account` in `list` (pre or post token balances); zero when the
/// list does not name it (an account created or closed by the transaction).
fn balance_in(
    list: &[UiTransactionTokenBalance],
    account: &str,
    key_of: &impl Fn(u8) -> Option<String>,
) -> Result<U256, String> {
    match list
        .iter()
        .find(|b| key_of(b.account_index).as_deref() == Some(account))
    {
        Some(b) => parse_amount(&b.ui_token_amount.amount),
        None => Ok(U256::ZERO),
    }
}

/// Token-2022 withholds a mint's transfer fee on every transfer, but only
/// `transferCheckedWithFee` states it. The fee of a Token-2022 `transfer` or
/// `transferChecked` is what its destination did not receive, read from the destination's
/// balances where no other transfer of the transaction moves that account (when several
/// do, their fees cannot be told apart, and the cross-check refuses the answer).
fn read_unstated_fees(
    raw: &mut [RawTransfer],
    pre: &[UiTransactionTokenBalance],
    post: &[UiTransactionTokenBalance],
    key_of: &impl Fn(u8) -> Option<String>,
    touched_otherwise: &BTreeSet<String>,
) {
    for i in 0..raw.len() {
        let destination = raw[i].destination.clone();
        let alone = raw
            .iter()
            .enumerate()
            .all(|(j, t)| j == i || (t.destination != destination && t.source != destination));
        if !raw[i].fee_unstated || !alone || touched_otherwise.contains(&destination) {
            continue;
        }
        let (Ok(before), Ok(after)) = (
            balance_in(pre, &destination, key_of),
            balance_in(post, &destination, key_of),
        ) else {
            continue;
        };
        if let Some(received) = after.checked_sub(before)
            && received < raw[i].amount
        {
            raw[i].fee = raw[i].amount - received;
        }
    }
}

/// Checks that every token account the transfers move, and nothing else moves, changed
/// by exactly what the transfers say, per the pre/post token balances.
fn cross_check(
    transfers: &[RawTransfer],
    pre: &[UiTransactionTokenBalance],
    post: &[UiTransactionTokenBalance],
    key_of: &impl Fn(u8) -> Option<String>,
    touched_otherwise: &BTreeSet<String>,
) -> Result<(), String> {
    let mut credited: HashMap<&str, U256> = HashMap::new();
    let mut debited: HashMap<&str, U256> = HashMap::new();
    for t in transfers {
        *debited.entry(&t.source).or_default() += t.amount;
        *credited.entry(&t.destination).or_default() += t.amount - t.fee;
    }
    let amount_in = |list: &[UiTransactionTokenBalance], account: &str| balance_in(list, account, key_of);
    let accounts: BTreeSet<&str> = credited.keys().chain(debited.keys()).copied().collect();
    for account in accounts {
        if touched_otherwise.contains(account) {
            continue;
        }
        let before = amount_in(pre, account)?;
        let after = amount_in(post, account)?;
        let expected_after = (before + credited.get(account).copied().unwrap_or_default())
            .checked_sub(debited.get(account).copied().unwrap_or_default());
        if expected_after != Some(after) {
            return Err(format!(
                "token account {account} went from {before} to {after}, which its transfers do not explain"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAYER: &str = "7xLk17EQQ5KLDLDe44wCmupJKJjTGd8hs3eSVVhCx932";
    const SELLER: &str = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    const PAYER_ATA: &str = "3emsAVdmGKERbHjmGfQ6oZ1e35dkf5iYcS6U4CPKFVaa";
    const SELLER_ATA: &str = "5Ue1Xx9fpMDpVBFcqo6jz5h1bk9qBQNG1LsjtQ5jRkAX";
    const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";
    const SIGNATURE: &str =
        "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW";

    fn watched() -> Watched {
        Watched {
            mints: [(USDC.to_string(), 0)].into(),
            pay_to: [SELLER.to_string()].into(),
            facilitators: BTreeSet::new(),
        }
    }

    fn balance(index: u8, owner: &str, amount: u64) -> Value {
        serde_json::json!({
            "accountIndex": index, "mint": USDC, "owner": owner,
            "programId": TOKEN_PROGRAM,
            "uiTokenAmount": {"amount": amount.to_string(), "decimals": 6,
                              "uiAmount": null, "uiAmountString": "0"}
        })
    }

    /// A transaction in the shape of a `getTransaction` jsonParsed answer: a compute
    /// budget instruction, then `instruction` (top level) and `inner` (invoked by it).
    fn transaction(instruction: Value, inner: Vec<Value>, post_seller: u64, err: Value) -> Value {
        let key = |k: &str, signer: bool| serde_json::json!({"pubkey": k, "signer": signer, "writable": true, "source": "transaction"});
        serde_json::json!({
            "slot": 42, "blockTime": 1_700_000_000,
            "transaction": {
                "signatures": [SIGNATURE],
                "message": {
                    "accountKeys": [key(PAYER, true), key(PAYER_ATA, false), key(SELLER_ATA, false), key(USDC, false)],
                    "recentBlockhash": "11111111111111111111111111111111",
                    "instructions": [
                        {"programId": "ComputeBudget111111111111111111111111111111", "accounts": [], "data": "3", "stackHeight": null},
                        instruction
                    ]
                }
            },
            "meta": {
                "err": err, "status": {"Ok": null}, "fee": 5000,
                "preBalances": [1, 1, 1, 1], "postBalances": [1, 1, 1, 1],
                "innerInstructions": [{"index": 1, "instructions": inner}],
                "preTokenBalances": [balance(1, PAYER, 5_000_000), balance(2, SELLER, 0)],
                "postTokenBalances": [balance(1, PAYER, 5_000_000 - post_seller), balance(2, SELLER, post_seller)]
            }
        })
    }

    fn transfer_checked(amount: u64) -> Value {
        serde_json::json!({
            "program": "spl-token", "programId": TOKEN_PROGRAM, "stackHeight": null,
            "parsed": {"type": "transferChecked", "info": {
                "source": PAYER_ATA, "destination": SELLER_ATA, "mint": USDC, "authority": PAYER,
                "tokenAmount": {"amount": amount.to_string(), "decimals": 6, "uiAmount": 1.0, "uiAmountString": "1"}}}
        })
    }

    fn decode(json: Value) -> Result<DecodedTransaction, BadAnswer> {
        let tx: EncodedConfirmedTransactionWithStatusMeta = serde_json::from_value(json).unwrap();
        decode_transaction(SIGNATURE, &tx, "blockhash", &watched())
    }

    #[test]
    fn a_transfer_checked_to_pay_to_is_a_payment() {
        let decoded = decode(transaction(
            transfer_checked(1_000_000),
            vec![],
            1_000_000,
            Value::Null,
        ))
        .unwrap();
        assert_eq!(decoded.payments.len(), 1);
        let payment = &decoded.payments[0];
        assert_eq!(
            (
                payment.payer.as_str(),
                payment.pay_to.as_str(),
                payment.asset.as_str()
            ),
            (PAYER, SELLER, USDC)
        );
        assert_eq!(payment.amount, U256::from(1_000_000u64));
        assert_eq!(payment.transfer.block_number, 42);
        assert_eq!(payment.transfer.block_time, Some(1_700_000_000));
        assert_eq!(decoded.transfers.len(), 1);
    }

    #[test]
    fn an_inner_plain_transfer_takes_its_mint_from_the_balances() {
        let program = serde_json::json!({"programId": "Prog1111111111111111111111111111111111111111", "accounts": [], "data": "", "stackHeight": null});
        let inner = serde_json::json!({
            "program": "spl-token", "programId": TOKEN_PROGRAM, "stackHeight": 2,
            "parsed": {"type": "transfer", "info": {"source": PAYER_ATA, "destination": SELLER_ATA, "authority": PAYER, "amount": "250"}}
        });
        let decoded = decode(transaction(program, vec![inner], 250, Value::Null)).unwrap();
        assert_eq!(decoded.payments[0].amount, U256::from(250u64));
        assert_eq!(decoded.payments[0].asset, USDC);
    }

    #[test]
    fn a_failed_transaction_counts_for_nothing() {
        let failed = transaction(
            transfer_checked(1_000_000),
            vec![],
            1_000_000,
            serde_json::json!({"InstructionError": [1, {"Custom": 1}]}),
        );
        let decoded = decode(failed).unwrap();
        assert!(decoded.failed);
        assert!(decoded.payments.is_empty() && decoded.transfers.is_empty());
    }

    #[test]
    fn balances_that_disagree_are_a_bad_answer() {
        let lying = transaction(transfer_checked(1_000_000), vec![], 999_999, Value::Null);
        let error = decode(lying).unwrap_err();
        assert!(error.detail.contains("do not explain"), "{error}");
    }

    #[test]
    fn another_transaction_or_unwatched_mint_is_refused_or_skipped() {
        let tx: EncodedConfirmedTransactionWithStatusMeta =
            serde_json::from_value(transaction(transfer_checked(5), vec![], 5, Value::Null)).unwrap();
        assert!(decode_transaction("other", &tx, "h", &watched()).is_err());
        let unwatched = Watched {
            mints: [("So11111111111111111111111111111111111111112".to_string(), 0)].into(),
            ..watched()
        };
        let decoded = decode_transaction(SIGNATURE, &tx, "h", &unwatched).unwrap();
        assert!(decoded.payments.is_empty());
    }

    #[test]
    fn memo_travels_with_the_transfers() {
        let mut json = transaction(transfer_checked(7), vec![], 7, Value::Null);
        json["transaction"]["message"]["instructions"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"program": "spl-memo", "programId": MEMO_PROGRAMS[0], "parsed": "refund of X", "stackHeight": null}));
        let decoded = decode(json).unwrap();
        assert_eq!(decoded.transfers[0].memo.as_deref(), Some("refund of X"));
    }

    /// Two transfers in one transaction: to another wallet, then to the seller.
    fn two_sellers(second_seller: &str) -> Value {
        let other_ata = "8VzycTf7JAB9GaUPpWyB4Ryvrwm5CQFJsdG46ffVnN5K";
        let mut json = transaction(transfer_checked(1_000), vec![], 1_000, Value::Null);
        let first = serde_json::json!({
            "program": "spl-token", "programId": TOKEN_PROGRAM, "stackHeight": null,
            "parsed": {"type": "transfer", "info": {"source": PAYER_ATA, "destination": other_ata, "authority": PAYER, "amount": "40"}}
        });
        json["transaction"]["message"]["instructions"]
            .as_array_mut()
            .unwrap()
            .insert(1, first);
        json["transaction"]["message"]["accountKeys"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"pubkey": other_ata, "signer": false, "writable": true, "source": "transaction"}));
        json["meta"]["preTokenBalances"]
            .as_array_mut()
            .unwrap()
            .push(balance(4, second_seller, 0));
        json["meta"]["postTokenBalances"] = serde_json::json!([
            balance(1, PAYER, 5_000_000 - 1_040),
            balance(2, SELLER, 1_000),
            balance(4, second_seller, 40)
        ]);
        json
    }

    #[test]
    fn payments_are_numbered_by_instruction_whoever_is_watched() {
        let other = "2wKupLR9q6wXYppw8Gr2NvWxKBUqm4PPJKkQfoxHDBg4";
        let tx: EncodedConfirmedTransactionWithStatusMeta =
            serde_json::from_value(two_sellers(other)).unwrap();
        let seller_only = decode_transaction(SIGNATURE, &tx, "h", &watched()).unwrap();
        let both = Watched {
            pay_to: [SELLER.to_string(), other.to_string()].into(),
            ..watched()
        };
        let both = decode_transaction(SIGNATURE, &tx, "h", &both).unwrap();
        let numbers = |d: &DecodedTransaction| {
            d.payments
                .iter()
                .map(|p| (p.index_in_tx, p.pay_to.clone(), p.amount))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            numbers(&seller_only),
            vec![(1, SELLER.to_string(), U256::from(1_000u64))]
        );
        assert_eq!(
            numbers(&both),
            vec![
                (0, other.to_string(), U256::from(40u64)),
                (1, SELLER.to_string(), U256::from(1_000u64))
            ]
        );
        assert_eq!(both.payments[1].transfer.event_index, 1);
    }

    #[test]
    fn a_transfer_with_fee_pays_the_seller_what_it_received() {
        let with_fee = serde_json::json!({
            "program": "spl-token-2022", "programId": TOKEN_2022_PROGRAM, "stackHeight": null,
            "parsed": {"type": "transferCheckedWithFee", "info": {
                "source": PAYER_ATA, "destination": SELLER_ATA, "mint": USDC, "authority": PAYER,
                "tokenAmount": {"amount": "1000", "decimals": 6, "uiAmount": 0.001, "uiAmountString": "0.001"},
                "feeAmount": {"amount": "10", "decimals": 6, "uiAmount": 0.00001, "uiAmountString": "0.00001"}}}
        });
        // The payer's account loses 1000, the seller's gains 990 (10 withheld as the fee).
        let mut json = transaction(with_fee.clone(), vec![], 990, Value::Null);
        json["meta"]["postTokenBalances"][0] = balance(1, PAYER, 5_000_000 - 1_000);
        let decoded = decode(json).unwrap();
        assert_eq!(decoded.payments[0].amount, U256::from(990u64));
        assert_eq!(decoded.transfers[0].value, U256::from(990u64));
        // Balances that do not account for the fee are a bad answer.
        let lying = transaction(with_fee, vec![], 1_000, Value::Null);
        assert!(decode(lying).unwrap_err().detail.contains("do not explain"));
    }

    #[test]
    fn a_token_2022_transfer_that_states_no_fee_has_its_fee_read_from_the_balances() {
        let checked = |program: &str| {
            serde_json::json!({
                "program": "spl-token", "programId": program, "stackHeight": null,
                "parsed": {"type": "transferChecked", "info": {
                    "source": PAYER_ATA, "destination": SELLER_ATA, "mint": USDC, "authority": PAYER,
                    "tokenAmount": {"amount": "1000", "decimals": 6, "uiAmount": 0.001, "uiAmountString": "0.001"}}}
            })
        };
        // Token-2022 withheld 10 of the 1000 in the seller's account.
        let mut json = transaction(checked(TOKEN_2022_PROGRAM), vec![], 990, Value::Null);
        json["meta"]["postTokenBalances"][0] = balance(1, PAYER, 5_000_000 - 1_000);
        let decoded = decode(json.clone()).unwrap();
        assert_eq!(decoded.payments[0].amount, U256::from(990u64));
        assert_eq!(decoded.payments[0].fee_amount, Some(U256::from(10u64)));
        // SPL Token withholds no fee: the same balances are a bad answer there.
        json["transaction"]["message"]["instructions"][1] = checked(TOKEN_PROGRAM);
        assert!(decode(json).unwrap_err().detail.contains("do not explain"));
        // No fee withheld: none answered.
        let whole = transaction(checked(TOKEN_2022_PROGRAM), vec![], 1_000, Value::Null);
        assert_eq!(decode(whole).unwrap().payments[0].fee_amount, None);
    }

    #[test]
    fn a_mint_counts_from_its_own_start_slot() {
        let tx: EncodedConfirmedTransactionWithStatusMeta =
            serde_json::from_value(transaction(transfer_checked(5), vec![], 5, Value::Null)).unwrap();
        let later = Watched {
            mints: [(USDC.to_string(), 43)].into(),
            ..watched()
        };
        assert!(
            decode_transaction(SIGNATURE, &tx, "h", &later)
                .unwrap()
                .payments
                .is_empty()
        );
        let from_here = Watched {
            mints: [(USDC.to_string(), 42)].into(),
            ..watched()
        };
        assert_eq!(
            decode_transaction(SIGNATURE, &tx, "h", &from_here)
                .unwrap()
                .payments
                .len(),
            1
        );
    }
}
