//! x402 payments settled through ERC-7710 delegations on a real anvil node: a stand-in for
//! MetaMask's `DelegationManager` (same ABI, events and behaviour, checked against the
//! delegation framework's source) at its canonical address, delegator accounts whose
//! owners sign delegations with real EIP-712 signatures, and redemptions sent as an x402
//! facilitator sends them — read by the EVM worker and answered by the HTTP API, on SQLite
//! and on Postgres. (The x402 SDK, `@x402/evm` 2.27, ships no ERC-7710 client to drive.)

use alloy::primitives::{Address, B256, keccak256};
use alloy::providers::Provider;
use alloy::sol_types::{SolCall, SolEvent};
use paywatch_core::PaymentMethod;
use paywatch_core::ids::lower_hex;
use paywatch_core::method::DELEGATION_MANAGER;
use paywatch_evm::proof::{proven_facts, verify_receipt_proof};
use paywatch_query::ProofView;
use paywatch_tests::batch::Batcher;
use paywatch_tests::chain::Chain;
use paywatch_tests::delegation::{self, DelegationKit, ROOT_AUTHORITY, Redemption};
use paywatch_tests::harness::{ApiServer, Indexed, LocalNetwork, sync, worker};
use paywatch_tests::on_both_stores;
use paywatch_tests::permit2::send_call;
use paywatch_tests::proxy::{Faults, RpcProxy};
use paywatch_tests::stores::{Kind, TestDb};
use paywatch_tests::token::Token;
use paywatch_tests::tools::repo_root;

const OWNER: usize = 1;
const SELLER: usize = 2;
const FACILITATOR: usize = 3;
const RELAY: usize = 4;
const OTHER_SELLER: usize = 5;

/// The delegation framework's source, as excerpted in `tests/fixtures/delegation-framework/`
/// (with its commit and licence): the code lines, comments left out.
fn framework_source() -> String {
    std::fs::read_to_string(
        repo_root().join("tests/fixtures/delegation-framework/DelegationManager.interface.sol"),
    )
    .expect("the delegation-framework excerpt")
}

/// The canonical type list of struct `name` in `code`, nested structs as tuples.
fn tuple_of(code: &str, name: &str) -> String {
    let body = code
        .split(&format!("struct {name} {{"))
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .unwrap_or_else(|| panic!("struct {name}"));
    let types: Vec<String> = body
        .split(';')
        .filter_map(|field| field.split_whitespace().next())
        .map(|ty| match ty.strip_suffix("[]") {
            Some(inner) if inner.chars().next().is_some_and(char::is_uppercase) => {
                format!("{}[]", tuple_of(code, inner))
            }
            _ => ty.to_string(),
        })
        .collect();
    format!("({})", types.join(","))
}

