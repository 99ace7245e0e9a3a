//! A real local Solana validator: agave's `solana-test-validator` (with the SPL Token,
//! Token-2022, Associated Token Account and Memo programs in its genesis), built once in
//! release mode from `tests/solana-validator/` into a fixed target dir and run as one child
//! process per test binary, plus the SPL operations tests perform on it with real keypairs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::Duration;

use paywatch_solana::decode::{TOKEN_2022_PROGRAM, TOKEN_PROGRAM};
use solana_commitment_config::CommitmentConfig;
use solana_instruction::Instruction;
use solana_keypair::Keypair;
use solana_pubkey::Pubkey;
use solana_rpc_client::nonblocking::rpc_client::RpcClient;
use solana_rpc_client_api::config::RpcSendTransactionConfig;
use solana_signature::Signature;
use solana_signer::Signer;
use solana_transaction::Transaction;
use spl_associated_token_account_interface::address::get_associated_token_address_with_program_id;
use spl_associated_token_account_interface::instruction::create_associated_token_account;
use spl_token_2022_interface::extension::ExtensionType;
use spl_token_2022_interface::extension::transfer_fee::instruction::{
    initialize_transfer_fee_config, transfer_checked_with_fee,
};
use spl_token_2022_interface::instruction as token_ix;
use spl_token_2022_interface::state::Mint;

use crate::tools::repo_root;

/// The SPL Memo program (v2).
const MEMO_PROGRAM: &str = "MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr";
/// Bytes of a mint account without extensions (both token programs).
const MINT_LEN: usize = 82;

/// Path of the validator binary: `$PAYWATCH_TEST_VALIDATOR`, else built (once; cargo's
/// own lock serialises concurrent builds) into `$PAYWATCH_VALIDATOR_TARGET_DIR`, by
/// default `/var/tmp/paywatch-validator-target`, which outlives clones so CI builds it once.
pub fn validator_path() -> PathBuf {
    if let Some(path) = std::env::var_os("PAYWATCH_TEST_VALIDATOR") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("PAYWATCH_VALIDATOR_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/paywatch-validator-target"));
    let manifest = repo_root().join("tests/solana-validator/Cargo.toml");
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string()));
    cargo
        .args(["build", "--release", "--locked", "--quiet", "--manifest-path"])
        .arg(&manifest);
    // `cargo test` gives this process CARGO_MANIFEST_DIR, CARGO_PKG_NAME and the like; some
    // build scripts of the validator (ring's) rerun when those change, which would rebuild
    // half the validator here and again in `.ci/run`. Build as from a plain shell.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if (key.starts_with("CARGO_") && key != "CARGO_HOME") || key == "OUT_DIR" {
            cargo.env_remove(key.as_ref());
        }
    }
    cargo.env("CARGO_TARGET_DIR", &target);
    let status = cargo.status().expect("run cargo to build the test validator");
    assert!(
        status.success(),
        "building {} failed (its rocksdb needs `apt-get install libclang-dev`)",
        manifest.display()
    );
    target.join("release/paywatch-test-validator")
}

/// The validator process of this test binary, started by the first test that asks for it
/// and shared by every test after it: each test makes its own wallets and mints, and one
/// validator keeps the 2-core CI machine's slots on time where several side by side would
/// not. It stops when the test binary exits and closes its stdin.
struct Process {
    rpc_url: String,
    faucet_base58: String,
    /// Held open for the life of the test binary: the validator serves until it closes.
    _stdin: ChildStdin,
}

static PROCESS: OnceLock<Process> = OnceLock::new();

/// A handle on the shared validator, with a client of the caller's own runtime.
pub struct Validator {
    /// JSON-RPC URL.
    pub rpc_url: String,
    /// The genesis mint keypair: it holds the cluster's SOL.
    pub faucet: Keypair,
    /// A client at `confirmed`.
    pub client: RpcClient,
}

/// Width of the port range the validator binds its gossip, TPU, TVU and repair sockets in.
const PORT_BLOCK: u16 = 200;

/// A block of ports below the OS's ephemeral range (so no client socket takes one), one of
/// 100 between 10,000 and 30,000, chosen by process id so that validators of test binaries
/// run side by side do not collide; its first port (gossip) is free now.
fn port_block() -> (u16, u16) {
    let pid = std::process::id() as u16;
    for n in 0..100u16 {
        let first = 10_000 + (pid.wrapping_mul(7).wrapping_add(n) % 100) * PORT_BLOCK;
        if std::net::TcpListener::bind(("127.0.0.1", first)).is_ok()
            && std::net::UdpSocket::bind(("127.0.0.1", first)).is_ok()
        {
            return (first, first + PORT_BLOCK - 1);
        }
    }
    panic!("no free block of {PORT_BLOCK} ports between 10000 and 30000");
}

