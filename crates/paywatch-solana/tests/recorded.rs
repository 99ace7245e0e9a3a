//! The decoder over real recorded `getTransaction` answers (`jsonParsed`) from mainnet
//! (and a mainnet fork, and devnet), kept by the Solana Explorer as test fixtures; see
//! `fixtures/explorer/PROVENANCE.md`. Each expected fact is read again from the answer
//! itself: the instruction's own fields and the token balances the node reported.

use alloy_primitives::U256;
use paywatch_solana::decode::{DecodedTransaction, Watched, decode_transaction};
use serde_json::Value;
use solana_transaction_status_client_types::EncodedConfirmedTransactionWithStatusMeta;

const USDC: &str = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v";

const SINGLE_USDC: &str = include_str!(
    "fixtures/explorer/mainnet-single-usdc-4LXpF3MCdp69iFmD27Sn812UNpqFPHM4qXH7Y12E964p9GHXvwMe1XEmyasogVT2N4XEctdQQLf1sHY6Gvsa5sFX.json"
);
const FORK_FOUR_CPI: &str = include_str!(
    "fixtures/explorer/surfpool-multi-transfer-3p9fzShSPEC5ocZ52UqQBszEKrr6m1w5QwCFrChwQBgQAKbAG1dgMraQuXKtZhSvg6sSHZzaQvDjhh8wKCWL6f9D.json"
);
const SOL_ONLY: [&str; 4] = [
    include_str!(
        "fixtures/explorer/mainnet-single-sol-2kHbPUGzehenUXQbBfAVZGcuTrSUVDMEyU2aGcjFbuUAJkG28CyQPCGZF68u369MU7WHMvJboyioqyihvtR75nLn.json"
    ),
    include_str!(
        "fixtures/explorer/mainnet-multi-sol-2msqMqeUTTZhgite3PvWSLJhZJ3m4v4UMbDAcXymTPpXwKM5PcKfZFfxn4izZ2UTZmngYJeWSf1ztdD6kdeDkdbr.json"
    ),
    include_str!(
        "fixtures/explorer/devnet-single-sol-memo-2EhgNdNDaH2ArsoEChEFYMnNzu6qerQpqFP5auGQHXUDEz5CH4mGF1t3ga4tKsVrio3SSPDxSv8HYmURQu1TPTkJ.json"
    ),
    include_str!(
        "fixtures/explorer/devnet-multi-sol-memo-5PQcQh7w63DzgaSaovT5nLgyfciWm6fkyeBHwADoaVuesk8KAuwEK1v9gnruPfmoN4HseWMnPuZy5xjfxLazx5wt.json"
    ),
];

/// The answer's `result`, as JSON and as the RPC client's type.
fn answer(text: &str) -> (Value, EncodedConfirmedTransactionWithStatusMeta) {
    let json: Value = serde_json::from_str(text).expect("a recorded JSON-RPC answer");
    let result = json["result"].clone();
    let tx = serde_json::from_value(result.clone()).expect("a getTransaction result");
    (result, tx)
}

fn signature(result: &Value) -> String {
    result["transaction"]["signatures"][0]
        .as_str()
        .unwrap()
        .to_string()
}

fn watching(mints: &[&str], pay_to: &[&str]) -> Watched {
    Watched {
        mints: mints.iter().map(|m| (m.to_string(), 0)).collect(),
        pay_to: pay_to.iter().map(|w| w.to_string()).collect(),
        facilitators: Default::default(),
    }
}

fn decode(
    result: &Value,
    tx: &EncodedConfirmedTransactionWithStatusMeta,
    watched: &Watched,
) -> DecodedTransaction {
    decode_transaction(&signature(result), tx, "recorded", watched).expect("a real answer decodes")
}

/// (owner, amount) of a token balance entry for `account_index`, from `list`.
fn balance_of(list: &Value, account_index: usize) -> Option<(String, U256)> {
    list.as_array()?.iter().find_map(|b| {
        (b["accountIndex"].as_u64()? as usize == account_index).then(|| {
            (
                b["owner"].as_str().unwrap().to_string(),
                b["uiTokenAmount"]["amount"].as_str().unwrap().parse().unwrap(),
            )
        })
    })
}

fn account_index(result: &Value, address: &str) -> usize {
    result["transaction"]["message"]["accountKeys"]
        .as_array()
        .unwrap()
        .iter()
        .position(|k| k["pubkey"] == address)
        .unwrap()
}