/// paywatch's decoder, its default manager and the test stand-in agree with the delegation
/// framework's source: the `RedeemedDelegation` event, `redeemDelegations`, the EIP-712
/// type a delegator signs, and the v1.3.0 `DelegationManager` address.
#[test]
fn the_delegation_manager_is_metamasks() {
    use alloy::json_abi::JsonAbi;
    use paywatch_evm::decode::RedeemedDelegation;
    use paywatch_evm::settle_calls::DelegationManager;
    let source = framework_source();
    let code: String = source
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            !line.starts_with("//") && !line.starts_with("/*") && !line.starts_with('*')
        })
        .collect::<Vec<_>>()
        .join(" ");
    let delegation = tuple_of(&code, "Delegation");
    let event = format!("RedeemedDelegation(address,address,{delegation})");
    assert_eq!(keccak256(&event), RedeemedDelegation::SIGNATURE_HASH, "{event}");
    assert!(code.contains(
        "event RedeemedDelegation(address indexed rootDelegator, address indexed redeemer, Delegation delegation);"
    ));
    // ERC-7579's `ModeCode` is a `bytes32`.
    let params: Vec<String> = code
        .split("function redeemDelegations(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("redeemDelegations")
        .split(',')
        .map(|param| {
            param
                .split_whitespace()
                .next()
                .expect("a type")
                .replace("ModeCode", "bytes32")
        })
        .collect();
    let function = format!("redeemDelegations({})", params.join(","));
    assert_eq!(
        &keccak256(&function)[..4],
        DelegationManager::redeemDelegationsCall::SELECTOR,
        "{function}"
    );
    let typehash = code
        .split("DELEGATION_TYPEHASH = keccak256(")
        .nth(1)
        .and_then(|rest| rest.split('"').nth(1))
        .expect("DELEGATION_TYPEHASH's string");
    assert_eq!(
        DelegationKit::signed_type(),
        typehash,
        "the EIP-712 type delegators sign"
    );
    let deployed: Address = source
        .lines()
        .find_map(|line| line.strip_prefix("// DelegationManager: "))
        .and_then(|address| address.trim().parse().ok())
        .expect("the v1.3.0 DelegationManager address");
    assert_eq!(deployed, DELEGATION_MANAGER);
    assert_eq!(deployed, delegation::DELEGATION_MANAGER);
    // The stand-in has the same event and function.
    let artifact: serde_json::Value =
        serde_json::from_str(include_str!("contracts/DelegationManager.json")).expect("artifact");
    let abi: JsonAbi = serde_json::from_value(artifact["abi"].clone()).expect("an ABI");
    assert_eq!(
        abi.event("RedeemedDelegation").expect("the event")[0].selector(),
        RedeemedDelegation::SIGNATURE_HASH
    );
    assert_eq!(
        abi.function("redeemDelegations").expect("the function")[0].selector(),
        DelegationManager::redeemDelegationsCall::SELECTOR
    );
}

/// The chain of the ERC-7710 tests: the token, a delegator account owned by `OWNER` and
/// funded, a delegation from it to the facilitator, and the manager in place.
struct Delegated {
    chain: Chain,
    token: Token,
    kit: DelegationKit,
    account: Address,
    to_facilitator: delegation::Delegation,
}

impl Delegated {
    async fn start() -> Self {
        let chain = Chain::start().await;
        let token = Token::deploy(&chain).await;
        let kit = DelegationKit::install(&chain).await;
        let account = kit.account(&chain, chain.account(OWNER)).await;
        token.mint(account, 1_000_000).await;
        let to_facilitator = kit
            .delegate(
                &chain.signer(OWNER),
                account,
                chain.account(FACILITATOR),
                ROOT_AUTHORITY,
                1,
            )
            .await;
        Self {
            chain,
            token,
            kit,
            account,
            to_facilitator,
        }
    }

    /// A root delegation of the account, signed by its owner, to `delegate`.
    async fn delegate_to(&self, delegate: Address, salt: u64) -> delegation::Delegation {
        self.kit
            .delegate(
                &self.chain.signer(OWNER),
                self.account,
                delegate,
                ROOT_AUTHORITY,
                salt,
            )
            .await
    }

    fn pays(&self, chain: Vec<delegation::Delegation>, to: usize, amount: u64) -> Redemption {
        Redemption {
            chain,
            token: self.token.address,
            to: self.chain.account(to),
            amount,
        }
    }

    async fn redeem(&self, redemptions: &[Redemption]) -> B256 {
        let facilitator = self.chain.account(FACILITATOR);
        send_call(&self.chain, facilitator, DelegationKit::redeem(redemptions))
            .await
            .transaction_hash
    }
}

fn path(chain_id: u64, tx: B256) -> String {
    format!("/v1/payments/eip155:{chain_id}/{}", lower_hex(tx))
}

/// What the API answers for each `?index=` of a transaction that is a payment.
async fn payments_of(indexed: &Indexed, chain_id: u64, tx: B256) -> Vec<(u64, String, String, String)> {
    let mut found = Vec::new();
    for index in 0..6 {
        let (status, body) = indexed
            .api
            .get(&format!("{}?index={index}", path(chain_id, tx)))
            .await;
        if status == 200 {
            assert_eq!(body["method"], "erc7710", "{body}");
            assert!(body["nonce"].is_null(), "{body}");
            assert!(
                body["nonce_unavailable"]
                    .as_str()
                    .is_some_and(|why| why.contains("ERC-7710")),
                "{body}"
            );
            found.push((
                index,
                body["payer"].as_str().unwrap().to_string(),
                body["pay_to"].as_str().unwrap().to_string(),
                body["amount"].as_str().unwrap().to_string(),
            ));
        } else {
            assert_eq!(
                (status, body["reason"].as_str()),
                (404, Some("payment_not_found")),
                "{body}"
            );
        }
    }
    found
}