/// A port that is free now, with the next one (the validator's pubsub port) free too.
fn free_port_pair() -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = listener.local_addr().expect("local address").port();
        if port < u16::MAX - 1 && std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// Starts the validator with a fresh ledger (which it deletes when it stops) and waits
/// until it serves RPC.
fn spawn_process() -> Process {
    let ledger = tempfile::tempdir().expect("ledger dir").keep();
    let (first, last) = port_block();
    let mut child = Command::new(validator_path())
        .args([
            "--rpc-port",
            &free_port_pair().to_string(),
            "--ports",
            &format!("{first}-{last}"),
            "--ledger",
        ])
        .arg(&ledger)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start paywatch-test-validator");
    // The library prints progress lines first; the answer is the one JSON line. The rest
    // of its output is read and dropped, so the validator never blocks on a full pipe.
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map_while(Result::ok);
    let line = lines
        .find(|line| line.starts_with('{'))
        .expect("the validator exited before serving RPC (run it by hand to see why)");
    std::thread::spawn(move || lines.for_each(drop));
    let info: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the validator printed `{line}` instead of its JSON line: {e}"));
    let stdin = child.stdin.take().expect("stdin");
    // Reaped when it exits (after this test binary closes its stdin).
    std::thread::spawn(move || child.wait());
    Process {
        rpc_url: info["rpc_url"].as_str().expect("rpc_url").to_string(),
        faucet_base58: info["mint_keypair"].as_str().expect("mint_keypair").to_string(),
        _stdin: stdin,
    }
}

impl Validator {
    /// The shared validator, started (and first built, if need be) on first use.
    pub async fn start() -> Self {
        let process = tokio::task::spawn_blocking(|| PROCESS.get_or_init(spawn_process))
            .await
            .expect("start the validator");
        Self {
            rpc_url: process.rpc_url.clone(),
            faucet: Keypair::from_base58_string(&process.faucet_base58),
            client: RpcClient::new_with_commitment(process.rpc_url.clone(), CommitmentConfig::confirmed()),
        }
    }

    /// The CAIP-2 id of this cluster: `solana:` + the genesis hash's first 32 characters.
    pub async fn network_id(&self) -> String {
        let hash = self
            .client
            .get_genesis_hash()
            .await
            .expect("getGenesisHash")
            .to_string();
        format!("solana:{}", &hash[..32])
    }

    /// Signs `instructions` with `signers` (the first pays), sends them (after the node's
    /// preflight simulation) and waits until they are confirmed.
    pub async fn send(&self, instructions: &[Instruction], signers: &[&Keypair]) -> Signature {
        let blockhash = self
            .client
            .get_latest_blockhash()
            .await
            .expect("getLatestBlockhash");
        let signature = self.send_unconfirmed(instructions, signers, blockhash).await;
        self.wait_confirmed(&[signature]).await;
        signature
    }

    /// Signs and sends `instructions` against `blockhash` without waiting (bulk sends);
    /// see [`Validator::wait_confirmed`].
    pub async fn send_unconfirmed(
        &self,
        instructions: &[Instruction],
        signers: &[&Keypair],
        blockhash: solana_hash::Hash,
    ) -> Signature {
        let tx =
            Transaction::new_signed_with_payer(instructions, Some(&signers[0].pubkey()), signers, blockhash);
        self.client.send_transaction(&tx).await.expect("sendTransaction")
    }

