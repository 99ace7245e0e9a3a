//! What no log carries — the nonce and signed maximum of Permit2 settlements, what an
//! ERC-7710 redemption executed — read from the settling call: the transaction's input
//! when it calls the proxy or manager, otherwise its call trace (`debug_traceTransaction`
//! with the `callTracer`); the callers check it against the facts the logs gave.

use alloy::primitives::{Address, U256};
use alloy::rpc::types::trace::geth::CallFrame;
use alloy::sol;
use alloy::sol_types::{SolCall, SolValue};
use paywatch_core::PaymentMethod;
use paywatch_core::ids::lower_hex;
use paywatch_core::records::Execution;

use crate::decode::Delegation;

sol! {
    /// Permit2's `ISignatureTransfer.TokenPermissions`.
    struct TokenPermissions { address token; uint256 amount; }
    /// Permit2's `ISignatureTransfer.PermitTransferFrom`.
    struct PermitTransferFrom { TokenPermissions permitted; uint256 nonce; uint256 deadline; }
    /// The exact proxy's witness.
    struct ExactWitness { address to; uint256 validAfter; }
    /// The upto proxy's witness.
    struct UptoWitness { address to; address facilitator; uint256 validAfter; }
    /// The proxies' EIP-2612 permit parameters.
    struct Eip2612Permit { uint256 value; uint256 deadline; bytes32 r; bytes32 s; uint8 v; }

    /// `x402ExactPermit2Proxy`'s settling functions.
    interface ExactProxy {
        function settle(PermitTransferFrom permit, address owner, ExactWitness witness, bytes signature);
        function settleWithPermit(Eip2612Permit permit2612, PermitTransferFrom permit, address owner, ExactWitness witness, bytes signature);
    }

    /// An ERC-7579 execution (batch mode's element).
    struct ModularExecution { address target; uint256 value; bytes callData; }

    /// ERC-7710's delegation manager.
    interface DelegationManager {
        function redeemDelegations(bytes[] _permissionContexts, bytes32[] _modes, bytes[] _executionCallDatas);
    }

    /// ERC-20's `transfer`.
    interface Erc20 {
        function transfer(address to, uint256 amount) returns (bool);
    }

    /// `x402UptoPermit2Proxy`'s settling functions.
    interface UptoProxy {
        function settle(PermitTransferFrom permit, uint256 amount, address owner, UptoWitness witness, bytes signature);
        function settleWithPermit(Eip2612Permit permit2612, PermitTransferFrom permit, uint256 amount, address owner, UptoWitness witness, bytes signature);
    }
}

/// What one settling call of a proxy says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleCall {
    /// The proxy called.
    pub proxy: Address,
    /// The token the permit names.
    pub token: Address,
    /// The payer.
    pub owner: Address,
    /// The recipient the payer signed (the witness's `to`).
    pub to: Address,
    /// What the call settles: the permitted amount (exact) or the `amount` argument (upto).
    pub amount: U256,
    /// Upto only: the permitted amount, the maximum the payer signed.
    pub max_amount: Option<U256>,
    /// The Permit2 nonce.
    pub nonce: U256,
}

/// `input` as a settling call of a proxy of `method`; `None` when it is not one.
pub fn decode_settle_call(proxy: Address, method: PaymentMethod, input: &[u8]) -> Option<SettleCall> {
    let call = |permit: &PermitTransferFrom, owner: Address, to: Address, amount: Option<U256>| SettleCall {
        proxy,
        token: permit.permitted.token,
        owner,
        to,
        amount: amount.unwrap_or(permit.permitted.amount),
        max_amount: amount.map(|_| permit.permitted.amount),
        nonce: permit.nonce,
    };
    match method {
        PaymentMethod::Permit2 => {
            if let Ok(c) = ExactProxy::settleCall::abi_decode(input) {
                Some(call(&c.permit, c.owner, c.witness.to, None))
            } else if let Ok(c) = ExactProxy::settleWithPermitCall::abi_decode(input) {
                Some(call(&c.permit, c.owner, c.witness.to, None))
            } else {
                None
            }
        }
        PaymentMethod::Upto => {
            if let Ok(c) = UptoProxy::settleCall::abi_decode(input) {
                Some(call(&c.permit, c.owner, c.witness.to, Some(c.amount)))
            } else if let Ok(c) = UptoProxy::settleWithPermitCall::abi_decode(input) {
                Some(call(&c.permit, c.owner, c.witness.to, Some(c.amount)))
            } else {
                None
            }
        }
        PaymentMethod::Eip3009 | PaymentMethod::Erc7710 | PaymentMethod::AuthCapture | PaymentMethod::Spl => {
            None
        }
    }
}

