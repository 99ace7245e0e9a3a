-- paywatch schema, portable between SQLite and Postgres (sqlx applies it to either).
-- Addresses and hashes are stored in their canonical spelling (EVM: 0x + lowercase hex;
-- Solana: base58). Amounts are exact decimal integers in the token's smallest unit,
-- stored as text: never a float. Times are Unix seconds (block times) or milliseconds
-- (paywatch's own observation times).

-- Every token transfer read from a watched token: payments, refunds and plain transfers.
CREATE TABLE transfers (
    network      TEXT   NOT NULL,
    tx_id        TEXT   NOT NULL,
    event_index  BIGINT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash   TEXT   NOT NULL,
    block_time   BIGINT,
    token        TEXT   NOT NULL,
    from_address TEXT   NOT NULL,
    to_address   TEXT   NOT NULL,
    amount       TEXT   NOT NULL,
    PRIMARY KEY (network, tx_id, event_index)
);
CREATE INDEX transfers_by_block ON transfers (network, block_number);
CREATE INDEX transfers_by_parties ON transfers (network, token, from_address, to_address, block_number);

-- Every EIP-3009 AuthorizationUsed(authorizer, nonce) event.
CREATE TABLE authorizations (
    network      TEXT   NOT NULL,
    tx_id        TEXT   NOT NULL,
    event_index  BIGINT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash   TEXT   NOT NULL,
    token        TEXT   NOT NULL,
    authorizer   TEXT   NOT NULL,
    nonce        TEXT   NOT NULL,
    PRIMARY KEY (network, tx_id, event_index)
);
CREATE INDEX authorizations_by_block ON authorizations (network, block_number);
CREATE INDEX authorizations_by_nonce ON authorizations (network, authorizer, nonce);

-- x402 payments: an authorization paired with the transfer it released.
-- A payment keeps its row when a reorg moves it to another block (index_in_tx is stable
-- across blocks, event_index is not); one whose block vanished is marked dropped.
CREATE TABLE payments (
    network          TEXT   NOT NULL,
    payment_id       TEXT   NOT NULL,
    index_in_tx      BIGINT NOT NULL,
    event_index      BIGINT NOT NULL,
    block_number     BIGINT NOT NULL,
    block_hash       TEXT   NOT NULL,
    block_time       BIGINT,
    payer            TEXT   NOT NULL,
    pay_to           TEXT   NOT NULL,
    amount           TEXT   NOT NULL,
    asset            TEXT   NOT NULL,
    nonce            TEXT,
    state            TEXT   NOT NULL,
    first_seen_ms    BIGINT NOT NULL,
    state_changed_ms BIGINT NOT NULL,
    PRIMARY KEY (network, payment_id, index_in_tx)
);
CREATE INDEX payments_by_block ON payments (network, block_number);
CREATE INDEX payments_by_state ON payments (network, state, block_number);

-- Per (network, token): the next block to read. Advanced in the same transaction as the rows.
CREATE TABLE cursors (
    network    TEXT   NOT NULL,
    token      TEXT   NOT NULL,
    next_block BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (network, token)
);

-- Per network: the head and final block last seen, for confirmations and lag.
CREATE TABLE chain_heads (
    network     TEXT   PRIMARY KEY,
    head_block  BIGINT NOT NULL,
    final_block BIGINT,
    updated_ms  BIGINT NOT NULL
);

-- Hashes of processed blocks, to notice reorgs and find the fork point.
CREATE TABLE blocks (
    network     TEXT   NOT NULL,
    number      BIGINT NOT NULL,
    hash        TEXT   NOT NULL,
    parent_hash TEXT,
    PRIMARY KEY (network, number)
);