/// Every parsed `transferChecked` of the answer, top-level then inner, as the node wrote
/// its `info`: (source, destination, amount).
fn transfers_checked(result: &Value) -> Vec<(String, String, U256)> {
    let top = result["transaction"]["message"]["instructions"]
        .as_array()
        .unwrap()
        .iter();
    let inner = result["meta"]["innerInstructions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["instructions"].as_array().unwrap().iter());
    top.chain(inner)
        .filter(|ix| ix["parsed"]["type"] == "transferChecked")
        .map(|ix| {
            let info = &ix["parsed"]["info"];
            (
                info["source"].as_str().unwrap().to_string(),
                info["destination"].as_str().unwrap().to_string(),
                info["tokenAmount"]["amount"].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_mainnet_usdc_transfer_checked_in_a_durable_nonce_transaction_is_one_payment() {
    let (result, tx) = answer(SINGLE_USDC);
    assert_eq!(
        signature(&result),
        "4LXpF3MCdp69iFmD27Sn812UNpqFPHM4qXH7Y12E964p9GHXvwMe1XEmyasogVT2N4XEctdQQLf1sHY6Gvsa5sFX"
    );
    assert_eq!(
        result["transaction"]["message"]["instructions"][0]["parsed"]["type"], "advanceNonce",
        "a durable-nonce transaction"
    );
    let [(source, destination, amount)] = transfers_checked(&result).try_into().unwrap();
    let meta = &result["meta"];
    let (payer, before) = balance_of(&meta["preTokenBalances"], account_index(&result, &source)).unwrap();
    let (seller, received_before) =
        balance_of(&meta["preTokenBalances"], account_index(&result, &destination)).unwrap();
    let (_, received_after) =
        balance_of(&meta["postTokenBalances"], account_index(&result, &destination)).unwrap();
    let (_, after) = balance_of(&meta["postTokenBalances"], account_index(&result, &source)).unwrap();
    assert_eq!(
        (before - after, received_after - received_before),
        (amount, amount)
    );

    let decoded = decode(&result, &tx, &watching(&[USDC], &[&seller]));
    assert_eq!(decoded.payments.len(), 1);
    let payment = &decoded.payments[0];
    assert_eq!(
        (
            payment.payer.as_str(),
            payment.pay_to.as_str(),
            payment.amount,
            payment.asset.as_str()
        ),
        (payer.as_str(), seller.as_str(), amount, USDC)
    );
    assert_eq!(amount, U256::from(3_800_000u64), "3.8 USDC");
    assert_eq!(payment.index_in_tx, 0, "the transaction's first token transfer");
    assert_eq!(payment.transfer.block_number, result["slot"].as_u64().unwrap());
    assert_eq!(payment.transfer.block_time, result["blockTime"].as_i64());

    // Watching the payer instead: its transfer out is kept (for refunds), no payment.
    let decoded = decode(&result, &tx, &watching(&[USDC], &[&payer]));
    assert_eq!((decoded.transfers.len(), decoded.payments.len()), (1, 0));
    // Another mint watched: nothing.
    let decoded = decode(
        &result,
        &tx,
        &watching(&["Es9vMFrzaCERmJfrF4H2FYD4KCoNkY11McCe8BenwNYB"], &[&seller]),
    );
    assert_eq!(decoded, DecodedTransaction::default());
}

#[test]
fn four_cpi_transfers_to_four_owners_are_numbered_by_instruction_whoever_is_watched() {
    let (result, tx) = answer(FORK_FOUR_CPI);
    let transfers = transfers_checked(&result);
    assert_eq!(transfers.len(), 4);
    let meta = &result["meta"];
    let owner = |account: &str| {
        balance_of(&meta["preTokenBalances"], account_index(&result, account))
            .unwrap()
            .0
    };
    let owners: Vec<String> = transfers.iter().map(|(_, to, _)| owner(to)).collect();
    let payer = owner(&transfers[0].0);
    assert!(
        result["meta"]["innerInstructions"][0]["instructions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ix| ix["parsed"]["type"] == "closeAccount"),
        "the source account is closed in the same transaction"
    );

    let all: Vec<&str> = owners.iter().map(String::as_str).collect();
    let decoded = decode(&result, &tx, &watching(&[USDC], &all));
    let facts: Vec<(u32, String, String, U256)> = decoded
        .payments
        .iter()
        .map(|p| (p.index_in_tx, p.payer.clone(), p.pay_to.clone(), p.amount))
        .collect();
    let expected: Vec<(u32, String, String, U256)> = transfers
        .iter()
        .zip(&owners)
        .enumerate()
        .map(|(i, ((_, _, amount), to))| (i as u32, payer.clone(), to.clone(), *amount))
        .collect();
    assert_eq!(facts, expected);

    // Each owner alone, and the last two together, find their payments under the same
    // numbers: numbering is the transaction's, not the configuration's.
    for (index, seller) in owners.iter().enumerate() {
        let decoded = decode(&result, &tx, &watching(&[USDC], &[seller]));
        let numbers: Vec<u32> = decoded.payments.iter().map(|p| p.index_in_tx).collect();
        assert_eq!(numbers, vec![index as u32], "{seller}");
    }
    let decoded = decode(&result, &tx, &watching(&[USDC], &[&owners[2], &owners[3]]));
    let numbers: Vec<u32> = decoded.payments.iter().map(|p| p.index_in_tx).collect();
    assert_eq!(numbers, vec![2, 3]);
}

#[test]
fn sol_only_transactions_hold_no_token_transfer() {
    for text in SOL_ONLY {
        let (result, tx) = answer(text);
        let signers: Vec<&str> = result["transaction"]["message"]["accountKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["pubkey"].as_str().unwrap())
            .collect();
        let decoded = decode(&result, &tx, &watching(&[USDC], &signers));
        assert_eq!(decoded, DecodedTransaction::default(), "{}", signature(&result));
    }
}

/// A local JSON-RPC endpoint that answers `getTransaction` with the recorded answers, each
/// `result` as recorded, and refuses every other method: the recordings served as a node
/// would serve them, nothing made up. It checks that each request asks as the recordings
/// were made (`jsonParsed`, versioned transactions).
async fn serve_recordings(recordings: &[&str]) -> String {
    use axum::Json;
    use axum::routing::post;

    let answers: std::collections::HashMap<String, Value> = recordings
        .iter()
        .map(|text| {
            let (result, _) = answer(text);
            (signature(&result), result)
        })
        .collect();
    let answers = std::sync::Arc::new(answers);
    let app = axum::Router::new().route(
        "/",
        post(move |Json(request): Json<Value>| {
            let answers = answers.clone();
            async move {
                let id = request["id"].clone();
                if request["method"] != "getTransaction" {
                    return Json(serde_json::json!({
                        "jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "only getTransaction is recorded"}
                    }));
                }
                let config = &request["params"][1];
                assert_eq!(config["encoding"], "jsonParsed", "{request}");
                assert_eq!(config["maxSupportedTransactionVersion"], 0, "{request}");
                let result = request["params"][0]
                    .as_str()
                    .and_then(|signature| answers.get(signature))
                    .cloned()
                    .unwrap_or(Value::Null);
                Json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// The recorded answers, served over local HTTP and read by paywatch's own RPC client
/// (`SolanaRpc::transaction`), arrive as recorded and decode to the same payments as the
/// answers read from the files.
#[tokio::test]
async fn recorded_answers_served_over_http_read_as_recorded() {
    use paywatch_solana::rpc::SolanaRpc;
    use std::str::FromStr;

    let recordings: Vec<&str> = [SINGLE_USDC, FORK_FOUR_CPI].into_iter().chain(SOL_ONLY).collect();
    let url = serve_recordings(&recordings).await;
    let rpc = SolanaRpc::new(
        "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
        &[url.parse().unwrap()],
        std::time::Duration::from_secs(5),
    )
    .expect("an RPC endpoint")
    .with_backoff(backon::ExponentialBuilder::default().with_max_times(1));
    let mut payments = 0;
    for text in &recordings {
        let (result, recorded) = answer(text);
        let signature = solana_signature::Signature::from_str(&signature(&result)).unwrap();
        let served = rpc.transaction(&signature).await.expect("the recorded answer");
        assert_eq!(
            serde_json::to_value(&served).unwrap(),
            serde_json::to_value(&recorded).unwrap(),
            "{signature}"
        );
        // Every token owner of the answer watched: whatever it holds is found either way.
        let owners: Vec<String> = ["preTokenBalances", "postTokenBalances"]
            .iter()
            .flat_map(|list| result["meta"][list].as_array().cloned().unwrap_or_default())
            .filter_map(|b| b["owner"].as_str().map(str::to_string))
            .collect();
        let owners: Vec<&str> = owners.iter().map(String::as_str).collect();
        let watched = watching(&[USDC], &owners);
        let decoded = decode(&result, &served, &watched);
        assert_eq!(decoded, decode(&result, &recorded, &watched));
        payments += decoded.payments.len();
    }
    assert_eq!(payments, 5, "the durable-nonce payment and the four CPI payments");
    // A signature the recordings do not hold: the node's `null`, refused, not decoded.
    let unknown = solana_signature::Signature::from([7u8; 64]);
    assert!(rpc.transaction(&unknown).await.is_err());
}