/// Redemptions of delegations are payments by the delegator's account, numbered by the
/// transaction's redemption logs; a redemption moving another token, the account's own
/// transfer and a redemption through a contract are each told apart.
async fn redemptions_are_payments(kind: Kind) {
    let d = Delegated::start().await;
    let chain = &d.chain;
    let owner = chain.signer(OWNER);
    let seller = lower_hex(chain.account(SELLER));
    let account = lower_hex(d.account);

    // One redemption, as x402's facilitator settles an `erc7710` payment.
    let single = d
        .redeem(&[d.pays(vec![d.to_facilitator.clone()], SELLER, 10_000)])
        .await;
    // Two in one call: a direct delegation, then a chain (the account delegated to an
    // EOA, which delegated on to the facilitator): its two logs, root last, number it 2.
    let to_relay = d
        .kit
        .delegate(&owner, d.account, chain.account(RELAY), ROOT_AUTHORITY, 2)
        .await;
    let relayed = d
        .kit
        .delegate(
            &chain.signer(RELAY),
            chain.account(RELAY),
            chain.account(FACILITATOR),
            DelegationKit::hash(&to_relay),
            3,
        )
        .await;
    let batch = d
        .redeem(&[
            d.pays(vec![d.to_facilitator.clone()], OTHER_SELLER, 3_000),
            d.pays(vec![relayed, to_relay], SELLER, 4_000),
        ])
        .await;
    // A redemption moving a token paywatch does not watch, and the account's owner
    // sending the watched token directly: neither is a payment.
    let other = Token::deploy(chain).await;
    other.mint(d.account, 1_000).await;
    let elsewhere = d
        .redeem(&[Redemption {
            token: other.address,
            ..d.pays(vec![d.to_facilitator.clone()], SELLER, 500)
        }])
        .await;
    let own = send_call(
        chain,
        chain.account(OWNER),
        DelegationKit::account_transfer(d.account, d.token.address, chain.account(SELLER), 777),
    )
    .await
    .transaction_hash;
    // A facilitator's batching contract redeems (it is the delegate): read from the trace.
    let batcher = Batcher::deploy(chain).await;
    let to_batcher = d
        .kit
        .delegate(&owner, d.account, batcher.address(), ROOT_AUTHORITY, 4)
        .await;
    let batched = batcher
        .settle_calls(
            vec![DelegationKit::redeem(&[d.pays(vec![to_batcher], SELLER, 2_500)])],
            chain.account(FACILITATOR),
        )
        .await
        .transaction_hash;
    chain.mine(2).await;

    let network = LocalNetwork::new(chain.chain_id(), &chain.endpoint(), &[d.token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let api = &indexed.api;
    let id = chain.chain_id();

    let (status, body) = api.get(&path(id, single)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["method"].as_str(),
            body["payer"].as_str(),
            body["pay_to"].as_str(),
            body["amount"].as_str(),
            body["asset"].as_str(),
            body["payment_state"].as_str(),
        ),
        (
            Some("erc7710"),
            Some(account.as_str()),
            Some(seller.as_str()),
            Some("10000"),
            Some(lower_hex(d.token.address).as_str()),
            Some("paid")
        ),
        "{body}"
    );
    assert!(body["nonce"].is_null(), "{body}");

    let (status, body) = api.get(&path(id, batch)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("ambiguous_payment")),
        "{body}"
    );
    let other_seller = lower_hex(chain.account(OTHER_SELLER));
    let text = |s: &str| s.to_string();
    assert_eq!(
        payments_of(&indexed, id, batch).await,
        [
            (0, account.clone(), other_seller, text("3000")),
            (2, account.clone(), seller.clone(), text("4000")),
        ]
    );
    for not_a_payment in [elsewhere, own] {
        let (status, body) = api.get(&path(id, not_a_payment)).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (404, Some("payment_not_found")),
            "{body}"
        );
    }
    assert_eq!(
        payments_of(&indexed, id, batched).await,
        [(0, account.clone(), seller.clone(), text("2500"))]
    );

    // Each is provable from its block hash alone: its Transfer and its redemption's root
    // log, the delegation manager as the settling contract.
    for (tx, index) in [(single, 0), (batch, 2), (batched, 0)] {
        let (status, body) = api.get(&format!("{}/proof?index={index}", path(id, tx))).await;
        assert_eq!(status, 200, "{body}");
        let view: ProofView = serde_json::from_value(body).expect("a proof");
        let receipt = chain
            .provider
            .get_transaction_receipt(tx)
            .await
            .unwrap()
            .expect("mined");
        let proven = verify_receipt_proof(&view.proof, receipt.block_hash.expect("a block hash"))
            .expect("the proof holds");
        let positions: Vec<usize> = view.payment_logs.iter().map(|p| *p as usize).collect();
        let facts = proven_facts(&proven, PaymentMethod::Erc7710, &positions).expect("the facts");
        assert_eq!(facts, view.facts);
        assert_eq!(
            (facts.payer, facts.settled_by),
            (d.account, Some(DELEGATION_MANAGER))
        );
    }

    // Finance lists and sums them by method.
    let (status, page) = api.get("/v1/payments?network=local&method=erc7710").await;
    assert_eq!(status, 200, "{page}");
    let mut amounts: Vec<&str> = page["payments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["amount"].as_str().unwrap())
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, ["10000", "2500", "3000", "4000"]);
    let (status, totals) = api.get("/v1/totals?network=local&group_by=method").await;
    assert_eq!(status, 200, "{totals}");
    assert_eq!(totals["groups"][0]["key"], "erc7710", "{totals}");
    assert_eq!(totals["groups"][0]["final_amount"], "19500", "{totals}");
}
on_both_stores!(redemptions, redemptions_are_payments);

