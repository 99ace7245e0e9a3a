-- Every audit that ran to its end (`paywatch audit`, or the scheduled audit of
-- `paywatch run` with `audit_interval_secs`): which final blocks it read again, from what,
-- and how many differences it found. The scheduled audit continues after the last block
-- of its own last row; `paywatch status` shows the last row of each network.
CREATE TABLE audits (
    network     TEXT   NOT NULL,
    first_block BIGINT NOT NULL,
    last_block  BIGINT NOT NULL,
    -- Where the chain's side was read: the verifier (verify_rpc_urls) or every block's receipts.
    source      TEXT   NOT NULL CHECK (source IN ('verifier', 'receipts')),
    -- 1: run by `paywatch run` on its schedule; 0: by `paywatch audit`.
    scheduled   BIGINT NOT NULL CHECK (scheduled IN (0, 1)),
    differences BIGINT NOT NULL,
    finished_ms BIGINT NOT NULL,
    CHECK (first_block <= last_block)
);
CREATE INDEX audits_by_network ON audits (network, scheduled, last_block);
