-- Solana payments were numbered by their order among the transaction's payments to the
-- configured wallets, so adding a wallet or a mint renumbered them (and the upsert kept
-- the old facts under the new number). They are now numbered by the position of their
-- transfer instruction among the transaction's token transfers, the stored event_index:
-- a property of the chain.

-- The transfer row at a payment's event_index holds the facts the chain gave; a row the
-- old numbering mixed up takes them back.
UPDATE payments SET
    payer = (SELECT t.from_address FROM transfers t WHERE t.network = payments.network
             AND t.tx_id = payments.payment_id AND t.event_index = payments.event_index),
    pay_to = (SELECT t.to_address FROM transfers t WHERE t.network = payments.network
              AND t.tx_id = payments.payment_id AND t.event_index = payments.event_index),
    amount = (SELECT t.amount FROM transfers t WHERE t.network = payments.network
              AND t.tx_id = payments.payment_id AND t.event_index = payments.event_index),
    asset = (SELECT t.token FROM transfers t WHERE t.network = payments.network
             AND t.tx_id = payments.payment_id AND t.event_index = payments.event_index)
WHERE network LIKE 'solana:%' AND EXISTS (
    SELECT 1 FROM transfers t WHERE t.network = payments.network
    AND t.tx_id = payments.payment_id AND t.event_index = payments.event_index);

-- Renumber through negative numbers (-1 - event_index), so that no two rows share a key
-- on the way; then flip them back.
UPDATE payment_history SET index_in_tx = -1 - (
    SELECT p.event_index FROM payments p WHERE p.network = payment_history.network
    AND p.payment_id = payment_history.payment_id AND p.index_in_tx = payment_history.index_in_tx)
WHERE network LIKE 'solana:%' AND EXISTS (
    SELECT 1 FROM payments p WHERE p.network = payment_history.network
    AND p.payment_id = payment_history.payment_id AND p.index_in_tx = payment_history.index_in_tx);

UPDATE refunds SET index_in_tx = -1 - (
    SELECT p.event_index FROM payments p WHERE p.network = refunds.network
    AND p.payment_id = refunds.payment_id AND p.index_in_tx = refunds.index_in_tx)
WHERE network LIKE 'solana:%' AND EXISTS (
    SELECT 1 FROM payments p WHERE p.network = refunds.network
    AND p.payment_id = refunds.payment_id AND p.index_in_tx = refunds.index_in_tx);

UPDATE intents SET index_in_tx = -1 - (
    SELECT p.event_index FROM payments p WHERE p.network = intents.network
    AND p.payment_id = intents.payment_id AND p.index_in_tx = intents.index_in_tx)
WHERE network LIKE 'solana:%' AND EXISTS (
    SELECT 1 FROM payments p WHERE p.network = intents.network
    AND p.payment_id = intents.payment_id AND p.index_in_tx = intents.index_in_tx);

UPDATE payments SET index_in_tx = -1 - event_index WHERE network LIKE 'solana:%';

UPDATE payment_history SET index_in_tx = -1 - index_in_tx WHERE network LIKE 'solana:%' AND index_in_tx < 0;
UPDATE refunds SET index_in_tx = -1 - index_in_tx WHERE network LIKE 'solana:%' AND index_in_tx < 0;
UPDATE intents SET index_in_tx = -1 - index_in_tx WHERE network LIKE 'solana:%' AND index_in_tx < 0;
UPDATE payments SET index_in_tx = -1 - index_in_tx WHERE network LIKE 'solana:%' AND index_in_tx < 0;