/// What a redemption paid and its number do not depend on what paywatch was asked to
/// read: with only one seller's transfers read (`pay_to`), and again behind a node that
/// serves no call traces, the same payment has the same number and facts.
async fn numbering_does_not_depend_on_what_is_read(kind: Kind) {
    let d = Delegated::start().await;
    let chain = &d.chain;
    let batch = d
        .redeem(&[
            d.pays(vec![d.to_facilitator.clone()], OTHER_SELLER, 3_000),
            d.pays(vec![d.to_facilitator.clone()], SELLER, 4_000),
        ])
        .await;
    let batcher = Batcher::deploy(chain).await;
    let to_batcher = d.delegate_to(batcher.address(), 9).await;
    let batched = batcher
        .settle_calls(
            vec![DelegationKit::redeem(&[
                d.pays(vec![to_batcher.clone()], OTHER_SELLER, 100),
                d.pays(vec![to_batcher], SELLER, 200),
            ])],
            chain.account(FACILITATOR),
        )
        .await
        .transaction_hash;
    chain.mine(2).await;
    let id = chain.chain_id();
    let (account, seller) = (lower_hex(d.account), lower_hex(chain.account(SELLER)));
    let text = |s: &str| s.to_string();

    let mut only_seller = LocalNetwork::new(id, &chain.endpoint(), &[d.token.address]);
    only_seller.pay_to = vec![chain.account(SELLER)];
    let indexed = Indexed::new(kind, &only_seller).await;
    assert_eq!(
        payments_of(&indexed, id, batch).await,
        [(1, account.clone(), seller.clone(), text("4000"))]
    );
    assert_eq!(
        payments_of(&indexed, id, batched).await,
        [(1, account.clone(), seller.clone(), text("200"))]
    );

    let untraced = RpcProxy::start(
        &chain.endpoint(),
        Faults {
            unserved_methods: vec!["debug_traceTransaction"],
            ..Faults::default()
        },
    )
    .await;
    let network = LocalNetwork::new(id, &untraced.url, &[d.token.address]);
    let indexed = Indexed::new(kind, &network).await;
    let other_seller = lower_hex(chain.account(OTHER_SELLER));
    for tx in [batch, batched] {
        let found = payments_of(&indexed, id, tx).await;
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].0, &found[0].2), (0, &other_seller));
        assert_eq!((found[1].0, &found[1].2), (1, &seller));
    }
}
on_both_stores!(numbering, numbering_does_not_depend_on_what_is_read);