/// The settling calls of `proxies` that took effect in a transaction's call trace, in
/// execution order.
pub fn settle_calls_in(trace: &CallFrame, proxies: &[(Address, PaymentMethod)]) -> Vec<SettleCall> {
    calls_in(trace, |to, input| {
        let (proxy, method) = proxies.iter().find(|(address, _)| *address == to)?;
        decode_settle_call(*proxy, *method, input)
    })
}

/// The redeeming calls of `managers` that took effect in a transaction's call trace, in
/// execution order.
pub fn redeem_calls_in(trace: &CallFrame, managers: &[Address]) -> Vec<RedeemCall> {
    calls_in(trace, |to, input| {
        managers
            .contains(&to)
            .then(|| decode_redeem_call(to, input))
            .flatten()
    })
}

/// The calls `decode` recognises (by callee and input) that took effect in a call trace,
/// in execution order: `CALL` frames, leaving out every frame that reverted or sits under
/// one that did (its logs are gone too).
fn calls_in<T>(trace: &CallFrame, decode: impl Fn(Address, &[u8]) -> Option<T>) -> Vec<T> {
    let mut calls = Vec::new();
    let mut stack = vec![trace];
    while let Some(frame) = stack.pop() {
        if frame.error.is_some() || frame.revert_reason.is_some() {
            continue;
        }
        if frame.typ.eq_ignore_ascii_case("CALL")
            && let Some(to) = frame.to
            && let Some(call) = decode(to, &frame.input)
        {
            calls.push(call);
        }
        stack.extend(frame.calls.iter().rev());
    }
    calls
}

/// One `redeemDelegations` call of a delegation manager: what each redemption that logs
/// (each non-empty permission context, in order) executed, by whose account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeemCall {
    /// The manager called.
    pub manager: Address,
    /// Each redemption's root delegator and execution.
    pub redemptions: Vec<(Address, Execution)>,
}

/// `input` as a `redeemDelegations` call to `manager`; `None` when it is not one (or a
/// permission context does not decode, which the manager would have refused).
pub fn decode_redeem_call(manager: Address, input: &[u8]) -> Option<RedeemCall> {
    let call = DelegationManager::redeemDelegationsCall::abi_decode(input).ok()?;
    if call._permissionContexts.len() != call._modes.len()
        || call._permissionContexts.len() != call._executionCallDatas.len()
    {
        return None;
    }
    let mut redemptions = Vec::new();
    for ((context, mode), execution) in call
        ._permissionContexts
        .iter()
        .zip(&call._modes)
        .zip(&call._executionCallDatas)
    {
        let chain = <Vec<Delegation>>::abi_decode(context).ok()?;
        // An empty context is the caller executing for itself: no delegation, no log.
        let Some(root) = chain.last() else {
            continue;
        };
        redemptions.push((root.delegator, executed(mode.0[0], execution)));
    }
    Some(RedeemCall { manager, redemptions })
}

/// What an ERC-7579 execution of call type `call_type` did: one ERC-20 `transfer` without
/// value (single mode, `target ‖ value ‖ callData`; or a batch of one), or something else.
fn executed(call_type: u8, execution: &[u8]) -> Execution {
    const SINGLE: u8 = 0x00;
    const BATCH: u8 = 0x01;
    let one = match call_type {
        SINGLE if execution.len() >= 52 => Some((
            Address::from_slice(&execution[..20]),
            U256::from_be_slice(&execution[20..52]),
            &execution[52..],
        )),
        BATCH => match <Vec<ModularExecution>>::abi_decode(execution) {
            Ok(batch) if batch.len() == 1 => {
                let only = &batch[0];
                return transfer_of(only.target, only.value, &only.callData);
            }
            _ => None,
        },
        _ => None,
    };
    match one {
        Some((target, value, call_data)) => transfer_of(target, value, call_data),
        None => Execution::Other,
    }
}

