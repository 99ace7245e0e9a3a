//! A Solana payment's best available evidence. Solana has no receipt trie, so nothing
//! proves a payment against a block hash alone: paywatch serves the node's own
//! `getTransaction` answer at `finalized` (the transaction exactly as signed, with its
//! status meta) and the cluster's finalized slot, after checking that the answer is the
//! stored payment's transaction, at its slot, and succeeded. A reader checks it against a
//! node it trusts; the payer's signature in it can be checked by anyone.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use base64::Engine;
use paywatch_chain::request_backoff;
use paywatch_core::config::ChainsConfig;
use paywatch_core::network::{Namespace, NetworkId};
use serde_json::Value;
use solana_commitment_config::CommitmentConfig;
use solana_signature::Signature;
use solana_transaction_status_client_types::TransactionConfirmationStatus;

use crate::rpc::{RpcFault, SolanaRpc};

/// What the evidence is, as its answers name it: a node's word, not a proof.
pub const NODE_ATTESTED_TRANSACTION: &str = "node_attested_transaction";

/// Why no evidence could be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The network is not a Solana network of `chains.toml`, so there is no RPC to ask.
    #[error("{0} is not a watched Solana network: no RPC to ask")]
    NotWatched(String),
    /// The RPC failed after its retries.
    #[error("the RPC of {network} failed: {fault}")]
    Rpc {
        /// The network asked.
        network: String,
        /// What went wrong.
        fault: RpcFault,
    },
    /// The node does not (or no longer) serve the transaction at `finalized`, or its answer
    /// is not the stored payment's transaction.
    #[error("no evidence from {network}: {detail}")]
    NoEvidence {
        /// The network asked.
        network: String,
        /// Why.
        detail: String,
    },
}

/// What a node answered about a payment's transaction, checked against the payment.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionEvidence {
    /// The JSON-RPC `result` of `getTransaction` (encoding `base64`, commitment `finalized`)
    /// exactly as the node sent it.
    pub transaction: Value,
    /// The signature's status (`getSignatureStatuses` with history): `finalized`.
    pub confirmation_status: String,
    /// The cluster's finalized slot when the evidence was read (at or above the payment's).
    pub finalized_slot: u64,
}

/// The RPCs of the configured Solana networks, for the evidence of payments.
#[derive(Clone, Default)]
pub struct SolanaCalls {
    networks: Arc<HashMap<NetworkId, Arc<SolanaRpc>>>,
}

impl SolanaCalls {
    /// The Solana networks of `chains` (a network without an RPC URL is left out).
    pub fn new(chains: &ChainsConfig) -> Self {
        let networks = chains
            .networks
            .iter()
            .filter(|n| n.id.namespace() == Namespace::Solana)
            .filter_map(|n| {
                let rpc = SolanaRpc::for_network(n)?;
                Some((n.id.clone(), Arc::new(rpc.with_backoff(request_backoff()))))
            })
            .collect();
        Self {
            networks: Arc::new(networks),
        }
    }

    /// The evidence of the transaction `signature`, which the store holds at `slot`: read
    /// at `finalized`, checked to be that transaction, at that slot, successful.
    pub async fn transaction_evidence(
        &self,
        network: &NetworkId,
        signature: &str,
        slot: u64,
    ) -> Result<TransactionEvidence, EvidenceError> {
        let name = network.to_string();
        let rpc = self
            .networks
            .get(network)
            .ok_or_else(|| EvidenceError::NotWatched(name.clone()))?;
        let rpc_failed = |fault| EvidenceError::Rpc {
            network: name.clone(),
            fault,
        };
        let no_evidence = |detail: String| EvidenceError::NoEvidence {
            network: name.clone(),
            detail,
        };
        let parsed = Signature::from_str(signature)
            .map_err(|_| no_evidence(format!("the payment id `{signature}` is not a Solana signature")))?;
        let (answer, statuses, finalized_slot) = tokio::try_join!(
            rpc.finalized_transaction_answer(&parsed),
            rpc.statuses(std::slice::from_ref(&parsed)),
            rpc.slot(CommitmentConfig::finalized()),
        )
        .map_err(rpc_failed)?;
        check_transaction_answer(&answer, signature, slot).map_err(no_evidence)?;
        let status = statuses.into_iter().next().flatten();
        match status.as_ref().and_then(|s| s.confirmation_status.as_ref()) {
            Some(TransactionConfirmationStatus::Finalized) => {}
            other => {
                return Err(no_evidence(format!(
                    "the signature's status is {other:?}, not finalized"
                )));
            }
        }
        if finalized_slot < slot {
            return Err(no_evidence(format!(
                "the node's finalized slot {finalized_slot} is below the payment's slot {slot}: it is behind; retry later"
            )));
        }
        Ok(TransactionEvidence {
            transaction: answer,
            confirmation_status: "finalized".to_string(),
            finalized_slot,
        })
    }
}