/// A manager added to the configuration later never renumbers or rewrites a stored
/// payment: a transaction settling an EIP-3009 payment and then a redemption is read first
/// without the manager (the EIP-3009 payment is number 0), then, on the same store, with
/// it; the stored payment keeps its number and facts, a later redemption is indexed, and a
/// store that watched the manager from the start numbers the same transaction the same way
/// (the redemption 1, after the transaction's one authorization).
async fn a_manager_added_later_never_renumbers_a_payment(kind: Kind) {
    let d = Delegated::start().await;
    let chain = &d.chain;
    let payer = chain.signer(RELAY);
    d.token.mint(payer.address(), 1_000).await;
    let batcher = Batcher::deploy(chain).await;
    let to_batcher = d.delegate_to(batcher.address(), 7).await;
    let authorization = d
        .token
        .authorize(&payer, chain.account(SELLER), 600, B256::repeat_byte(0x7a))
        .await;
    let mixed = batcher
        .settle_calls(
            vec![
                (d.token.address, d.token.settle_calldata(&authorization)),
                DelegationKit::redeem(&[d.pays(vec![to_batcher], SELLER, 2_500)]),
            ],
            chain.account(FACILITATOR),
        )
        .await
        .transaction_hash;
    chain.mine(2).await;
    let id = chain.chain_id();
    let at = |tx: B256, index: u32| format!("{}?index={index}", path(id, tx));
    let facts = |body: &serde_json::Value| {
        (
            body["method"].clone(),
            body["payer"].clone(),
            body["pay_to"].clone(),
            body["amount"].clone(),
            body["nonce"].clone(),
        )
    };

    let db = TestDb::create(kind).await;
    let store = db.open().await;
    let mut narrow = LocalNetwork::new(id, &chain.endpoint(), &[d.token.address]);
    narrow.delegation_managers = Some(Vec::new());
    let narrow = narrow.chains();
    sync(&mut worker(&narrow, &store).await).await;
    let api = ApiServer::start(&store, &narrow).await;
    let (status, before) = api.get(&at(mixed, 0)).await;
    assert_eq!(
        (status, &before["method"]),
        (200, &serde_json::json!("eip3009")),
        "{before}"
    );
    drop(api);

    let wide = LocalNetwork::new(id, &chain.endpoint(), &[d.token.address]).chains();
    let later = d
        .redeem(&[d.pays(vec![d.to_facilitator.clone()], SELLER, 900)])
        .await;
    chain.mine(2).await;
    sync(&mut worker(&wide, &store).await).await;
    let api = ApiServer::start(&store, &wide).await;
    let (status, after) = api.get(&at(mixed, 0)).await;
    assert_eq!(status, 200, "{after}");
    assert_eq!(facts(&after), facts(&before), "the stored payment is unchanged");
    let (status, body) = api.get(&at(later, 0)).await;
    assert_eq!(
        (status, &body["method"], &body["amount"]),
        (200, &serde_json::json!("erc7710"), &serde_json::json!("900")),
        "{body}"
    );

    let from_the_start = Indexed::new(
        kind,
        &LocalNetwork::new(id, &chain.endpoint(), &[d.token.address]),
    )
    .await;
    let (_, first) = from_the_start.api.get(&at(mixed, 0)).await;
    assert_eq!(facts(&first), facts(&before));
    let (status, redeemed) = from_the_start.api.get(&at(mixed, 1)).await;
    assert_eq!(status, 200, "{redeemed}");
    assert_eq!(
        (&redeemed["method"], &redeemed["payer"], &redeemed["amount"]),
        (
            &serde_json::json!("erc7710"),
            &serde_json::json!(lower_hex(d.account)),
            &serde_json::json!("2500")
        ),
        "{redeemed}"
    );
}
on_both_stores!(
    manager_added_later,
    a_manager_added_later_never_renumbers_a_payment
);