/// A call to `target` as an ERC-20 `transfer`, when it is one without value.
fn transfer_of(target: Address, value: U256, call_data: &[u8]) -> Execution {
    match Erc20::transferCall::abi_decode(call_data) {
        Ok(call) if value.is_zero() => Execution::Transfer {
            token: lower_hex(target),
            to: lower_hex(call.to),
            amount: call.amount,
        },
        _ => Execution::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::json_abi::JsonAbi;
    use alloy::primitives::{Bytes, address};

    const PROXY: Address = address!("4020a4f3b7b90cca423b9fabcc0ce57c6c240002");
    const TOKEN: Address = address!("833589fcd6edb6e08f4c7c32d4f71b54bda02913");
    const PAYER: Address = address!("1111111111111111111111111111111111111111");
    const SELLER: Address = address!("2222222222222222222222222222222222222222");

    /// The selectors of a compiled proxy's ABI (`tests/contracts/*.json`: the test
    /// stand-ins; `tests/permit2_payments.rs` checks these against the x402 SDK's ABIs).
    fn compiled_selectors(artifact: &str) -> Vec<[u8; 4]> {
        #[derive(serde::Deserialize)]
        struct Artifact {
            abi: JsonAbi,
        }
        let artifact: Artifact = serde_json::from_str(artifact).unwrap();
        let mut selectors: Vec<[u8; 4]> = artifact
            .abi
            .functions()
            .filter(|f| f.name.starts_with("settle"))
            .map(|f| f.selector().0)
            .collect();
        selectors.sort_unstable();
        selectors
    }

    #[test]
    fn the_settling_functions_are_those_of_x402s_proxies() {
        let mut exact = vec![
            ExactProxy::settleCall::SELECTOR,
            ExactProxy::settleWithPermitCall::SELECTOR,
        ];
        exact.sort_unstable();
        assert_eq!(
            compiled_selectors(include_str!(
                "../../../tests/contracts/X402ExactPermit2Proxy.json"
            )),
            exact
        );
        let mut upto = vec![
            UptoProxy::settleCall::SELECTOR,
            UptoProxy::settleWithPermitCall::SELECTOR,
        ];
        upto.sort_unstable();
        assert_eq!(
            compiled_selectors(include_str!("../../../tests/contracts/X402UptoPermit2Proxy.json")),
            upto
        );
    }

    fn upto_settle(amount: u64) -> Bytes {
        UptoProxy::settleCall {
            permit: PermitTransferFrom {
                permitted: TokenPermissions {
                    token: TOKEN,
                    amount: U256::from(1_000u64),
                },
                nonce: U256::from(77u64),
                deadline: U256::from(2_000_000_000u64),
            },
            amount: U256::from(amount),
            owner: PAYER,
            witness: UptoWitness {
                to: SELLER,
                facilitator: SELLER,
                validAfter: U256::ZERO,
            },
            signature: Bytes::from_static(&[1; 65]),
        }
        .abi_encode()
        .into()
    }

    #[test]
    fn decodes_an_upto_settlement_with_its_maximum() {
        let call = decode_settle_call(PROXY, PaymentMethod::Upto, &upto_settle(250)).unwrap();
        assert_eq!(
            call,
            SettleCall {
                proxy: PROXY,
                token: TOKEN,
                owner: PAYER,
                to: SELLER,
                amount: U256::from(250u64),
                max_amount: Some(U256::from(1_000u64)),
                nonce: U256::from(77u64),
            }
        );
        assert_eq!(
            decode_settle_call(PROXY, PaymentMethod::Permit2, &upto_settle(250)),
            None
        );
        assert_eq!(
            decode_settle_call(PROXY, PaymentMethod::Upto, &[0xde, 0xad]),
            None
        );
    }

    #[test]
    fn a_trace_yields_the_settling_calls_that_took_effect_in_order() {
        let frame = |to: Address, input: Bytes, calls: Vec<CallFrame>| CallFrame {
            typ: "CALL".to_string(),
            to: Some(to),
            input,
            calls,
            ..CallFrame::default()
        };
        let mut reverted = frame(SELLER, Bytes::new(), vec![frame(PROXY, upto_settle(3), vec![])]);
        reverted.error = Some("execution reverted".to_string());
        let mut delegated = frame(PROXY, upto_settle(4), vec![]);
        delegated.typ = "DELEGATECALL".to_string();
        let trace = frame(
            SELLER,
            Bytes::new(),
            vec![
                frame(PROXY, upto_settle(1), vec![frame(TOKEN, Bytes::new(), vec![])]),
                reverted,
                delegated,
                frame(SELLER, Bytes::new(), vec![frame(PROXY, upto_settle(2), vec![])]),
            ],
        );
        let amounts: Vec<U256> = settle_calls_in(&trace, &[(PROXY, PaymentMethod::Upto)])
            .into_iter()
            .map(|c| c.amount)
            .collect();
        assert_eq!(amounts, [U256::from(1u64), U256::from(2u64)]);
    }

    #[test]
    fn a_redeeming_call_names_each_redemptions_delegator_and_transfer() {
        use crate::decode::ROOT_AUTHORITY;
        const MANAGER: Address = address!("db9b1e94b5b69df7e401ddbede43491141047db3");
        let delegation = |delegator: Address| Delegation {
            delegate: SELLER,
            delegator,
            authority: ROOT_AUTHORITY,
            caveats: Vec::new(),
            salt: U256::ZERO,
            signature: Bytes::new(),
        };
        let transfer = Erc20::transferCall {
            to: SELLER,
            amount: U256::from(250u64),
        }
        .abi_encode();
        let single = |value: u64, data: &[u8]| -> Bytes {
            [TOKEN.as_slice(), &U256::from(value).to_be_bytes::<32>(), data]
                .concat()
                .into()
        };
        let batch = |n: usize| -> Bytes {
            vec![
                ModularExecution {
                    target: TOKEN,
                    value: U256::ZERO,
                    callData: transfer.clone().into(),
                };
                n
            ]
            .abi_encode()
            .into()
        };
        let mode = |call_type: u8| {
            let mut mode = [0u8; 32];
            mode[0] = call_type;
            alloy::primitives::B256::from(mode)
        };
        let context = |chain: Vec<Delegation>| -> Bytes { chain.abi_encode().into() };
        let input = DelegationManager::redeemDelegationsCall {
            _permissionContexts: vec![
                context(vec![delegation(SELLER), delegation(PAYER)]),
                context(Vec::new()),
                context(vec![delegation(PAYER)]),
                context(vec![delegation(PAYER)]),
                context(vec![delegation(PAYER)]),
                context(vec![delegation(PAYER)]),
            ],
            _modes: vec![mode(0), mode(0), mode(1), mode(1), mode(0), mode(0xff)],
            _executionCallDatas: vec![
                single(0, &transfer),
                single(0, &transfer),
                batch(1),
                batch(2),
                single(1, &transfer),
                single(0, &transfer),
            ],
        }
        .abi_encode();
        let call = decode_redeem_call(MANAGER, &input).unwrap();
        let paid = Execution::Transfer {
            token: lower_hex(TOKEN),
            to: lower_hex(SELLER),
            amount: U256::from(250u64),
        };
        // The empty context (the caller for itself) logs nothing and is left out; the
        // root delegator is the chain's last; a batch of one transfer is one, of two is
        // not; value sent along, or a delegate call, is not a transfer.
        assert_eq!(
            call.redemptions,
            [
                (PAYER, paid.clone()),
                (PAYER, paid),
                (PAYER, Execution::Other),
                (PAYER, Execution::Other),
                (PAYER, Execution::Other),
            ]
        );
        assert_eq!(decode_redeem_call(MANAGER, &upto_settle(1)), None);
    }
}