    /// Waits until every one of `signatures` is confirmed and succeeded.
    pub async fn wait_confirmed(&self, signatures: &[Signature]) {
        for chunk in signatures.chunks(256) {
            let mut confirmed = false;
            for _ in 0..600 {
                let statuses = self
                    .client
                    .get_signature_statuses(chunk)
                    .await
                    .expect("getSignatureStatuses")
                    .value;
                confirmed = statuses.iter().all(|s| {
                    s.as_ref()
                        .is_some_and(|s| s.satisfies_commitment(CommitmentConfig::confirmed()))
                });
                if confirmed {
                    assert!(
                        statuses.iter().flatten().all(|s| s.err.is_none()),
                        "a transaction failed"
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(confirmed, "transactions not confirmed within 60 s: {chunk:?}");
        }
    }

    /// Sends `instructions` without preflight so that a failing one lands on chain as
    /// failed, and waits until it is confirmed.
    pub async fn send_failing(&self, instructions: &[Instruction], signers: &[&Keypair]) -> Signature {
        let blockhash = self
            .client
            .get_latest_blockhash()
            .await
            .expect("getLatestBlockhash");
        let tx =
            Transaction::new_signed_with_payer(instructions, Some(&signers[0].pubkey()), signers, blockhash);
        let signature = self
            .client
            .send_transaction_with_config(
                &tx,
                RpcSendTransactionConfig {
                    skip_preflight: true,
                    ..RpcSendTransactionConfig::default()
                },
            )
            .await
            .expect("send without preflight");
        for _ in 0..100 {
            let status = self
                .client
                .get_signature_statuses(&[signature])
                .await
                .expect("getSignatureStatuses")
                .value[0]
                .clone();
            if let Some(status) = status
                && status.satisfies_commitment(CommitmentConfig::confirmed())
            {
                assert!(status.err.is_some(), "the transaction was meant to fail");
                return signature;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the failing transaction {signature} never landed");
    }

    /// A new keypair holding `lamports` from the faucet.
    pub async fn funded_wallet(&self, lamports: u64) -> Keypair {
        let wallet = Keypair::new();
        let ix =
            solana_system_interface::instruction::transfer(&self.faucet.pubkey(), &wallet.pubkey(), lamports);
        self.send(&[ix], &[&self.faucet]).await;
        wallet
    }

    /// Creates a mint of `program` (SPL Token or Token-2022) with `decimals`, `authority`
    /// minting.
    pub async fn create_mint(&self, program: TokenProgram, authority: &Keypair, decimals: u8) -> Pubkey {
        self.create_mint_with(program, authority, decimals, MINT_LEN, |_| Vec::new())
            .await
    }

    /// Creates a Token-2022 mint with the transfer-fee extension: each transfer withholds
    /// `basis_points` of its amount (at most `maximum_fee`) in the destination account.
    pub async fn create_fee_mint(
        &self,
        authority: &Keypair,
        decimals: u8,
        basis_points: u16,
        maximum_fee: u64,
    ) -> Pubkey {
        let program = TokenProgram::Token2022;
        let len = ExtensionType::try_calculate_account_len::<Mint>(&[ExtensionType::TransferFeeConfig])
            .expect("mint length with a transfer fee");
        self.create_mint_with(program, authority, decimals, len, |mint| {
            vec![
                initialize_transfer_fee_config(
                    &program.id(),
                    mint,
                    Some(&authority.pubkey()),
                    Some(&authority.pubkey()),
                    basis_points,
                    maximum_fee,
                )
                .expect("initialize_transfer_fee_config"),
            ]
        })
        .await
    }

    /// Creates a mint account of `len` bytes, runs the extension initializers `extensions`
    /// gives for it, then initializes the mint, in one transaction.
    async fn create_mint_with(
        &self,
        program: TokenProgram,
        authority: &Keypair,
        decimals: u8,
        len: usize,
        extensions: impl FnOnce(&Pubkey) -> Vec<Instruction>,
    ) -> Pubkey {
        let mint = Keypair::new();
        let rent = self
            .client
            .get_minimum_balance_for_rent_exemption(len)
            .await
            .expect("rent");
        let mut instructions = vec![solana_system_interface::instruction::create_account(
            &authority.pubkey(),
            &mint.pubkey(),
            rent,
            len as u64,
            &program.id(),
        )];
        instructions.extend(extensions(&mint.pubkey()));
        instructions.push(
            token_ix::initialize_mint2(&program.id(), &mint.pubkey(), &authority.pubkey(), None, decimals)
                .expect("initialize_mint2"),
        );
        self.send(&instructions, &[authority, &mint]).await;
        mint.pubkey()
    }

    /// The balance of token account `account`, in the mint's smallest unit.
    pub async fn token_balance(&self, account: &Pubkey) -> u64 {
        self.client
            .get_token_account_balance(account)
            .await
            .expect("getTokenAccountBalance")
            .amount
            .parse()
            .expect("an integer balance")
    }

    /// Creates `wallet`'s associated token account for `mint` (paid by `payer`).
    pub async fn create_ata(
        &self,
        program: TokenProgram,
        payer: &Keypair,
        wallet: &Pubkey,
        mint: &Pubkey,
    ) -> Pubkey {
        let ix = create_associated_token_account(&payer.pubkey(), wallet, mint, &program.id());
        self.send(&[ix], &[payer]).await;
        program.ata(wallet, mint)
    }

    /// Mints `amount` to `account`.
    pub async fn mint_to(
        &self,
        program: TokenProgram,
        authority: &Keypair,
        mint: &Pubkey,
        account: &Pubkey,
        amount: u64,
    ) {
        let ix = token_ix::mint_to(&program.id(), mint, account, &authority.pubkey(), &[], amount)
            .expect("mint_to");
        self.send(&[ix], &[authority]).await;
    }
}

/// A seller and a payer with SOL, and one mint per token program asked for, each with
/// accounts for both wallets and `balance` minted to the payer: the start of every
/// Solana payment test.
pub struct TokenMarket {
    /// Mint authority of every mint.
    pub authority: Keypair,
    /// The watched pay_to wallet.
    pub seller: Keypair,
    /// The paying wallet.
    pub payer: Keypair,
    /// The mints, in the order of the programs asked for.
    pub mints: Vec<Pubkey>,
}

impl Validator {
    /// Opens a [`TokenMarket`] with mints of `programs`, `decimals` each.
    pub async fn open_market(&self, programs: &[TokenProgram], decimals: u8, balance: u64) -> TokenMarket {
        let authority = self.funded_wallet(10_000_000_000).await;
        let seller = self.funded_wallet(1_000_000_000).await;
        let payer = self.funded_wallet(1_000_000_000).await;
        let mut mints = Vec::new();
        for &program in programs {
            let mint = self.create_mint(program, &authority, decimals).await;
            let payer_account = self.create_ata(program, &authority, &payer.pubkey(), &mint).await;
            self.create_ata(program, &authority, &seller.pubkey(), &mint)
                .await;
            self.mint_to(program, &authority, &mint, &payer_account, balance)
                .await;
            mints.push(mint);
        }
        TokenMarket {
            authority,
            seller,
            payer,
            mints,
        }
    }
}

/// The two SPL token programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProgram {
    /// SPL Token.
    Token,
    /// Token-2022.
    Token2022,
}

impl TokenProgram {
    /// Program id.
    pub fn id(self) -> Pubkey {
        Pubkey::from_str(match self {
            Self::Token => TOKEN_PROGRAM,
            Self::Token2022 => TOKEN_2022_PROGRAM,
        })
        .expect("program id")
    }

    /// `wallet`'s associated token account for `mint`.
    pub fn ata(self, wallet: &Pubkey, mint: &Pubkey) -> Pubkey {
        get_associated_token_address_with_program_id(wallet, mint, &self.id())
    }

    /// `transferChecked` of `amount` from `from`'s ATA to `to`'s ATA.
    pub fn transfer_checked(
        self,
        mint: &Pubkey,
        from: &Keypair,
        to: &Pubkey,
        amount: u64,
        decimals: u8,
    ) -> Instruction {
        token_ix::transfer_checked(
            &self.id(),
            &self.ata(&from.pubkey(), mint),
            mint,
            &self.ata(to, mint),
            &from.pubkey(),
            &[],
            amount,
            decimals,
        )
        .expect("transfer_checked")
    }

    /// Token-2022 `transferCheckedWithFee` of `amount` from `from`'s ATA to `to`'s ATA,
    /// stating the `fee` the mint withholds.
    pub fn transfer_checked_with_fee(
        self,
        mint: &Pubkey,
        from: &Keypair,
        to: &Pubkey,
        amount: u64,
        decimals: u8,
        fee: u64,
    ) -> Instruction {
        transfer_checked_with_fee(
            &self.id(),
            &self.ata(&from.pubkey(), mint),
            mint,
            &self.ata(to, mint),
            &from.pubkey(),
            &[],
            amount,
            decimals,
            fee,
        )
        .expect("transfer_checked_with_fee")
    }

    /// Plain `transfer` (no mint, no decimals) of `amount` from `from`'s ATA to `to`'s ATA.
    pub fn transfer(self, mint: &Pubkey, from: &Keypair, to: &Pubkey, amount: u64) -> Instruction {
        #[allow(deprecated)]
        token_ix::transfer(
            &self.id(),
            &self.ata(&from.pubkey(), mint),
            &self.ata(to, mint),
            &from.pubkey(),
            &[],
            amount,
        )
        .expect("transfer")
    }
}

/// An SPL Memo instruction carrying `text`, signed by `signer`.
pub fn memo(text: &str, signer: &Keypair) -> Instruction {
    spl_memo_interface::instruction::build_memo(
        &Pubkey::from_str(MEMO_PROGRAM).expect("memo program id"),
        text.as_bytes(),
        &[&signer.pubkey()],
    )
}
