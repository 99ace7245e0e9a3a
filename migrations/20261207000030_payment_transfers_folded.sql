-- Issue 18: a payment is stored once. A payment's own transfer (its transaction, log or
-- instruction, block, payer, seller, asset, amount and memo) is all in its payments row;
-- from now on ingestion writes no transfers row for it (core's `transfers_to_write`), and
-- every reader of kept transfers reads the view `stored_transfers`: the transfers rows and
-- the transfers payment rows hold (`payment_transfers`).
--
-- A payment's row holds its transfer unless the payment is escrowed (its transfer goes to
-- the escrow, not to its seller), dropped (its transaction left the chain, and its
-- transfer with it), or its transfer has a row of its own (the payment's facts are not
-- the transfer's, or two payments name it).
CREATE VIEW payment_transfers AS
SELECT p.network, p.payment_id AS tx_id, p.event_index, p.block_number, p.block_hash,
       p.block_time, p.asset AS token, p.payer AS from_address, p.pay_to AS to_address,
       p.amount, p.memo
FROM payments p
WHERE p.state <> 'dropped'
  AND p.method <> 'auth_capture'
  AND NOT EXISTS (
      SELECT 1 FROM transfers t
      WHERE t.network = p.network AND t.tx_id = p.payment_id AND t.event_index = p.event_index
  );

CREATE VIEW stored_transfers AS
SELECT network, tx_id, event_index, block_number, block_hash, block_time, token,
       from_address, to_address, amount, memo
FROM transfers
UNION ALL
SELECT network, tx_id, event_index, block_number, block_hash, block_time, token,
       from_address, to_address, amount, memo
FROM payment_transfers;

-- The rows stored before that a payment's row holds, fact for fact, when no other payment
-- names the same transfer: `stored_transfers` lists each of them as before.
DELETE FROM transfers
WHERE EXISTS (
    SELECT 1 FROM payments p
    WHERE p.network = transfers.network
      AND p.payment_id = transfers.tx_id
      AND p.event_index = transfers.event_index
      AND p.state <> 'dropped'
      AND p.method <> 'auth_capture'
      AND p.block_number = transfers.block_number
      AND p.block_hash = transfers.block_hash
      AND p.block_time IS NOT DISTINCT FROM transfers.block_time
      AND p.asset = transfers.token
      AND p.payer = transfers.from_address
      AND p.pay_to = transfers.to_address
      AND p.amount = transfers.amount
      AND p.memo IS NOT DISTINCT FROM transfers.memo
)
AND (
    SELECT COUNT(*) FROM payments q
    WHERE q.network = transfers.network
      AND q.payment_id = transfers.tx_id
      AND q.event_index = transfers.event_index
      AND q.state <> 'dropped'
      AND q.method <> 'auth_capture'
) = 1;
