-- Every stored state, history cause and refund rule is one core's enums write
-- (paywatch-core: PaymentState, HistoryCause, RefundRule); the database now refuses any
-- other spelling, so a hand edit or a bug cannot store a state no reader knows. The lists
-- are checked against the enums by a test (tests/migrations.rs).
--
-- Postgres takes CHECK constraints on existing tables; SQLite cannot add one without
-- rebuilding the table, so there the same rule is a trigger per table and statement kind.
-- paywatch applies only the section of its backend (paywatch-store, migrations.rs).

-- postgres:begin
ALTER TABLE payments ADD CONSTRAINT payments_state_known
    CHECK (state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped'));
ALTER TABLE payment_history ADD CONSTRAINT payment_history_states_known
    CHECK ((from_state IS NULL OR from_state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped'))
       AND to_state IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped'));
ALTER TABLE payment_history ADD CONSTRAINT payment_history_cause_known
    CHECK (cause IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished'));
ALTER TABLE refunds ADD CONSTRAINT refunds_rule_known
    CHECK (rule IN ('nonce_commitment', 'memo', 'matching'));
-- postgres:end

-- sqlite:begin
CREATE TRIGGER payments_state_known_insert BEFORE INSERT ON payments
WHEN NEW.state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_state_known'); END;
CREATE TRIGGER payments_state_known_update BEFORE UPDATE OF state ON payments
WHEN NEW.state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payments_state_known'); END;
CREATE TRIGGER payment_history_known_insert BEFORE INSERT ON payment_history
WHEN (NEW.from_state IS NOT NULL AND NEW.from_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped'))
  OR NEW.to_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped')
  OR NEW.cause NOT IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_history_known'); END;
CREATE TRIGGER payment_history_known_update BEFORE UPDATE OF from_state, to_state, cause ON payment_history
WHEN (NEW.from_state IS NOT NULL AND NEW.from_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped'))
  OR NEW.to_state NOT IN ('pending', 'paid', 'partially_refunded', 'refunded', 'dropped')
  OR NEW.cause NOT IN ('seen', 'seen_final', 'final', 'reorged', 'reincluded', 'refund', 'refund_reorged', 'vanished')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: payment_history_known'); END;
CREATE TRIGGER refunds_rule_known_insert BEFORE INSERT ON refunds
WHEN NEW.rule NOT IN ('nonce_commitment', 'memo', 'matching')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_rule_known'); END;
CREATE TRIGGER refunds_rule_known_update BEFORE UPDATE OF rule ON refunds
WHEN NEW.rule NOT IN ('nonce_commitment', 'memo', 'matching')
BEGIN SELECT RAISE(ABORT, 'CHECK constraint failed: refunds_rule_known'); END;
-- sqlite:end