/// Checks that a `getTransaction` result is the successful transaction `signature` at
/// `slot`: its first signature (the fee payer's, which is the transaction's id), its slot
/// and its `meta.err`. The transaction may be in `base64` (the signed bytes) or in
/// `json`/`jsonParsed` (a `signatures` list). Says what differs otherwise.
pub fn check_transaction_answer(answer: &Value, signature: &str, slot: u64) -> Result<(), String> {
    if answer.is_null() {
        return Err("the node has no finalized transaction with this signature".to_string());
    }
    let answered_slot = answer["slot"].as_u64().ok_or("the answer has no slot")?;
    if answered_slot != slot {
        return Err(format!(
            "the node has the transaction at slot {answered_slot}, the store at slot {slot}"
        ));
    }
    let first = first_signature(&answer["transaction"])?;
    if first != signature {
        return Err(format!("the node answered transaction {first}, not {signature}"));
    }
    match &answer["meta"] {
        Value::Object(meta) => match meta.get("err") {
            None | Some(Value::Null) => Ok(()),
            Some(err) => Err(format!("the transaction failed: {err}")),
        },
        _ => Err("the answer has no status meta".to_string()),
    }
}

/// The first signature of a `getTransaction` result's `transaction`, base58.
fn first_signature(transaction: &Value) -> Result<String, String> {
    match transaction {
        Value::Array(encoded) if encoded.get(1).and_then(Value::as_str) == Some("base64") => {
            let bytes = encoded[0]
                .as_str()
                .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
                .ok_or("the transaction is not base64")?;
            // A compact-u16 count of signatures, then the signatures, 64 bytes each.
            let count = bytes.first().copied().ok_or("the transaction is empty")?;
            let first = bytes
                .get(1..65)
                .filter(|_| count > 0)
                .ok_or("the transaction has no signature")?;
            Signature::try_from(first)
                .map(|s| s.to_string())
                .map_err(|_| "the transaction's first signature is malformed".to_string())
        }
        Value::Object(decoded) => decoded
            .get("signatures")
            .and_then(|s| s.get(0))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "the transaction has no signature".to_string()),
        _ => Err("the transaction is neither base64 nor decoded JSON".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real mainnet `getTransaction` answer (jsonParsed) of a USDC transfer, recorded by
    /// the Solana Explorer's repository (tests/fixtures/explorer/PROVENANCE.md).
    const SIGNATURE: &str =
        "4LXpF3MCdp69iFmD27Sn812UNpqFPHM4qXH7Y12E964p9GHXvwMe1XEmyasogVT2N4XEctdQQLf1sHY6Gvsa5sFX";

    fn recorded() -> Value {
        let path = format!(
            "{}/tests/fixtures/explorer/mainnet-single-usdc-{SIGNATURE}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(path).expect("the recorded answer");
        serde_json::from_str::<Value>(&text).expect("JSON")["result"].clone()
    }

    #[test]
    fn a_recorded_mainnet_answer_is_its_transaction_at_its_slot() {
        let answer = recorded();
        let slot = answer["slot"].as_u64().unwrap();
        assert_eq!(check_transaction_answer(&answer, SIGNATURE, slot), Ok(()));
    }

    #[test]
    fn another_slot_another_transaction_or_a_failure_is_refused() {
        let answer = recorded();
        let slot = answer["slot"].as_u64().unwrap();
        let other =
            "2kHbPUGzehenUXQbBfAVZGcuTrSUVDMEyU2aGcjFbuUAJkG28CyQPCGZF68u369MU7WHMvJboyioqyihvtR75nLn";
        let refused = check_transaction_answer(&answer, other, slot).unwrap_err();
        assert!(refused.contains(SIGNATURE), "{refused}");
        let refused = check_transaction_answer(&answer, SIGNATURE, slot + 1).unwrap_err();
        assert!(refused.contains("at slot"), "{refused}");
        let mut failed = answer;
        failed["meta"]["err"] = serde_json::json!({"InstructionError": [0, "Custom"]});
        let refused = check_transaction_answer(&failed, SIGNATURE, slot).unwrap_err();
        assert!(refused.contains("failed"), "{refused}");
        let refused = check_transaction_answer(&Value::Null, SIGNATURE, slot).unwrap_err();
        assert!(refused.contains("no finalized transaction"), "{refused}");
    }
}
