-- Escrowed payments (x402's auth-capture scheme through commerce-payments'
-- AuthCaptureEscrow). An escrowed payment is a row of `payments` (method `auth_capture`,
-- id its paymentInfoHash, amount what was authorized) whose state and sums follow its
-- escrow's events: each event in `escrow_events`, applied to the payment once final
-- (`applied`), its terms (the PaymentInfo the hash commits to) in `escrow_terms`. The
-- vocabularies grow by the states `held` and `released`, the causes of escrow events,
-- the refund rule `escrow` and the method `auth_capture`; the lists are checked against
-- core's enums by a test (tests/migrations.rs).

ALTER TABLE payments ADD COLUMN captured_amount TEXT;
ALTER TABLE payments ADD COLUMN released_amount TEXT;
ALTER TABLE payments ADD COLUMN held_amount TEXT;

CREATE TABLE escrow_events (
    network TEXT NOT NULL,
    tx_id TEXT NOT NULL,
    event_index BIGINT NOT NULL,
    block_number BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    block_time BIGINT,
    escrow TEXT NOT NULL,
    payment_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('authorized', 'charged', 'captured', 'voided', 'reclaimed', 'refunded')),
    amount TEXT NOT NULL,
    fee_bps INTEGER,
    fee_receiver TEXT,
    token_collector TEXT,
    applied INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (network, tx_id, event_index)
);
CREATE INDEX escrow_events_by_payment ON escrow_events (network, payment_id, block_number, event_index);
CREATE INDEX escrow_events_by_block ON escrow_events (network, block_number);
CREATE INDEX escrow_events_to_apply ON escrow_events (network, block_number) WHERE applied = 0;

CREATE TABLE escrow_terms (
    network TEXT NOT NULL,
    payment_id TEXT NOT NULL,
    escrow TEXT NOT NULL,
    operator TEXT NOT NULL,
    pre_approval_expiry BIGINT NOT NULL,
    authorization_expiry BIGINT NOT NULL,
    refund_expiry BIGINT NOT NULL,
    min_fee_bps INTEGER NOT NULL,
    max_fee_bps INTEGER NOT NULL,
    fee_receiver TEXT NOT NULL,
    salt TEXT NOT NULL,
    PRIMARY KEY (network, payment_id)
);

-- postgres:begin
ALTER TABLE payments DROP CONSTRAINT payments_state_known;
ALTER TABLE payments ADD CONSTRAINT payments_state_known
    CHECK (state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released'));
ALTER TABLE payment_history DROP CONSTRAINT payment_history_states_known;
ALTER TABLE payment_history ADD CONSTRAINT payment_history_states_known
    CHECK ((from_state IS NULL OR from_state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released'))
       AND to_state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released'));
ALTER TABLE payment_history DROP CONSTRAINT payment_history_cause_known;
ALTER TABLE payment_history ADD CONSTRAINT payment_history_cause_known
    CHECK (cause IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished', 'captured', 'capture_reorged', 'released', 'release_reorged'));
ALTER TABLE refunds DROP CONSTRAINT refunds_rule_known;
ALTER TABLE refunds ADD CONSTRAINT refunds_rule_known
    CHECK (rule IN ('escrow', 'nonce_commitment', 'memo', 'matching'));
ALTER TABLE payments DROP CONSTRAINT payments_method_known;
ALTER TABLE payments ADD CONSTRAINT payments_method_known
    CHECK (method IN ('eip3009', 'permit2', 'upto', 'erc7710', 'auth_capture', 'spl'));
-- postgres:end

-- sqlite:begin
DROP TRIGGER payments_state_known_insert;
DROP TRIGGER payments_state_known_update;
DROP TRIGGER payment_history_known_insert;
DROP TRIGGER payment_history_known_update;
DROP TRIGGER refunds_rule_known_insert;
DROP TRIGGER refunds_rule_known_update;
DROP TRIGGER payments_method_known_insert;
DROP TRIGGER payments_method_known_update;
CREATE TRIGGER payments_state_known_insert BEFORE INSERT ON payments
WHEN NEW.state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_state_known'); END;
CREATE TRIGGER payments_state_known_update BEFORE UPDATE OF state ON payments
WHEN NEW.state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_state_known'); END;
CREATE TRIGGER payment_history_known_insert BEFORE INSERT ON payment_history
WHEN (NEW.from_state IS NOT NULL AND NEW.from_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released'))
  OR NEW.to_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released')
  OR NEW.cause NOT IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished', 'captured', 'capture_reorged', 'released', 'release_reorged')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_history_known'); END;
CREATE TRIGGER payment_history_known_update BEFORE UPDATE OF from_state, to_state, cause ON payment_history
WHEN (NEW.from_state IS NOT NULL AND NEW.from_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released'))
  OR NEW.to_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped', 'held', 'released')
  OR NEW.cause NOT IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished', 'captured', 'capture_reorged', 'released', 'release_reorged')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_history_known'); END;
CREATE TRIGGER refunds_rule_known_insert BEFORE INSERT ON refunds
WHEN NEW.rule NOT IN ('escrow', 'nonce_commitment', 'memo', 'matching')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_rule_known'); END;
CREATE TRIGGER refunds_rule_known_update BEFORE UPDATE OF rule ON refunds
WHEN NEW.rule NOT IN ('escrow', 'nonce_commitment', 'memo', 'matching')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_rule_known'); END;
CREATE TRIGGER payments_method_known_insert BEFORE INSERT ON payments
WHEN NEW.method NOT IN ('eip3009', 'permit2', 'upto', 'erc7710', 'auth_capture', 'spl')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_method_known'); END;
CREATE TRIGGER payments_method_known_update BEFORE UPDATE OF method ON payments
WHEN NEW.method NOT IN ('eip3009', 'permit2', 'upto', 'erc7710', 'auth_capture', 'spl')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_method_known'); END;
-- sqlite:end
